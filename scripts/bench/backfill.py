#!/usr/bin/env python3
"""A backfill as an operator runs it, against a running instance (scripts/bench-backfill.sh starts
one and seeds the rows): ROWS profiles with ids FIRST…FIRST+ROWS-1, the first CACHED of them read
into memcached, a steady GET load on those (wrk, paced), then at a psql prompt one statement
changing every row. Prints, as figures:

  - the instance's RSS before the statement and its peak until the feed caught up;
  - from COMMIT, when every one of SAMPLE cached profiles shows the new content on GET;
  - `lag_bytes` in /readyz: above 0 until the last sampled profile was repaired, or not;
  - the consistency observer's violations during and after;
  - the GET load's p50/p99/max and its errors (wrk).

  scripts/bench/backfill.py --port 18098 --first 3000000001 --rows 1000000 --cached 20000
"""
import argparse, functools, http.client, json, os, random, re, signal, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # service_helpers
import service_helpers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
get = functools.partial(service_helpers.get, timeout=30)  # this script's GETs wait up to 30 s


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    """User plus system CPU time of process `pid`, in seconds (/proc/PID/stat)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def walsender_pid(database_url):
    """The walsender streaming the default cache cluster's slot in this database (either name)."""
    answer = subprocess.run(["psql", "-X", "-tA", database_url, "-c",
                             "SELECT active_pid FROM pg_replication_slots WHERE database = current_database() AND active "
                             "AND slot_name IN ('profile_service_cache', "
                             "'profile_service_' || (SELECT oid FROM pg_database WHERE datname = current_database()) "
                             "|| '_default')"],
                            capture_output=True, text=True).stdout.strip()
    return int(answer) if answer.isdigit() else None


def metric(port, name, labels=""):
    text = get(port, "/metrics").text
    pattern = re.escape(name + (("{" + labels + "}") if labels else "")) + r" ([0-9.e+]+)"
    match = re.search(pattern, text)
    return float(match.group(1)) if match else 0.0


