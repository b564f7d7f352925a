#!/usr/bin/env bash
# Lists of profiles against single GETs on one profile-service instance with its defaults
# (16 workers, access log on, change feed on), side by side in the same run (issue 20).
#
#   scripts/bench-lists.sh [ROUNDS (3)] [DURATION (10s)]
#
# Seeds 10,000 profiles, warms every one into memcached, then per round runs wrk -t2 -c64 --latency
# with single GETs of random ids (scripts/bench/get_random.lua) and with lists of 100 random
# distinct ids (scripts/bench/list_random.lua), in alternating order. Prints profiles/s (a list
# counts its 100), requests/s, p50 and p99 of each and their ratio (medians of the rounds). Then
# the cold list: 20 times, every memcached node flushed and a list of 100 ids read — its latency,
# and the rows read from PostgreSQL, the batched queries and the cache misses per list, from the
# service's own /metrics.
# Port: BENCH_LISTS_PORT (18091).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
duration=${2:-10s}
out=$(pwd)/.build-bench
port=${BENCH_LISTS_PORT:-18091}
mkdir -p "$out"

scripts/deps.sh start
eval "$(scripts/deps.sh env)"
command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
echo "bench-lists: building profile-service (release)" >&2
swift build -c release --product profile-service >/dev/null
.build/release/profile-service migrate --migrations-directory migrations 2>/dev/null
psql -q "$PROFILE_DATABASE_URL" -f scripts/bench/seed_profiles.sql

head -c 32 /dev/urandom | base64 >"$out/lists-jwt-secret"
.build/release/profile-service serve --port "$port" --database-url "$PROFILE_DATABASE_URL" \
    --memcached "$PROFILE_MEMCACHED" --jwt-secret-file "$out/lists-jwt-secret" 2>"$out/profile-service-lists.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.1; done
url="http://127.0.0.1:$port"
# Warm every id (misses populate), then the measured rounds.
for first in $(seq 1 100 10000); do
    curl -s -o /dev/null "$url/users/profiles?ids=$(seq -s, "$first" $((first + 99)))"
done

python3 - "$url" "$rounds" "$duration" "$PROFILE_MEMCACHED" <<'PY'
import re, socket, statistics, subprocess, sys, time, urllib.request

url, rounds, duration, memcached = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def wrk(script, *args):
    for _ in range(3):  # wrk 4.1 now and then crashes in a Lua callback: run it again
        run = subprocess.run(["wrk", "-t2", "-c64", "-d" + duration, "--latency", "-s", script, url, "--", *args],
                             capture_output=True, text=True)
        if run.returncode == 0:
            break
    text = run.stdout
    def ms(label):
        value, unit = re.search(r"^\s*%s\s+([\d.]+)(us|ms|s)" % label, text, re.M).groups()
        return float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    non2xx = int((re.search(r"Non-2xx or 3xx responses: (\d+)", text) or [0, 0])[1])
    return rps, ms("50%"), ms("99%"), non2xx

single, lists = [], []
for round in range(rounds):
    order = [("single", "scripts/bench/get_random.lua", ("10000",)), ("list", "scripts/bench/list_random.lua", ("10000", "100"))]
    if round % 2: order.reverse()
    for name, script, args in order:
        (single if name == "single" else lists).append(wrk(script, *args))

def median(rows, index): return statistics.median(row[index] for row in rows)
single_profiles = median(single, 0)
list_profiles = median(lists, 0) * 100
print(f"warm, {rounds} rounds of {duration}, wrk -t2 -c64 (medians):")
print(f"  {'':22}{'profiles/s':>12}{'requests/s':>12}{'p50 ms':>9}{'p99 ms':>9}{'non-2xx':>9}")
print(f"  {'single GETs':22}{single_profiles:12,.0f}{median(single, 0):12,.0f}{median(single, 1):9.2f}{median(single, 2):9.2f}{sum(r[3] for r in single):9}")
print(f"  {'lists of 100':22}{list_profiles:12,.0f}{median(lists, 0):12,.0f}{median(lists, 1):9.2f}{median(lists, 2):9.2f}{sum(r[3] for r in lists):9}")
print(f"  lists / single GETs: {list_profiles / single_profiles:.1f}x the profiles/s")

def metric(text, event):
    match = re.search(r'^profile_service_cache_events_total\{[^}]*event="%s"[^}]*\} ([\d.e+]+)' % event, text, re.M)
    return float(match.group(1)) if match else 0.0

def flush_every_node():
    for node in memcached.split(","):
        host, port = node.split(":")
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(b"flush_all\r\n")
            s.recv(64)

# The metrics are per instance; the list's own figures are the difference around it.
metrics = lambda: urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
import random
latencies, reads, queries, misses = [], [], [], []
for _ in range(20):
    ids = random.sample(range(1, 10001), 100)
    flush_every_node()
    before = metrics()
    started = time.perf_counter()
    urllib.request.urlopen(url + "/users/profiles?ids=" + ",".join(map(str, ids)), timeout=10).read()
    latencies.append((time.perf_counter() - started) * 1000)
    after = metrics()
    reads.append(metric(after, "database_read") - metric(before, "database_read"))
    queries.append(metric(after, "database_batch_read") - metric(before, "database_batch_read"))
    misses.append(metric(after, "miss") - metric(before, "miss"))
print(f"cold, 20 lists of 100 ids, every node flushed before each: p50 {statistics.median(latencies):.1f} ms, "
      f"max {max(latencies):.1f} ms; per list {statistics.median(reads):.0f} rows read from PostgreSQL "
      f"in {statistics.median(queries):.0f} batched queries, {statistics.median(misses):.0f} cache misses")
PY
rss=$(awk '/VmHWM/ { print $2 }' /proc/$pid/status)
echo "peak RSS of the instance: $((rss / 1024)) MiB"
