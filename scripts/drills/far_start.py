#!/usr/bin/env python3
"""A far region's instance started again and again (docs/design.md §3.10, docs/operations.md):
region A's instance runs near PostgreSQL (the default cache cluster, the first half of the
memcached nodes); region B's instance names a cluster of its own, has the other half of the nodes
and reaches PostgreSQL across a delay proxy (scripts/delay.sh, 30 ms round trip by default). B is
started N times (default 20); each start records the time to the first /healthz 200, /readyz 200,
200 of GET /users/profile/{id} for an existing profile (inserted before the start, so the first
read misses B's cache and reads PostgreSQL across the link) and /readyz saying the change feed is
active (this instance holds its cluster's slot); once all four are in, the time from a psql UPDATE
of that profile to B's memcached holding the new version (or no entry). B is stopped with SIGTERM,
every fifth start with SIGKILL (the kernel closes a killed process's connections);
--freeze-every N stops every N-th with SIGSTOP instead (a host gone silent: its connections stay
open), killed after the next start; --fresh-cluster gives every start a new cluster, whose slot
the start creates. Prints a table, min/median/p90/max, and B's log lines of every start that took
more than 2 s to serve, to take the slot or to repair.

    export PROFILE_STATE_DIR=… PROFILE_PG_PORT=… PROFILE_MC_PORTS=a1,a2,b1,b2 \\
        PROFILE_DELAY_DIR=… PROFILE_DELAY_PORT_OFFSET=…
    scripts/deps.sh start; eval "$(scripts/deps.sh env)"
    scripts/delay.sh start 30
    PROFILE_SERVICE_BIN=.build/debug/profile-service python3 scripts/drills/far_start.py [--runs 20]

PROFILE_MC_PORTS needs at least two ports (deps.sh starts one node per port): region A takes the
first half, region B the rest. The delay proxy's PostgreSQL route (scripts/delay.sh env) is B's
--database-url; its memcached nodes are B's own, direct."""
import argparse, functools, json, math, os, re, signal, socket, statistics, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import drill  # noqa: E402
from drill import BIN, MC_PORTS, PG_PORT, STATE, free_port, psql, serve  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIRECT_URL = f"postgres://postgres@127.0.0.1:{PG_PORT}/profiles"
SLOW_S = 2.0
LIMIT_S = 60.0
CLUSTER = "far_drill"
LOG_LINE = re.compile(r"level=(warning|error|critical|notice)|change feed|slot|profile fields|waiting|PostgreSQL")


def far_database_url():
    env = subprocess.run([os.path.join(ROOT, "scripts/delay.sh"), "env"], capture_output=True, text=True)
    match = re.search(r"PROFILE_DATABASE_URL='([^']+)'", env.stdout)
    if env.returncode != 0 or not match:
        raise SystemExit("the delay proxy is not running: scripts/delay.sh start 30 (with this drill's environment)")
    return match.group(1)


get = functools.partial(drill.get, timeout=2.0)  # a start is polled: a request waits 2 s at most


