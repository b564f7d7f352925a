#!/usr/bin/env python3
"""Black-box checker of strict consistency, in real-time order, under a cache that keeps being emptied.

Each run seeds 10 fresh profiles and starts --instances instances of the built binary with their
defaults (`serve --no-access-log --auth none`), all on the servers of scripts/deps.sh. For --seconds:

  - 4 writers PUT a random id with the version they last saw (a 409 gives them the current one and
    they try again), flushing every memcached node (`flush_all`) before each PUT; right after each
    200 they read the id with ?min_version=<acknowledged version> (read-your-writes);
  - 1 flusher sends `flush_all` to every memcached node every 5 ms (always directly, never through
    the delay proxy);
  - 8 readers GET random ids with no floor;
  - with --deletions, 1 deleter DELETEs a random id at the version it knows (If-Match), flushing
    every node first, and 20 ms later creates it again (its versions continue above the deleted one).

Every request goes to a random instance over a keep-alive connection of its thread. After the load,
1 s of quiescence, then every id is read through every instance and compared with PostgreSQL.

Counted, from monotonic timestamps taken here (a request starts just before it is sent and ends
once its whole answer is read):
  read-your-writes   the read after a PUT's 200 answered a version below the acknowledged one
  stale read         a read (floorless or not) that started after the acknowledgement of version v
                     of its id had been received answered a version below v
  monotonic (global) a read that started after any answer (a read, an acknowledgement, a 409's
                     current profile) of version N of its id had been received answered below N
  per reader N, N-1  one reader thread's later read of an id answered below an earlier read of it
  after quiescence   an (instance, id) whose floorless GET differs from the database's version
  served after deletion  a read that started after the deletion of its id at version v had been
                     acknowledged answered v or older
and the answers other than 200 by status (409s to PUTs are counted apart, as conflicts). Examples
name ids by their index among the run's 10 (0-9) and say which thread, instance (port) and X-Cache
answered each side; the first read older than an earlier answer is shown with every answer of its
id around it (and, with --watch-database and psycopg2 installed, when PostgreSQL showed each version). Exit status 1 if any run counts any violation.

  eval "$(scripts/deps.sh env)"; scripts/drills/strict_consistency.py [--instances N] [--seconds S]
      [--runs K] [--rtt-ms X]      (PROFILE_SERVICE_BIN: the binary, default .build/debug/profile-service)

--serve-args "…" adds flags to every instance's `serve` (a standby: "--replica-database-url URL", with
PROFILE_PG_STANDBY_DELAY_MS=300 scripts/deps.sh start-standby for one that applies 300 ms late).

--rtt-ms X starts `scripts/delay.sh start X` and gives the instances the proxy's addresses (X ms more
on every round trip to PostgreSQL and memcached); the proxy is stopped at the end.

--far-region X checks a far region instead (docs/deployment.md, "Regions and several cache clusters"):
the --instances under test are region B's — a cache cluster of their own (`--cache-cluster far`, two
memcached nodes the script starts, which the flusher and writers flush), PostgreSQL X ms away through
the delay proxy, --serve-args for them alone (their standby) — and one region-A instance on deps.sh's
memcached writes beside them: the writers PUT through every instance of both regions, the readers read
region B. Read-your-writes, per-reader order and quiescence are counted as always; stale and older
reads are counted against region B's answers (the guarantees within a region) and, apart, against
region A's acknowledgements (how long region B may lag: the WAN plus its repair, reported in ms, not a
violation). The cluster's slot is dropped at the end (`profile-service cache-cluster drop far`).
"""
import argparse, collections, http.client, json, os, random, shlex, socket, subprocess, sys, threading, time

from drill import BIN, DB_URL, MC_PORTS, MEMCACHED, ROOT, STATE, KeepAliveThread, free_port, get, parsed_json, psql, run_for, seed, stop_instances
from drill import start_instance as start_drill_instance

IDS_PER_RUN = 10
WRITERS = 4
READERS = 8
FLUSH_INTERVAL = 0.005
QUIESCENCE = 1.0
NODES = [("127.0.0.1", int(port)) for port in MC_PORTS]  # direct, whatever PROFILE_MEMCACHED says
NODE_PROCESSES = []  # the far region's memcached nodes, stopped at the end