def read_all(port, ids, threads=8):
    """GETs every id once (keep-alive, `threads` clients); returns {id: body}."""
    bodies = {}
    lock = threading.Lock()

    def client(part):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = {}
        for profile in part:
            mine[profile] = get(port, f"/users/profile/{profile}", connection=connection).text
        with lock:
            bodies.update(mine)

    workers = [threading.Thread(target=client, args=(ids[i::threads],)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return bodies


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--database-url", default=os.environ.get("PROFILE_DATABASE_URL"))
    parser.add_argument("--first", type=int, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--cached", type=int, default=20000)
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument("--load-delay-ms", type=int, default=2, help="wrk pacing per connection")
    parser.add_argument("--timeout", type=float, default=300)
    options = parser.parse_args()
    port, first = options.port, options.first
    # Spread over the table, as readers spread: every step-th profile.
    step = max(1, options.rows // options.cached)
    cached = list(range(first, first + step * options.cached, step))

    print(f"backfill: reading {len(cached)} profiles into memcached", file=sys.stderr)
    read_all(port, cached)
    read_all(port, cached)  # the second read finds each entry (a first read after the feed may lose its populate)
    violations_before = metric(port, "profile_service_consistency_checks_total", 'result="violation"')
    rss_before = rss_kib(options.pid)

    # A steady GET load on the cached ids while the statement runs and the feed repairs.
    wrk = subprocess.Popen(
        ["wrk", "-t2", "-c16", f"-d{int(options.timeout) + 120}s", "--latency", "-s", "scripts/bench/get_paced.lua",
         f"http://127.0.0.1:{port}", "--", str(cached[-1]), str(cached[0]), str(step)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, BENCH_DELAY_MS=str(options.load_delay_ms)))
    time.sleep(2)

    samples = []  # (seconds since COMMIT, lag_bytes, rss KiB, changes_waiting)
    stop_sampling = threading.Event()
    committed_at = [None]

    def sampler():
        while not stop_sampling.is_set():
            try:
                feed = json.loads(get(port, "/readyz")[1]).get("change_feed", {})
                now = time.time()
                since = now - committed_at[0] if committed_at[0] else None
                samples.append((since, feed.get("lag_bytes", 0), rss_kib(options.pid), now))
            except (OSError, ValueError):
                pass
            time.sleep(0.25)

    threading.Thread(target=sampler, daemon=True).start()
    statement = "UPDATE user_profiles SET display_name = display_name || ' (backfilled)'" \
                f" WHERE id BETWEEN {first} AND {first + options.rows - 1}"
    print(f"backfill: {statement}", file=sys.stderr)
    started = time.time()
    subprocess.run(["psql", "-X", "-q", options.database_url, "-c", statement], check=True)
    committed_at[0] = time.time()
    walsender = walsender_pid(options.database_url)
    cpu_at_commit = (cpu_seconds(options.pid), cpu_seconds(walsender) if walsender else 0.0)
    print(f"backfill: the statement took {committed_at[0] - started:.1f} s", file=sys.stderr)

    sample = random.sample(cached, min(options.sample, len(cached)))
    remaining = set(sample)
    all_new_after = None
    lag_zero_while_stale = 0
    while remaining and time.time() - committed_at[0] < options.timeout:
        lag = samples[-1][1] if samples else None
        bodies = read_all(port, sorted(remaining))
        remaining = {profile for profile, body in bodies.items() if "(backfilled)" not in body}
        if remaining and lag == 0 and samples and samples[-1][0] is not None and samples[-1][0] > 2:
            lag_zero_while_stale += 1
        if not remaining:
            all_new_after = time.time() - committed_at[0]
        else:
            time.sleep(0.2)
    # Until the feed has caught up.
    deadline = time.time() + 60
    while time.time() < deadline and (not samples or samples[-1][1] != 0):
        time.sleep(0.5)
    cpu_used = (cpu_seconds(options.pid) - cpu_at_commit[0],
                (cpu_seconds(walsender) - cpu_at_commit[1]) if walsender else None)
    time.sleep(3)  # the observer checks 2 s after a change
    stop_sampling.set()
    wrk.send_signal(signal.SIGINT)  # wrk prints its figures when interrupted
    output = wrk.communicate()[0]
    violations = metric(port, "profile_service_consistency_checks_total", 'result="violation"') - violations_before
    checks = sum(float(v) for v in re.findall(r"profile_service_consistency_checks_total\{[^}]*\} ([0-9.]+)",
                                              get(port, "/metrics").text))
    after_commit = [s for s in samples if s[0] is not None]
    peak = max([s[2] for s in samples] or [rss_before])
    repaired_at = all_new_after if all_new_after is not None else float("inf")
    lag_positive_until_repaired = all(s[1] > 0 for s in after_commit if 1.0 < s[0] < repaired_at - 0.5)
    caught_up = next((s[0] for s in after_commit if s[1] == 0), None)

    def latency(label):
        match = re.search(rf"^\s*{label}\s+([0-9.]+)(us|ms|s)\s*$", output, re.M)
        if not match:
            return "?"
        value = float(match.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[match.group(2)]
        return f"{value:.2f} ms"

    requests = re.search(r"(\d+) requests in", output)
    errors = re.search(r"Socket errors: (.*)", output)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    maximum = re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", output)
    print("| figure | measured |")
    print("| --- | --- |")
    print(f"| rows changed by one statement / cached before | {options.rows:,} / {len(cached):,} |")
    print(f"| the statement (psql, until COMMIT) | {committed_at[0] - started:.1f} s |")
    print(f"| RSS before → peak until caught up | {rss_before / 1024:.1f} MiB → {peak / 1024:.1f} MiB (+{(peak - rss_before) / 1024:.1f}) |")
    print(f"| all {len(sample):,} sampled cached profiles new on GET, after COMMIT | "
          + (f"{all_new_after:.1f} s" if all_new_after is not None else f"not within {options.timeout:.0f} s ({len(remaining)} stale)") + " |")
    print("| the feed caught up (lag_bytes 0) after COMMIT | "
          + (f"{caught_up:.1f} s" if caught_up is not None else "not yet") + " |")
    print(f"| CPU from COMMIT until caught up | the instance {cpu_used[0]:.1f} s (the feed and the GET load),"
          f" PostgreSQL's walsender " + (f"{cpu_used[1]:.1f} s" if cpu_used[1] is not None else "?") + " |")
    print(f"| lag_bytes > 0 from COMMIT until they were | {'yes' if lag_positive_until_repaired else 'no'}"
          f" (peak {max([s[1] for s in after_commit] or [0]) / 1e6:.0f} MB; 0 while stale in {lag_zero_while_stale} polls) |")
    print(f"| consistency violations (during and after) | {violations:.0f} of {checks:.0f} checks since start |")
    print(f"| GET hits meanwhile (wrk -t2 -c16, {options.load_delay_ms} ms pacing) | {requests.group(1) if requests else '?'} requests,"
          f" p50 {latency('50%')}, p99 {latency('99%')}, max {maximum.group(1) if maximum else '?'},"
          f" non-2xx {non2xx.group(1) if non2xx else 0}, socket errors {errors.group(1) if errors else 'none'} |")
    ok = all_new_after is not None and violations == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
