"""What the black-box drills share: the servers of scripts/deps.sh, instances of the built binary
with their defaults, and small HTTP and SQL helpers. Run `eval "$(scripts/deps.sh env)"` first."""
import http.client, json, os, signal, socket, subprocess, sys, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("PROFILE_SERVICE_BIN", os.path.join(ROOT, ".build/debug/profile-service"))
STATE = os.environ.get("PROFILE_STATE_DIR", os.path.join(ROOT, ".state"))
PG_PORT = os.environ.get("PROFILE_PG_PORT", "55432")
MC_PORTS = os.environ.get("PROFILE_MC_PORTS", "21211,21212").split(",")
DB_URL = os.environ.get("PROFILE_DATABASE_URL", f"postgres://postgres@127.0.0.1:{PG_PORT}/profiles")
MEMCACHED = os.environ.get("PROFILE_MEMCACHED", ",".join(f"127.0.0.1:{p}" for p in MC_PORTS))


def psql(sql):
    out = subprocess.run(["psql", "-X", "-q", "-At", DB_URL, "-c", sql], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def get(port, path, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path, headers=headers or {})
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


def version(port, id):
    status, body = get(port, f"/users/profile/{id}")
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