def start_instance(database_url, memcached, serve_args=()):
    return start_drill_instance(database_url, memcached, serve_args, log_prefix="strict")


def delay(*arguments):
    return subprocess.run([os.path.join(ROOT, "scripts/delay.sh"), *arguments], check=True,
                          stdout=subprocess.PIPE, text=True).stdout


def exports(text):
    """The variables of `export A='B'` lines."""
    values = {}
    for line in text.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, value = words[1].split("=", 1)
            values[name] = value
    return values


class Flusher:
    """One socket per memcached node; flush_all to each, reading its OK."""

    def __init__(self):
        self.sockets = [None] * len(NODES)
        self.errors = 0

    def flush(self):
        for index, node in enumerate(NODES):
            try:
                if self.sockets[index] is None:
                    self.sockets[index] = socket.create_connection(node, timeout=5)
                    self.sockets[index].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock = self.sockets[index]
                sock.sendall(b"flush_all\r\n")
                reply = b""
                while not reply.endswith(b"\r\n"):
                    chunk = sock.recv(64)
                    if not chunk:
                        raise OSError("memcached closed the connection")
                    reply += chunk
                if reply != b"OK\r\n":
                    raise OSError(f"flush_all answered {reply!r}")
            except OSError:
                self.errors += 1
                self.close(index)

    def close(self, index=None):
        for i in range(len(NODES)) if index is None else [index]:
            if self.sockets[i] is not None:
                try:
                    self.sockets[i].close()
                except OSError:
                    pass
                self.sockets[i] = None


class Worker(KeepAliveThread):
    """A thread with one keep-alive connection per instance; what it saw, in its own lists."""

    def __init__(self, name, ports, ids, stop):
        super().__init__(name)
        self.ports, self.ids, self.stop = ports, ids, stop
        self.reads = []  # (id, version, t_start, t_end, source)
        self.last = (None, "-")
        self.statuses = collections.Counter()  # answers other than 200 (0: no answer)
        self.requests = 0

    def request(self, method, path, body=None, headers=None):
        """(status, parsed JSON or None, t_start, t_end) through a random instance; the instance's
        port and the answer's X-Cache are kept in self.last."""
        port = random.choice(self.ports)
        self.requests += 1
        answered = self.exchange(port, method, path, body, headers)
        if answered is None:
            self.statuses[0] += 1
            return 0, None, None, None
        response, raw, started, ended = answered
        self.last = (port, response.getheader("X-Cache", "-"))
        return response.status, parsed_json(raw), started, ended

    def read(self, id, floor=None):
        """The version answered (None if not 200), recorded as a read."""
        path = f"/users/profile/{id}" + (f"?min_version={floor}" if floor is not None else "")
        status, body, started, ended = self.request("GET", path)
        if status != 200 or not isinstance(body, dict) or "version" not in body:
            if status != 0:
                self.statuses[status] += 1
            return None
        # (id, version, t_start, t_end, what answered it: thread, instance port, X-Cache, floor)
        self.reads.append((id, body["version"], started, ended, (self.name, *self.last, floor)))
        return body["version"]

class Reader(Worker):
    def work(self):
        while not self.stop.is_set():
            self.read(random.choice(self.ids))


class Writer(Worker):
    def __init__(self, *arguments):
        super().__init__(*arguments)
        self.known = {id: 1 for id in self.ids}  # seeded profiles start at version 1
        self.acks = []  # (id, version, t_ack, source)
        self.currents = []  # a 409's current version: (id, version, t_end, source)
        self.ryw = []  # (id, acknowledged, answered)
        self.conflicts = 0
        self.flusher = Flusher()

    def work(self):
        try:
            while not self.stop.is_set():
                id = random.choice(self.ids)
                while not self.stop.is_set():
                    self.flusher.flush()
                    expected = self.known[id]
                    status, body, _, ended = self.request(
                        "PUT", f"/users/profile/{id}",
                        {"display_name": f"{self.name}-{expected + 1}", "version": expected})
                    if status == 200 and isinstance(body, dict) and "version" in body:
                        acknowledged = body["version"]
                        self.acks.append((id, acknowledged, ended, (self.name, *self.last, "ack")))
                        self.known[id] = acknowledged
                        answered = self.read(id, floor=acknowledged)
                        if answered is not None:
                            self.known[id] = answered
                            if answered < acknowledged:
                                self.ryw.append((id, acknowledged, answered))
                        break
                    if status == 409 and isinstance(body, dict):
                        self.conflicts += 1
                        current = body.get("current") if isinstance(body.get("current"), dict) else body
                        if "version" in current:
                            self.known[id] = current["version"]
                            self.currents.append((id, current["version"], ended, (self.name, *self.last, "409")))
                            continue
                    if status != 0:
                        self.statuses[status] += 1
                    time.sleep(0.01)  # 503, no answer, or an answer without a version: not a spin
                    break
        finally:
            self.flusher.close()