def memcached_version(ports, key):
    """The version of the service's entry for `key` on any of these nodes (None: none holds one)."""
    for port in ports:
        try:
            with socket.create_connection(("127.0.0.1", int(port)), timeout=1) as s:
                s.sendall(f"get {key}\r\n".encode())
                data = b""
                while not data.endswith(b"END\r\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        except OSError:
            continue
        if data.startswith(b"VALUE"):
            value = data.split(b"\r\n", 1)[1]
            if len(value) > 10 and value[0] == 0xA1 and value[1:2] == b"F":
                return int.from_bytes(value[2:6], "big")
    return None


class FeedActive(threading.Thread):
    """Reads /readyz every 10 ms from `started` until its change_feed says active; keeps the states seen."""

    def __init__(self, port, started):
        super().__init__(daemon=True)
        self.port, self.started, self.at, self.states = port, started, None, []

    def run(self):
        while time.time() - self.started < LIMIT_S:
            try:
                body = json.loads(get(self.port, "/readyz")[1])
                state = body.get("change_feed", {}).get("state")
            except (OSError, ValueError):
                state = None
            if state and (not self.states or self.states[-1] != state):
                self.states.append(state)
            if state == "active":
                self.at = time.time() - self.started
                return
            time.sleep(0.01)


class FirstOK(threading.Thread):
    """Asks `path` every 10 ms from `started` until a 200; keeps what else it heard."""

    def __init__(self, port, path, started):
        super().__init__(daemon=True)
        self.port, self.path, self.started = port, path, started
        self.at, self.heard = None, {}

    def run(self):
        while time.time() - self.started < LIMIT_S:
            try:
                status = get(self.port, self.path).status
            except ConnectionRefusedError:
                status = "refused"
            except socket.timeout:
                status = "timeout"
            except OSError as error:
                status = type(error).__name__
            if status == 200:
                self.at = time.time() - self.started
                return
            self.heard[status] = self.heard.get(status, 0) + 1
            time.sleep(0.01)


def start_a(secret, nodes):
    return serve(BIN, ["--jwt-secret-file", secret, "--no-access-log", "--database-url", DIRECT_URL, "--memcached", nodes],
                 "far-start-a")


def drop_cluster(name):
    """`cache-cluster drop`, retried while the last walsender lets go of the slot."""
    for _ in range(100):
        if subprocess.run([BIN, "cache-cluster", "drop", name, "--database-url", DIRECT_URL],
                          capture_output=True).returncode == 0:
            return
        time.sleep(0.2)


def one_start(run, secret, far_url, nodes, node_ports, stop, cluster=CLUSTER):
    profile = int(time.time() * 1000) % 1_000_000_000 * 1000 + 7_000_000_000_000 + run
    psql(f"INSERT INTO user_profiles (id, username, display_name) VALUES ({profile}, 'far{profile}', 'Far')")
    port = free_port()
    log_path = os.path.join(STATE, f"far-start-b-{run:02d}.log")
    log = open(log_path, "w")
    started = time.time()
    process = subprocess.Popen(
        [BIN, "serve", "--port", str(port), "--jwt-secret-file", secret, "--no-access-log",
         "--cache-cluster", cluster, "--database-url", far_url, "--memcached", nodes], stdout=log, stderr=log)
    probes = [FirstOK(port, path, started) for path in ("/healthz", "/readyz", f"/users/profile/{profile}")]
    probes.append(FeedActive(port, started))
    for probe in probes:
        probe.start()
    for probe in probes:
        probe.join(LIMIT_S + 5)
    row = {"run": run, "healthz": probes[0].at, "readyz": probes[1].at, "profile": probes[2].at,
           "heard": probes[2].heard, "active": probes[3].at, "states": probes[3].states, "stop": stop,
           "log": log_path, "feed": None, "feed_how": "-"}
    if probes[2].at is not None:
        psql(f"UPDATE user_profiles SET display_name = 'Changed', version = version + 1 WHERE id = {profile}")
        changed = time.time()
        key = f"profile-service:v1:{profile}"
        while time.time() - changed < 20:
            cached = memcached_version(node_ports, key)
            if cached is None or cached >= 2:
                # Repaired, or gone (a new slot's gap flushes the cluster): nothing older is served.
                row["feed"] = time.time() - changed
                row["feed_how"] = "repaired" if cached else "gone"
                break
            time.sleep(0.005)
    log.close()
    if stop == "SIGSTOP":
        # A host gone silent: its connections stay open, nothing answers on them. Killed after
        # the next start was measured.
        process.send_signal(signal.SIGSTOP)
        return row, process
    process.send_signal(signal.SIGKILL if stop == "SIGKILL" else signal.SIGTERM)
    process.wait(30)
    return row, None


def ms(value):
    return "—" if value is None else f"{value * 1000:.0f}"


def summary(name, values):
    got = sorted(v for v in values if v is not None)
    if not got:
        return f"{name}: none"
    p90 = got[math.ceil(0.9 * len(got)) - 1]  # nearest rank
    missing = len(values) - len(got)
    return (f"{name}: min {ms(got[0])} ms, median {ms(statistics.median(got))} ms, p90 {ms(p90)} ms, "
            f"max {ms(got[-1])} ms" + (f" ({missing} never)" if missing else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--kill-every", type=int, default=5, help="every n-th start is stopped with SIGKILL")
    parser.add_argument("--fresh-cluster", action="store_true",
                        help="every start names a new cache cluster (its slot is created at start, dropped after)")
    parser.add_argument("--freeze-every", type=int, default=0,
                        help="every n-th start is stopped with SIGSTOP (a host gone silent), killed after the next start")
    arguments = parser.parse_args()
    if len(MC_PORTS) < 2:
        raise SystemExit("PROFILE_MC_PORTS needs two ports or more: region A takes the first half, region B the rest")
    half = len(MC_PORTS) // 2
    a_nodes = ",".join(f"127.0.0.1:{p}" for p in MC_PORTS[:half])
    b_ports = MC_PORTS[half:]
    b_nodes = ",".join(f"127.0.0.1:{p}" for p in b_ports)
    far_url = far_database_url()
    secret = os.path.join(tempfile.mkdtemp(), "jwt-secret")
    with open(secret, "w") as f:
        f.write("far-start-drill-secret-" + "x" * 40)
    a, a_port = start_a(secret, a_nodes)
    print(f"region A: port {a_port}, memcached {a_nodes}, {DIRECT_URL}")
    print(f"region B: cluster {CLUSTER + ('_<pid>_<start>, a new one each start' if arguments.fresh_cluster else '')}, memcached {b_nodes}, {far_url}")
    rows, frozen = [], None
    try:
        for run in range(1, arguments.runs + 1):
            stop = "SIGTERM"
            if arguments.kill_every > 0 and run % arguments.kill_every == 0:
                stop = "SIGKILL"
            if arguments.freeze_every > 0 and run % arguments.freeze_every == 0:
                stop = "SIGSTOP"
            cluster = f"{CLUSTER}_{os.getpid()}_{run}" if arguments.fresh_cluster else CLUSTER
            row, still = one_start(run, secret, far_url, b_nodes, b_ports, stop, cluster)
            if arguments.fresh_cluster:
                drop_cluster(cluster)
            if frozen:
                frozen.kill()
                frozen.wait(30)
            frozen = still
            rows.append(row)
            print(f"start {run:2d}: healthz {ms(row['healthz']):>6} ms  readyz {ms(row['readyz']):>6} ms  "
                  f"first profile 200 {ms(row['profile']):>6} ms  feed active {ms(row['active']):>6} ms  UPDATE→B's cache {ms(row['feed']):>6} ms ({row['feed_how']})  "
                  f"stopped by {row['stop']}  (before the 200: {row['heard'] or '-'}; feed {'→'.join(row['states'])})", flush=True)
    finally:
        if frozen:
            frozen.kill()
        a.terminate()
        a.wait(30)
    print()
    print("| start | /healthz 200 ms | /readyz 200 ms | first profile 200 ms | feed active ms | UPDATE → B's cache ms | stopped by |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for row in rows:
        print(f"| {row['run']} | {ms(row['healthz'])} | {ms(row['readyz'])} | {ms(row['profile'])} | {ms(row['active'])} | {ms(row['feed'])} | {row['stop']} |")
    print()
    for name, key in (("/healthz 200", "healthz"), ("/readyz 200", "readyz"), ("first profile 200", "profile"), ("feed active", "active"),
                      ("UPDATE → B's cache", "feed")):
        print(summary(name, [row[key] for row in rows]))
    slow = [row for row in rows if any(row[k] is None or row[k] > SLOW_S for k in ("profile", "active", "feed"))]
    print(f"\nstarts with a first profile 200, an active feed or an UPDATE in B's cache after more than {SLOW_S:.0f} s (or never): {len(slow)}")
    for row in slow:
        print(f"\n--- start {row['run']} (after a {rows[row['run'] - 2]['stop'] if row['run'] > 1 else 'fresh'} stop), "
              f"first profile 200 after {ms(row['profile'])} ms, feed active after {ms(row['active'])} ms; B's log {row['log']}:")
        with open(row["log"]) as f:
            for line in f:
                if LOG_LINE.search(line):
                    print("   ", line.rstrip()[:400])


if __name__ == "__main__":
    main()
