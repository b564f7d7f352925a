#!/usr/bin/env python3
"""Checks the repository's alert rules and dashboard against a real Prometheus scraping a real
instance of the service, on the servers of scripts/deps.sh (`scripts/deps.sh start` first).

It starts Debian's `prometheus` on a free loopback port (its own temporary storage, scrape and
rule evaluation every second) with the rules of deploy/prometheus/*.rules.yml, every `for:`
shortened to a few seconds in a temporary copy, scraping one `profile-service serve` it starts
(after `profile-service migrate`) on a free loopback port. The instance reads misses from a
standby on a port where, at first, nothing listens. Then:

1. traffic of every kind (GETs that hit and miss, a PUT, a list, a 404, a 400, /readyz, an event
   stream opened briefly), then `promtool check metrics` on the live /metrics: any finding fails;
2. a standby unreachable: ProfileServiceStandbyUnavailable must go pending → firing; a standby of
   the project's PostgreSQL is then started on that port (scripts/deps.sh start-standby with a
   state directory of its own) and the alert must resolve;
3. a memcached node frozen (SIGSTOP of the process listening on its port, GET traffic going on so
   that the circuit breaker notices): ProfileServiceMemcachedNodeDown pending → firing; SIGCONT:
   resolved;
4. the change feed stalled by `DROP PUBLICATION profile_service_changes` and a change in SQL:
   ProfileServiceChangeFeedStalled pending → firing; `CREATE PUBLICATION profile_service_changes
   FOR TABLE user_profiles` (the runbook's remedy; the feed goes on by itself, closing the changes
   made meanwhile as a gap): resolved;
5. every query of every panel of deploy/grafana/profile-service.json evaluated through
   /api/v1/query (any error fails), and every series it names must be on the instance's /metrics
   or recorded by a rule of deploy/prometheus/.

Whatever happens, the memcached node gets its SIGCONT, the publication is created again if it is
missing, the standby it started is stopped, and Prometheus and the service are stopped. Prints
each alert's transitions with their timings. Python's standard library only.

  scripts/check-prometheus.py [--binary .build/debug/profile-service]
"""
import argparse, functools, glob, json, os, random, re, shutil, signal, socket, subprocess, sys, tempfile
import threading, time
import urllib.parse

import service_helpers
from service_helpers import free_port, request_url

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = sorted(glob.glob(os.path.join(ROOT, "deploy/prometheus/*.rules.yml")))
DASHBOARD = os.path.join(ROOT, "deploy/grafana/profile-service.json")
DEPS = os.path.join(ROOT, "scripts/deps.sh")
JOB = "profile-service"  # the job name the rules expect (deploy/prometheus/prometheus.example.yml)
FOR = "5s"  # every `for:` of the rules, in the test's copy
PUBLICATION = "profile_service_changes"
TEST_IDS = list(range(7_300_001, 7_300_021))  # profiles of this check only, deleted at the end
ROUTES = "/users/profile/{id}"
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
            "offset", "inf", "nan"}


def log(message):
    print(f"check-prometheus: {message}", flush=True)


class Failure(Exception):
    pass


# A failed statement raises service_helpers.PsqlError ("psql failed: SQL: psql's message"), a
# CalledProcessError: main reports it as it reports a Failure.
psql = functools.partial(service_helpers.psql, timeout=60)


def wait_port(port, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise Failure(f"{what} does not listen on 127.0.0.1:{port} after {timeout} s")


def deps_env():
    out = subprocess.run([DEPS, "env"], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"^export (\w+)='([^']*)'$", out, re.M))


def memcached_pid(port, state_dir):
    """The pid of the memcached listening on `port`: its scripts/deps.sh pid file, else ss."""
    pidfile = os.path.join(state_dir, "memcached", f"{port}.pid")
    if os.path.exists(pidfile):
        pid = int(open(pidfile).read().split()[0])
        if os.path.exists(f"/proc/{pid}"):
            return pid
    out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True).stdout
    m = re.search(r'"memcached",pid=(\d+)', out)
    if not m:
        raise Failure(f"no memcached listens on port {port}")
    return int(m.group(1))