class Deleter(Writer):
    """Deletes a random id at the version it knows (`If-Match`), then creates it again (its versions
    go on above the deleted one), over and over; flushes every node before each deletion, as the
    writers do before each PUT."""

    def __init__(self, *arguments):
        super().__init__(*arguments)
        self.deletions = []  # (id, deleted version, t_ack, source)
        self.created = 0

    def work(self):
        try:
            while not self.stop.is_set():
                id = random.choice(self.ids)
                self.flusher.flush()
                expected = self.known[id]
                status, body, _, ended = self.request("DELETE", f"/users/profile/{id}",
                                                      headers={"If-Match": f'"{expected}"'})
                if status == 204:
                    self.deletions.append((id, expected, ended, (self.name, *self.last, "deleted")))
                elif status == 409 and isinstance(body, dict) and isinstance(body.get("current"), dict):
                    self.known[id] = body["current"]["version"]
                    self.currents.append((id, self.known[id], ended, (self.name, *self.last, "409")))
                    continue
                elif status != 404:
                    self.statuses[status] += 1
                    time.sleep(0.01)
                    continue
                time.sleep(0.02)  # deleted for a while: readers and writers meet the absence
                self.created += 1
                status, body, _, ended = self.request(
                    "PUT", f"/users/profile/{id}", {"username": f"d{self.created}_{id % 10**9}", "display_name": "Again"},
                    headers={"If-None-Match": "*"})
                if status == 201 and isinstance(body, dict):
                    self.known[id] = body["version"]
                    self.acks.append((id, body["version"], ended, (self.name, *self.last, "created")))
                elif status != 0:
                    self.statuses[status] += 1
        finally:
            self.flusher.close()


def served_after_deletion(reads, deletions):
    """Reads that started after a deletion of their id at version v was acknowledged and answered
    v or older: the deleted profile served again. (id, version, deleted version, source, ms)."""
    found = []
    for id, deleted, t_ack, _ in deletions:
        for read_id, version, t_start, _, source in reads:
            if read_id == id and t_start > t_ack and version <= deleted:
                found.append((id, version, deleted, source, (t_start - t_ack) * 1000))
    return found


class DatabaseWatch(threading.Thread):
    """Reads the version PostgreSQL shows for every id, over and over, when psycopg2 is at hand:
    the first violation's timeline then says when each version became visible there."""

    def __init__(self, ids, stop):
        super().__init__(daemon=True)
        import psycopg2
        self.connection = psycopg2.connect(DB_URL)
        self.connection.autocommit = True
        self.ids, self.stop, self.polls = ids, stop, []  # (t_start, t_end, id, version)

    def run(self):
        cursor = self.connection.cursor()
        while not self.stop.is_set():
            started = time.monotonic()
            cursor.execute("SELECT id, version FROM user_profiles WHERE id = ANY(%s)", (self.ids,))
            rows = cursor.fetchall()
            ended = time.monotonic()
            self.polls.extend((started, ended, id, version) for id, version in rows)


def start_database_watch(ids, stop):
    # This folder's operator.py would stand in for the standard module psycopg2 imports.
    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        print("--watch-database: psycopg2 is not installed; no PostgreSQL timeline", file=sys.stderr)
        return None
    finally:
        sys.path[:] = saved
    watch = DatabaseWatch(ids, stop)
    watch.start()
    return watch


class Background(threading.Thread):
    """flush_all to every node every FLUSH_INTERVAL."""

    def __init__(self, stop):
        super().__init__(daemon=True, name="flusher")
        self.stop, self.flushes, self.flusher = stop, 0, Flusher()

    def run(self):
        next_at = time.monotonic()
        while not self.stop.is_set():
            self.flusher.flush()
            self.flushes += 1
            next_at += FLUSH_INTERVAL
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                next_at = time.monotonic()
        self.flusher.close()


