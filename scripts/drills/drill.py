"""What the black-box drills share: the servers of scripts/deps.sh, instances of the built binary
with their defaults, and the HTTP and SQL helpers of scripts/service_helpers.py (free_port, get,
request; psql on the drills' database). Run `eval "$(scripts/deps.sh env)"` first."""
import functools, json, os, signal, subprocess, sys, threading, time

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


