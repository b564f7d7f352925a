"""What the black-box drills share: the servers of scripts/deps.sh, instances of the built binary
with their defaults, and the HTTP and SQL helpers of scripts/service_helpers.py (free_port, get,
request; psql on the drills' database). Run `eval "$(scripts/deps.sh env)"` first."""
import functools, http.client, json, os, signal, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # service_helpers
import service_helpers  # noqa: E402
from service_helpers import free_port, get, request  # noqa: E402,F401 (the drills import them from here)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("PROFILE_SERVICE_BIN", os.path.join(ROOT, ".build/debug/profile-service"))
STATE = os.environ.get("PROFILE_STATE_DIR", os.path.join(ROOT, ".state"))
PG_PORT = os.environ.get("PROFILE_PG_PORT", "55432")
MC_PORTS = os.environ.get("PROFILE_MC_PORTS", "21211,21212").split(",")
DB_URL = os.environ.get("PROFILE_DATABASE_URL", f"postgres://postgres@127.0.0.1:{PG_PORT}/profiles")
MEMCACHED = os.environ.get("PROFILE_MEMCACHED", ",".join(f"127.0.0.1:{p}" for p in MC_PORTS))
psql = functools.partial(service_helpers.psql, DB_URL)  # psql(sql): its output; PsqlError on failure


def start_service():
    return serve(BIN, ["--no-access-log", "--auth", "none"], "drill")


def serve(binary, arguments, log_prefix):
    """`binary serve` on a free port with `arguments` and the servers above; (process, port) once
    /readyz answers 200."""
    port = free_port()
    env = dict(os.environ, PROFILE_DATABASE_URL=DB_URL, PROFILE_MEMCACHED=MEMCACHED)
    log = open(os.path.join(STATE, f"{log_prefix}-{port}.log"), "w")
    process = subprocess.Popen([binary, "serve", "--port", str(port), *arguments], env=env, stdout=log, stderr=log)
    for _ in range(300):
        try:
            if get(port, "/readyz")[0] == 200:
                return process, port
        except OSError:
            pass
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{binary} on {port} did not become ready")


STARTED = []  # the instances start_instance started and stop_instances has not stopped: (process, port)


def start_instance(database_url=DB_URL, memcached=MEMCACHED, serve_args=(), log_prefix="drill", without_env=(),
                   auth=("--auth", "none")):
    """`serve --no-access-log` of the built binary with `auth` (`--auth none`) on a free port, with `serve_args`,
    on `database_url` and `memcached` (the environment's variables in `without_env` left out);
    its port once /readyz answers 200. Its log: $PROFILE_STATE_DIR/<log_prefix>-<port>.log."""
    port = free_port()
    env = dict(os.environ, PROFILE_DATABASE_URL=database_url, PROFILE_MEMCACHED=memcached)
    for name in without_env:
        env.pop(name, None)
    log = open(os.path.join(STATE, f"{log_prefix}-{port}.log"), "w")
    process = subprocess.Popen([BIN, "serve", "--port", str(port), "--no-access-log", *auth, *serve_args],
                               env=env, stdout=log, stderr=log)
    STARTED.append((process, port))
    deadline = time.time() + 60
    while time.time() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"service on {port} exited with {process.returncode}; see {log.name}")
        try:
            if get(port, "/readyz")[0] == 200:
                return port
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"service on {port} did not become ready; see {log.name}")


def stop_instances():
    """Stops every instance start_instance started (SIGTERM, then SIGKILL after 30 s)."""
    while STARTED:
        process, _ = STARTED.pop()
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class KeepAliveThread(threading.Thread):
    """A drill's thread: one keep-alive connection per instance; `work()` is its body, and an
    exception ends it into `failure` (the run reports it, keeping the figures so far)."""

    def __init__(self, name):
        super().__init__(daemon=True, name=name)
        self.connections = {}
        self.failure = None

    def exchange(self, port, method, path, body=None, headers=None):
        """(response, raw body, started, ended) over this thread's connection to `port` (monotonic
        times; `body` sent as JSON); None when the connection failed (it is dropped)."""
        headers = dict(headers or {}, **({"Content-Type": "application/json"} if body is not None else {}))
        data = json.dumps(body) if body is not None else None
        connection = self.connections.get(port)
        try:
            if connection is None:
                connection = self.connections[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            started = time.monotonic()
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            raw = response.read()
            ended = time.monotonic()
            if response.will_close:
                connection.close()
                del self.connections[port]
            return response, raw, started, ended
        except (OSError, http.client.HTTPException):
            if connection is not None:
                connection.close()
            self.connections.pop(port, None)
            return None

    def run(self):
        try:
            self.work()
        except Exception as error:
            self.failure = f"{self.name}: {error!r}"
        finally:
            for connection in self.connections.values():
                connection.close()


def parsed_json(raw):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def run_for(seconds, threads, stop):
    """Starts `threads`, lets them run `seconds`, sets `stop` and joins them (30 s each); the
    seconds they ran."""
    began = time.monotonic()
    for thread in threads:
        thread.start()
    try:
        time.sleep(seconds)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    return time.monotonic() - began


def version(port, id):
    status, body, _ = get(port, f"/users/profile/{id}")
    return json.loads(body)["version"] if status == 200 else None


def memcached_pids():
    return [int(open(os.path.join(STATE, "memcached", f"{p}.pid")).read()) for p in MC_PORTS]


def wait_stopped(pid):
    for _ in range(2000):
        if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T":
            return
        time.sleep(0.001)


def seed(count, prefix):
    base = int(time.time() * 1000) % 1_000_000_000 * 1000 + 5_000_000_000_000
    ids = [base + i for i in range(count)]
    values = ",".join(f"({i}, '{prefix}{i}', 'Seed')" for i in ids)
    psql(f"INSERT INTO user_profiles (id, username, display_name) VALUES {values}")
    return ids


def until(predicate, timeout):
    start = time.time()
    while time.time() - start < timeout:
        if predicate():
            return time.time() - start
        time.sleep(0.01)
    return None