def cache_events(port, event):
    """An instance's profile_service_cache_events_total{event=…} (memcached failures: `error`)."""
    status, body, _ = get(port, "/metrics")
    for line in body.decode().splitlines() if status == 200 else []:
        if line.startswith("profile_service_cache_events_total{") and f'event="{event}"' in line:
            return int(float(line.split()[-1]))
    return 0


def print_timeline(violation, reads, completions, watch, index):
    """Every answer of the violation's id near its versions, in the order they were received,
    and (with --watch-database) when PostgreSQL showed each version."""
    id, _, highest = violation[:3]
    near = range(highest - 2, highest + 2)
    events = [(t0, t1, v, source) for i, v, t0, t1, source in reads if i == id and v in near]
    events += [(None, t1, v, source) for i, v, t1, source in completions if i == id and v in near]
    base = min(e[1] for e in events)
    for t0, t1, v, source in sorted(events, key=lambda e: e[1]):
        began = "" if t0 is None else f"{(t0 - base) * 1000:8.1f}"
        print(f"    timeline id {index[id]}: {began:>8} → {(t1 - base) * 1000:8.1f} ms v{v} {source}")
    polls = [(t0, t1, v) for t0, t1, i, v in (watch.polls if watch else []) if i == id and v in near]
    for k, (t0, t1, v) in enumerate(polls):
        if k == 0 or k + 1 == len(polls) or v != polls[k - 1][2] or v != polls[k + 1][2]:
            print(f"    PostgreSQL showed id {index[id]} v{v} in the read {(t0 - base) * 1000:8.1f} → {(t1 - base) * 1000:8.1f} ms")


def below_earlier(reads, completions):
    """Reads (id, version, t_start, t_end, source) that answered below the highest version, among
    completions (id, version, t_end, source), whose answer had been received before the read
    started: (id, version, highest, the read's source, the highest's source, ms between them)."""
    by_id = collections.defaultdict(list)
    for id, version, t_end, source in completions:
        by_id[id].append((t_end, version, source))
    found = []
    reads_by_id = collections.defaultdict(list)
    for id, version, t_start, _, source in reads:
        reads_by_id[id].append((t_start, version, source))
    for id, started in reads_by_id.items():
        done = sorted(by_id.get(id, []), key=lambda d: d[0])
        j, highest, highest_at, highest_source = 0, 0, 0.0, None
        for t_start, version, source in sorted(started, key=lambda r: r[0]):
            while j < len(done) and done[j][0] < t_start:
                if done[j][1] > highest:
                    highest, highest_at, highest_source = done[j][1], done[j][0], done[j][2]
                j += 1
            if version < highest:
                found.append((id, version, highest, source, highest_source, (t_start - highest_at) * 1000))
    return found


FAR_CLUSTER = "far"


def start_memcached_nodes(count):
    """memcached nodes of the far region's own, on free ports; stopped at the end of main."""
    nodes = []
    for _ in range(count):
        port = free_port()
        user = ["-u", "memcache"] if os.geteuid() == 0 else []
        process = subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "16", *user],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        NODE_PROCESSES.append(process)
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        nodes.append(("127.0.0.1", port))
    return nodes