def shortened_rules(text):
    """The rule file with every `for:` set to FOR."""
    return re.sub(r"^(\s*)for:\s*\S+\s*$", rf"\g<1>for: {FOR}", text, flags=re.M)


def recorded_names():
    names = set()
    for path in RULES:
        names.update(re.findall(r"^\s*-?\s*record:\s*(\S+)\s*$", open(path).read(), re.M))
    return names


def metric_names(expr):
    """The series names a PromQL expression selects (a light parse: strings, matchers, ranges and
    grouping clauses removed; what is left and is not a function, keyword or number is a name)."""
    e = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", e):
        if e[m.end():].lstrip().startswith("(") or m.group(0).lower() in KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def exposed_names(metrics_text):
    return {line.split("{")[0].split(" ")[0] for line in metrics_text.splitlines() if line and not line.startswith("#")}


class AlertWatch(threading.Thread):
    """Polls Prometheus's /api/v1/alerts and records each alert's transitions (inactive, pending,
    firing) with their monotonic times."""

    def __init__(self, base):
        super().__init__(daemon=True)
        self.base, self.stop = base, threading.Event()
        self.lock = threading.Lock()
        self.state, self.history, self.errors = {}, [], 0

    def run(self):
        while not self.stop.is_set():
            try:
                _, body = request_url(self.base + "/api/v1/alerts", timeout=2)
                states = {}
                for alert in json.loads(body)["data"]["alerts"]:
                    name = alert["labels"]["alertname"]
                    if states.get(name) != "firing":
                        states[name] = alert["state"]
                now = time.monotonic()
                with self.lock:
                    for name in set(states) | set(self.state):
                        new = states.get(name, "inactive")
                        if self.state.get(name, "inactive") != new:
                            self.history.append((now, name, new))
                        self.state[name] = new
            except Exception:
                self.errors += 1
            self.stop.wait(0.25)

    def current(self, name):
        with self.lock:
            return self.state.get(name, "inactive")

    def transitions(self, name, since=0.0):
        with self.lock:
            return [(t, s) for t, n, s in self.history if n == name and t >= since]

    def wait(self, name, state, timeout, since):
        """Waits until `name` is in `state` (having been seen in it since `since`), or fails."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.current(name) == state:
                return time.monotonic()
            time.sleep(0.1)
        seen = ", ".join(f"{s} at +{t - since:.1f}s" for t, s in self.transitions(name, since)) or "none"
        raise Failure(f"{name} not {state} within {timeout} s (transitions: {seen})")


class Traffic(threading.Thread):
    """GETs of the test's profiles (hits, and misses of ids that do not exist), a few a second
    per id, so that a frozen memcached node fails operations and its breaker opens."""

    def __init__(self, base, ids):
        super().__init__(daemon=True)
        self.base, self.ids, self.stop = base, ids, threading.Event()
        self.answers = {}

    def run(self):
        while not self.stop.is_set():
            for i in self.ids + [9_300_000 + random.randrange(1000)]:
                if self.stop.is_set():
                    break
                try:
                    status, _ = request_url(f"{self.base}/users/profile/{i}", timeout=5)
                except Exception:
                    status = "error"
                self.answers[status] = self.answers.get(status, 0) + 1
                time.sleep(0.01)


class Check:
    def __init__(self, binary):
        self.binary = binary
        self.env = deps_env()
        self.database = self.env.get("PROFILE_DATABASE_URL", "postgres://postgres@127.0.0.1:55432/profiles")
        self.state_dir = self.env.get("PROFILE_STATE_DIR", os.path.join(ROOT, ".state"))
        self.memcached = self.env.get("PROFILE_MEMCACHED", "127.0.0.1:21211,127.0.0.1:21212").split(",")
        self.folder = tempfile.mkdtemp(prefix="check-prometheus-")
        os.chmod(self.folder, 0o755)
        self.service = self.prometheus = self.watch = self.traffic = None
        self.stopped_pid = None
        self.publication_dropped = False
        self.standby_state = None
        self.results = []  # (alert, provoked, [(label, seconds)])
        self.dashboard_summary = ""
        self.metrics_summary = ""
        self.t0 = time.monotonic()

    # --- setup ---

    def start(self):
        status = subprocess.run([DEPS, "status"], capture_output=True, text=True)
        if status.returncode != 0:
            raise Failure("the project's servers are not all running; run scripts/deps.sh start\n" + status.stdout)
        for what in ("prometheus", "promtool"):
            if not shutil.which(what):
                raise Failure(f"{what} is missing: scripts/check-alerts.sh installs Debian's prometheus package")
        subprocess.run([self.binary, "migrate"], check=True, capture_output=True,
                       env={**os.environ, "PROFILE_DATABASE_URL": self.database})
        values = ", ".join(f"({i}, 'prom_check_{i}', 'Prometheus check {i}')" for i in TEST_IDS)
        psql(self.database, f"INSERT INTO user_profiles (id, username, display_name) VALUES {values} ON CONFLICT DO NOTHING")

        self.secret = os.path.join(self.folder, "jwt-secret")
        with open(self.secret, "w") as f:
            f.write("prometheus-check-" + os.urandom(24).hex())
        os.chmod(self.secret, 0o600)
        self.port, self.standby_port, self.prometheus_port = free_port(), free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROFILE_")}
        env.update(PROFILE_DATABASE_URL=self.database, PROFILE_MEMCACHED=",".join(self.memcached))
        self.service_log = open(os.path.join(self.folder, "service.log"), "w")
        self.service = subprocess.Popen(
            [self.binary, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--jwt-secret-file", self.secret,
             "--no-access-log", "--workers", "8", "--batch-workers", "1", "--database-connections", "4",
             "--drain-timeout-s", "2",
             "--replica-database-url", f"postgres://postgres@127.0.0.1:{self.standby_port}/profiles",
             "--replica-check-interval-ms", "500"],
            stdout=self.service_log, stderr=subprocess.STDOUT, env=env)
        wait_port(self.port, 30, "profile-service")
        log(f"profile-service on 127.0.0.1:{self.port} (standby expected on 127.0.0.1:{self.standby_port}, nothing there yet)")

        rules_dir = os.path.join(self.folder, "rules")
        os.mkdir(rules_dir)
        rule_files = []
        for path in RULES:
            copy = os.path.join(rules_dir, os.path.basename(path))
            with open(copy, "w") as f:
                f.write(shortened_rules(open(path).read()))
            rule_files.append(copy)
        config = os.path.join(self.folder, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n" + "".join(f"  - {p}\n" for p in rule_files) +
                    f"scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{self.port}']\n")
        self.prometheus_log = open(os.path.join(self.folder, "prometheus.log"), "w")
        self.prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={self.folder}/tsdb",
             f"--web.listen-address=127.0.0.1:{self.prometheus_port}", "--log.level=warn"],
            stdout=self.prometheus_log, stderr=subprocess.STDOUT)
        self.prom = f"http://127.0.0.1:{self.prometheus_port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if request_url(self.prom + "/-/ready", timeout=1)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.prometheus.poll() is not None:
                raise Failure("prometheus did not become ready; see " + self.prometheus_log.name)
            time.sleep(0.2)
        _, body = request_url(self.prom + "/api/v1/rules")
        groups = json.loads(body)["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        alerts = [r for r in rules if r["type"] == "alerting"]
        if any(r.get("health") == "err" for r in rules):
            raise Failure("rules in error: " + ", ".join(r["name"] for r in rules if r.get("health") == "err"))
        log(f"prometheus on 127.0.0.1:{self.prometheus_port}: {len(rules)} rules loaded ({len(alerts)} alerts, "
            f"every for: {FOR}), scraping every 1 s")
        self.watch = AlertWatch(self.prom)
        self.watch.start()
        self.traffic = Traffic(self.base, TEST_IDS)
        self.traffic.start()
        self.t0 = time.monotonic()
        self.wait_scraped()

    def wait_scraped(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            _, body = request_url(self.prom + "/api/v1/query?" + urllib.parse.urlencode(
                {"query": f'count(profile_service_http_requests_total{{job="{JOB}"}})'}))
            if json.loads(body)["data"]["result"]:
                return
            time.sleep(0.5)
        raise Failure("Prometheus has no profile_service_http_requests_total after 30 s")

    # --- 1. traffic of every kind, promtool check metrics ---

    def token(self, sub):
        return subprocess.run([self.binary, "token", "--sub", str(sub), "--jwt-secret-file", self.secret],
                              capture_output=True, text=True, check=True).stdout.strip()

    def every_kind_of_traffic(self):
        i = TEST_IDS[0]
        answers = []
        answers.append(("GET (miss, then cached)", request_url(f"{self.base}/users/profile/{i}")[0]))
        status, body = request_url(f"{self.base}/users/profile/{i}")
        answers.append(("GET (hit)", status))
        version = json.loads(body)["version"]
        answers.append(("PUT", request_url(
            f"{self.base}/users/profile/{i}", "PUT", json.dumps({"display_name": "Prometheus check", "version": version}),
            {"Content-Type": "application/json", "Authorization": f"Bearer {self.token(i)}"})[0]))
        answers.append(("PUT (stale version)", request_url(
            f"{self.base}/users/profile/{i}", "PUT", json.dumps({"display_name": "Prometheus check", "version": version}),
            {"Content-Type": "application/json", "Authorization": f"Bearer {self.token(i)}"})[0]))
        new = 7_300_999
        psql(self.database, f"DELETE FROM user_profiles WHERE id = {new}")
        answers.append(("PUT (create, username taken)", request_url(
            f"{self.base}/users/profile/{new}", "PUT",
            json.dumps({"username": f"prom_check_{i}", "display_name": "Taken"}),
            {"Content-Type": "application/json", "Authorization": f"Bearer {self.token(new)}"})[0]))
        answers.append(("PUT (row locked in SQL past lock_timeout)", self.put_locked_row(TEST_IDS[3])))
        answers.append(("GET list",
                        request_url(f"{self.base}/users/profiles?ids={TEST_IDS[1]},{TEST_IDS[2]},9300999")[0]))
        answers.append(("GET 404", request_url(f"{self.base}/users/profile/9399999")[0]))
        answers.append(("GET 400", request_url(f"{self.base}/users/profile/not-an-id")[0]))
        answers.append(("GET unmatched", request_url(f"{self.base}/no/such/route")[0]))
        answers.append(("GET /readyz", request_url(f"{self.base}/readyz")[0]))
        answers.append(("GET /healthz", request_url(f"{self.base}/healthz")[0]))
        answers.append(("event stream", self.open_stream(f"/users/profile/{i}/events")))
        answers.append(("list event stream", self.open_stream(f"/users/profiles/events?ids={i},{TEST_IDS[1]}")))
        log("traffic of every kind: " + ", ".join(f"{what} {status}" for what, status in answers))
        time.sleep(1.5)  # the next /metrics includes everything
        status, metrics = request_url(f"{self.base}/metrics")
        if status != 200:
            raise Failure(f"/metrics answered {status}")
        check = subprocess.run(["promtool", "check", "metrics"], input=metrics, capture_output=True, text=True)
        findings = (check.stdout + check.stderr).strip()
        if check.returncode != 0 or findings:
            raise Failure(f"promtool check metrics on the live /metrics found:\n{findings}")
        families = len(exposed_names(metrics))
        self.metrics_summary = (f"promtool check metrics: no finding on the live /metrics "
                                f"({families} series names, {len(metrics.splitlines())} lines)")
        log(self.metrics_summary)

    def put_locked_row(self, i):
        """A PUT of a row that a SQL session holds locked: refused after the service's lock_timeout
        (a database error of kind lockNotAvailable, 503). The status."""
        status, body = request_url(f"{self.base}/users/profile/{i}")
        version = json.loads(body)["version"]
        locker = subprocess.Popen(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", self.database], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
        try:
            locker.stdin.write(f"BEGIN;\nSELECT id FROM user_profiles WHERE id = {i} FOR UPDATE;\n")
            locker.stdin.flush()
            deadline = time.monotonic() + 10
            while psql(self.database, "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' "
                                      f"AND query LIKE '%WHERE id = {i} FOR UPDATE%'") == "0":
                if time.monotonic() > deadline:
                    raise Failure("the SQL session did not lock the row")
                time.sleep(0.1)
            return request_url(f"{self.base}/users/profile/{i}", "PUT",
                               json.dumps({"display_name": "Locked", "version": version}),
                               {"Content-Type": "application/json", "Authorization": f"Bearer {self.token(i)}"},
                               timeout=30)[0]
        finally:
            try:
                locker.stdin.write("ROLLBACK;\n")
                locker.stdin.close()
                locker.wait(timeout=10)
            except Exception:
                locker.kill()
                locker.wait()

    def open_stream(self, path):
        """Opens an event stream, reads its head and first bytes, closes it: the status."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=3) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                time.sleep(0.5)
            except socket.timeout:
                pass
        m = re.match(rb"HTTP/1\.1 (\d{3})", data)
        return int(m.group(1)) if m else "no answer"

    # --- the alerts ---

    def provoke(self, alert, provoke, repair, describe, since=None, provoke_timeout=60, resolve_timeout=90):
        """Provokes `alert` (`provoke()` unless None), waits for pending then firing, repairs, and
        waits until it is resolved (gone from /api/v1/alerts)."""
        start = time.monotonic() if since is None else since
        if provoke:
            provoke()
        pending_seen = firing_at = None
        deadline = time.monotonic() + provoke_timeout
        while time.monotonic() < deadline:
            state = self.watch.current(alert)
            if state == "firing":
                firing_at = time.monotonic()
                break
            time.sleep(0.1)
        pending = [t for t, s in self.watch.transitions(alert, start) if s == "pending"]
        if firing_at is None:
            raise Failure(f"{alert} did not fire within {provoke_timeout} s of: {describe} "
                          f"(transitions: {self.watch.transitions(alert, start)})")
        if not pending:
            raise Failure(f"{alert} fired without being seen pending first")
        pending_seen = pending[0]
        repaired_at = time.monotonic()
        repair()
        resolved_at = self.watch.wait(alert, "inactive", resolve_timeout, repaired_at)
        timings = [("pending", pending_seen - start), ("firing", firing_at - start),
                   ("repaired", repaired_at - start), ("resolved", resolved_at - start)]
        self.results.append((alert, describe, timings, resolved_at - repaired_at))
        log(f"{alert}: " + ", ".join(f"{what} +{t:.1f}s" for what, t in timings)
            + f" (resolved {resolved_at - repaired_at:.1f}s after the repair)")

    def standby_unreachable(self):
        def start_standby():
            self.standby_state = os.path.join(self.folder, "standby-state")
            os.makedirs(self.standby_state)
            run = subprocess.run([DEPS, "start-standby"], capture_output=True, text=True, timeout=300,
                                 env={**os.environ, "PROFILE_STATE_DIR": self.standby_state,
                                      "PROFILE_PG_STANDBY_PORT": str(self.standby_port),
                                      "PROFILE_PG_STANDBY_DELAY_MS": "0"})
            if run.returncode != 0:
                raise Failure("scripts/deps.sh start-standby failed:\n" + run.stderr[-2000:])

        # Unreachable since the service started: pending, then firing, without doing anything.
        self.provoke("ProfileServiceStandbyUnavailable", None, start_standby,
                     f"the standby 127.0.0.1:{self.standby_port} unreachable (nothing listens)", since=self.t0)

    def memcached_node_frozen(self):
        node = self.memcached[-1]
        port = int(node.rsplit(":", 1)[1])
        pid = memcached_pid(port, self.state_dir)

        def stop():
            os.kill(pid, signal.SIGSTOP)
            self.stopped_pid = pid

        def cont():
            os.kill(pid, signal.SIGCONT)
            self.stopped_pid = None

        self.provoke("ProfileServiceMemcachedNodeDown", stop, cont,
                     f"memcached {node} (pid {pid}) frozen with SIGSTOP under GET traffic")

    def feed_stalled(self):
        deadline = time.monotonic() + 20
        while True:
            _, body = request_url(f"{self.base}/readyz")
            state = json.loads(body).get("change_feed", {}).get("state")
            if state == "active":
                break
            if time.monotonic() > deadline:
                raise Failure(f"this instance's change feed is {state!r}, not active: another instance consumes "
                              "the default cluster's slot (stop it and run again)")
            time.sleep(0.5)
        changes = iter(range(1, 1000))

        def change():
            psql(self.database, f"UPDATE user_profiles SET display_name = 'Prometheus check {next(changes)}' "
                                f"WHERE id = {TEST_IDS[-1]}")

        def drop():
            psql(self.database, f"DROP PUBLICATION {PUBLICATION}")
            self.publication_dropped = True
            change()

        def create():
            psql(self.database, f"CREATE PUBLICATION {PUBLICATION} FOR TABLE user_profiles")
            self.publication_dropped = False

        self.provoke("ProfileServiceChangeFeedStalled", drop, create,
                     f"DROP PUBLICATION {PUBLICATION} and an UPDATE in SQL")
        # The feed goes on by itself; the changes committed while the publication was missing are
        # closed as a gap by whichever instance consumes the slot (another one, when other instances
        # of the service run on these servers).
        deadline = time.monotonic() + 30
        while True:
            _, body = request_url(f"{self.base}/readyz")
            feed = json.loads(body).get("change_feed", {})
            if feed.get("state") in ("active", "standby"):
                who = "this instance consumes the slot again" if feed["state"] == "active" else \
                    "another instance of the service consumes the slot now"
                log(f"change feed going on by itself: {who} (gaps_closed here {feed.get('gaps_closed')}; "
                    f"ProfileServiceChangeFeedGapClosed {self.watch.current('ProfileServiceChangeFeedGapClosed')})")
                break
            if time.monotonic() > deadline:
                raise Failure(f"the change feed is not going on 30 s after the publication was created again: {feed}")
            time.sleep(0.5)

    # --- the dashboard ---

    def dashboard(self):
        dash = json.load(open(DASHBOARD))
        _, metrics = request_url(f"{self.base}/metrics")
        known = exposed_names(metrics) | recorded_names()
        queries, failures, empty = [], [], []
        for panel in dash["panels"]:
            for target in panel.get("targets", []):
                queries.append((panel["title"], target["expr"]))
        for variable in dash.get("templating", {}).get("list", []):
            query = variable.get("query")
            if isinstance(query, dict):
                query = query.get("query")
            m = re.match(r"label_values\((.*),\s*(\w+)\)$", query or "")
            if m:
                queries.append((f"variable ${variable['name']}", m.group(1)))
        for title, expr in queries:
            q = (expr.replace("$__rate_interval", "1m").replace("$__range", "5m").replace("$__interval", "15s")
                 .replace('"$job"', f'"{JOB}"').replace('"$instance"', '".*"'))
            unknown = sorted(n for n in metric_names(q) if n not in known)
            if unknown:
                failures.append(f"{title}: names series that are on neither /metrics nor a recording rule: {unknown}: {expr}")
            status, body = request_url(self.prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))
            answer = json.loads(body)
            if status != 200 or answer.get("status") != "success":
                failures.append(f"{title}: {answer.get('errorType')}: {answer.get('error')}: {expr}")
            elif not answer["data"]["result"]:
                empty.append(title)
        if failures:
            raise Failure(f"{len(failures)} of {len(queries)} dashboard queries failed:\n  " + "\n  ".join(failures))
        self.dashboard_summary = (f"dashboard: {len(queries)} queries evaluated without error, every series they name "
                                  f"exists; {len(queries) - len(empty)} returned data"
                                  + (f" (no data yet: {', '.join(sorted(set(empty)))})" if empty else ""))
        log(self.dashboard_summary)

    # --- teardown ---

    def cleanup(self):
        problems = []
        if self.stopped_pid:
            try:
                os.kill(self.stopped_pid, signal.SIGCONT)
                log(f"memcached pid {self.stopped_pid} continued (SIGCONT)")
            except OSError as error:
                problems.append(f"SIGCONT {self.stopped_pid}: {error}")
        try:
            if self.publication_dropped or not psql(self.database, f"SELECT 1 FROM pg_publication WHERE pubname = '{PUBLICATION}'"):
                psql(self.database, f"CREATE PUBLICATION {PUBLICATION} FOR TABLE user_profiles")
                log(f"publication {PUBLICATION} created again")
        except Exception as error:
            problems.append(f"publication: {error}")
        if self.standby_state:
            run = subprocess.run([DEPS, "stop-standby"], capture_output=True, text=True,
                                 env={**os.environ, "PROFILE_STATE_DIR": self.standby_state,
                                      "PROFILE_PG_STANDBY_PORT": str(self.standby_port)})
            if run.returncode != 0:
                problems.append("stop-standby: " + run.stderr[-500:])
        for thread in (self.traffic, self.watch):
            if thread:
                thread.stop.set()
        for name, process in (("prometheus", self.prometheus), ("profile-service", self.service)):
            if process and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        try:
            psql(self.database, "DELETE FROM user_profiles WHERE id BETWEEN 7300001 AND 7300999")
        except Exception as error:
            problems.append(f"deleting the test's profiles: {error}")
        return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build/debug/profile-service"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, rules, config)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    check = Check(os.path.abspath(args.binary))
    failure = None
    started = time.monotonic()
    try:
        check.start()
        check.every_kind_of_traffic()
        check.standby_unreachable()
        check.memcached_node_frozen()
        check.feed_stalled()
        check.dashboard()
    except (Failure, subprocess.CalledProcessError, OSError, ValueError, KeyError) as error:
        failure = error
    except KeyboardInterrupt:
        failure = "interrupted"
    finally:
        problems = check.cleanup()
    others = []
    if check.watch:
        for t, name, state in check.watch.history:
            if name not in {r[0] for r in check.results}:
                others.append(f"{name} {state} at +{t - check.t0:.1f}s")
    print("\ncheck-prometheus: summary")
    for alert, describe, timings, _ in check.results:
        print(f"  {alert} ({describe}):\n    " + " → ".join(f"{what} +{t:.1f}s" for what, t in timings))
    if others:
        print("  other alert transitions (since the service started): " + "; ".join(others))
    if check.metrics_summary:
        print("  " + check.metrics_summary)
    if check.dashboard_summary:
        print("  " + check.dashboard_summary)
    if check.traffic:
        print(f"  background GETs: {dict(sorted(check.traffic.answers.items(), key=str))}")
    print(f"  {time.monotonic() - started:.0f} s")
    if problems:
        print("check-prometheus: could not leave everything as found:\n  " + "\n  ".join(problems), file=sys.stderr)
    if failure or problems:
        print(f"check-prometheus: FAIL: {failure or 'cleanup'}\n  (logs: {check.folder})", file=sys.stderr)
        sys.exit(1)
    if not args.keep:
        shutil.rmtree(check.folder, ignore_errors=True)
    print(f"check-prometheus: ok ({len(check.results)} alerts pending → firing → resolved)")


if __name__ == "__main__":
    main()