def run_once(number, args, database_url, memcached, far=None):
    """One run; `far` (region B's database URL and memcached list) checks a far region."""
    ids = seed(IDS_PER_RUN, "sc")
    index = {id: i for i, id in enumerate(ids)}
    try:
        if far:
            serve = ["--cache-cluster", FAR_CLUSTER, *shlex.split(args.serve_args)]
            ports = [start_instance(far[0], far[1], serve) for _ in range(args.instances)]
            region_a = [start_instance(database_url, memcached)]
        else:
            ports = [start_instance(database_url, memcached, shlex.split(args.serve_args)) for _ in range(args.instances)]
            region_a = []
        stop = threading.Event()
        watch = start_database_watch(ids, stop) if args.watch_database else None
        writers = [Writer(f"writer{i}", ports + region_a, ids, stop) for i in range(WRITERS)]
        readers = [Reader(f"reader{i}", ports, ids, stop) for i in range(READERS)]
        deleters = [Deleter("deleter0", ports + region_a, ids, stop)] if args.deletions else []
        flusher = Background(stop)
        threads = writers + deleters + readers + [flusher]
        elapsed = run_for(args.seconds, threads, stop)
        time.sleep(QUIESCENCE)

        database = dict(tuple(int(x) for x in line.split("|"))
                        for line in psql(f"SELECT id, version FROM user_profiles WHERE id IN ({','.join(map(str, ids))})").splitlines())
        after = []  # (port, id, answered, database)
        cache_errors = sum(cache_events(port, "error") for port in ports + region_a)
        for port in ports + region_a:
            for id in ids:
                status, body, _ = get(port, f"/users/profile/{id}")
                # A profile deleted at the end is absent in both: 404 is its answer.
                answered = json.loads(body)["version"] if status == 200 else None if status == 404 else f"status {status}"
                if answered != database.get(id):
                    after.append((port, id, answered, database.get(id)))
    finally:
        stop_instances()

    workers = writers + deleters + readers
    reads = [r for w in workers for r in w.reads]
    acks = [a for w in writers + deleters for a in w.acks]
    currents = [c for w in writers + deleters for c in w.currents]
    deletions = [d for w in deleters for d in w.deletions]
    after_deletion = served_after_deletion(reads, deletions)
    answers = acks + currents + [(id, version, t_end, source) for id, version, _, t_end, source in reads]
    # Within a region every guarantee holds; a far region lags the other's acknowledgements by
    # the WAN and its repair: counted apart, with how long after the acknowledgement it was.
    in_region = lambda answer: answer[3][1] not in region_a
    stale = below_earlier(reads, [a for a in acks if in_region(a)])
    monotonic = below_earlier(reads, [a for a in answers if in_region(a)])
    lagging = below_earlier(reads, acks) if region_a else []
    ryw = [v for w in writers for v in w.ryw]
    backwards = []
    for reader in readers:
        highest = {}
        for id, version, *_ in reader.reads:
            if version < highest.get(id, 0):
                backwards.append((id, version, highest[id]))
            highest[id] = max(highest.get(id, 0), version)
    statuses = collections.Counter()
    for w in workers:
        statuses.update(w.statuses)
    requests = sum(w.requests for w in workers)
    failures = [w.failure for w in workers if w.failure]
    figures = {
        "run": number, "instances": args.instances, "seconds": round(elapsed, 2), "rtt_ms": args.rtt_ms,
        "requests_per_s": round(requests / elapsed, 1), "acks_per_s": round(len(acks) / elapsed, 1),
        "reads": len(reads), "acks": len(acks), "conflicts": sum(w.conflicts for w in writers),
        "flushes": flusher.flushes, "flush_errors": flusher.flusher.errors + sum(w.flusher.errors for w in writers),
        "read_your_writes": len(ryw), "stale_reads": len(stale), "monotonic_global": len(monotonic),
        "per_reader_backwards": len(backwards), "stale_after_quiescence": len(after),
        "deletions": len(deletions), "served_after_deletion": len(after_deletion),
        "non_200": {str(k): v for k, v in sorted(statuses.items())}, "memcached_errors": cache_errors,
    }
    if far:
        gaps = sorted(gap for *_, gap in lagging if gap >= 0)
        figures["far_region_rtt_ms"] = args.far_region
        figures["behind_region_a"] = len(lagging) - len(stale)
        figures["behind_region_a_max_ms"] = round(gaps[-1], 1) if gaps else 0
    figures["violations"] = sum(figures[k] for k in ("read_your_writes", "stale_reads", "monotonic_global",
                                                     "per_reader_backwards", "stale_after_quiescence",
                                                     "served_after_deletion"))
    print(f"run {number}: {figures['requests_per_s']:.0f} requests/s, {figures['acks_per_s']:.0f} PUTs acknowledged/s"
          f" ({figures['conflicts']} conflicts); read-your-writes {len(ryw)}, stale reads {len(stale)},"
          f" monotonic (global) {len(monotonic)}, per-reader N then N-1 {len(backwards)},"
          f" stale after quiescence {len(after)}; non-200 {figures['non_200'] or 'none'};"
          f" memcached failures seen by the instances {cache_errors}")
    if deleters:
        print(f"  {len(deletions)} deletions acknowledged (each created again); served after its deletion: {len(after_deletion)}")
    for id, version, deleted, source, gap in after_deletion[:5]:
        print(f"  after deletion: id {index[id]} read v{version} ({source}) {gap:.1f} ms after v{deleted} was deleted")
    if far:
        print(f"  region B behind region A's acknowledgements: {figures['behind_region_a']} reads,"
              f" the latest {figures['behind_region_a_max_ms']} ms after the acknowledgement")
    for id, version, earlier in backwards[:5]:
        print(f"  per reader: id {index[id]} read v{version} after v{earlier}")
    for id, acknowledged, answered in ryw[:3]:
        print(f"  read-your-writes: id {index[id]} acknowledged v{acknowledged}, then read v{answered}")
    for id, version, acknowledged, source, earlier, gap in stale[:3]:
        print(f"  stale: id {index[id]} read v{version} ({source}) {gap:.1f} ms after v{acknowledged} was acknowledged ({earlier})")
    if monotonic:
        print_timeline(monotonic[0], reads, acks + currents, watch, index)
    for id, version, highest, source, earlier, gap in monotonic[:5]:
        print(f"  monotonic: id {index[id]} read v{version} ({source}) {gap:.1f} ms after v{highest} was answered ({earlier})")
    for port, id, answered, expected in after[:5]:
        print(f"  after quiescence: instance :{port} id {index[id]} answered {answered}, database v{expected}")
    for failure in failures:
        print(f"  thread failed: {failure}")
    print(json.dumps(figures))
    sys.stdout.flush()
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--rtt-ms", type=float, default=None, help="round trip added by scripts/delay.sh")
    parser.add_argument("--watch-database", action="store_true",
                        help="poll PostgreSQL's versions beside the load (needs psycopg2) for the timeline")
    parser.add_argument("--serve-args", default="", help="more `serve` flags for every instance, e.g. "
                        "\"--replica-database-url postgres://…\" for a standby (scripts/deps.sh start-standby)")
    parser.add_argument("--deletions", action="store_true",
                        help="a deleter thread deletes ids (If-Match) and creates them again; counts reads "
                        "that served a deleted version after its deletion was acknowledged")
    parser.add_argument("--far-region", type=float, default=None, metavar="RTT_MS",
                        help="check region B of two: its own cache cluster, PostgreSQL RTT_MS away")
    args = parser.parse_args()

    global NODES
    database_url, memcached, proxy, far = DB_URL, MEMCACHED, False, None
    results = []
    try:
        if args.far_region is not None:
            proxy = True
            delay("start", f"{args.far_region:g}")
            NODES = start_memcached_nodes(2)
            far = (exports(delay("env"))["PROFILE_DATABASE_URL"], ",".join(f"{h}:{p}" for h, p in NODES))
            print(f"region B: cache cluster {FAR_CLUSTER} on {far[1]}, PostgreSQL +{args.far_region:g} ms at {far[0]}")
        elif args.rtt_ms is not None:
            proxy = True
            delay("start", f"{args.rtt_ms:g}")
            routes = exports(delay("env"))
            database_url, memcached = routes["PROFILE_DATABASE_URL"], routes["PROFILE_MEMCACHED"]
            print(f"through the delay proxy (+{args.rtt_ms:g} ms): {database_url} {memcached}")
        for number in range(1, args.runs + 1):
            results.append(run_once(number, args, database_url, memcached, far))
    finally:
        stop_instances()
        if proxy:
            delay("stop")
        for process in NODE_PROCESSES:
            process.kill()
            process.wait()
        if far:
            subprocess.run([BIN, "cache-cluster", "drop", FAR_CLUSTER, "--database-url", DB_URL])

    if len(results) > 1:
        columns = [("run", "run"), ("req/s", "requests_per_s"), ("acks/s", "acks_per_s"), ("ryw", "read_your_writes"),
                   ("stale", "stale_reads"), ("mono", "monotonic_global"), ("N,N-1", "per_reader_backwards"),
                   ("quiesc", "stale_after_quiescence"), ("deleted", "served_after_deletion")]
        print(" ".join(f"{title:>7}" for title, _ in columns) + "  non-200")
        for figures in results:
            print(" ".join(f"{figures[key]:>7}" for _, key in columns) + f"  {figures['non_200'] or '-'}")
    sys.exit(1 if any(figures["violations"] for figures in results) else 0)


if __name__ == "__main__":
    main()
