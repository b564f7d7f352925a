#!/usr/bin/env bash
# Live updates under load: SUBSCRIBERS concurrent event streams on one release-built instance,
# then writes; and GET cache-hit throughput with and without those streams connected.
#
#   scripts/bench-sse.sh [SUBSCRIBERS (10000)] [DURATION (10s)] [ROUNDS (3)] [LIST_SIZE (0)]
#
# Seeds 10,000 profiles; streams follow ids 1..SUBSCRIBERS/2 (two devices per user), or with
# LIST_SIZE > 0 each stream is a list's stream (GET /users/profiles/events) of LIST_SIZE random
# ids of the 10,000 — `scripts/bench-sse.sh 1000 10s 3 100`: 1,000 lists of 100. Prints:
#   - RSS of the instance before and with the streams connected (and per stream);
#   - p50/p99/max from each PUT's answer to each subscriber's event (200 writes at 50/s, one
#     keep-alive connection; scripts/bench/profile_service_sse_subscribers.py, Python asyncio);
#   - wrk -t2 -c64 GET cache hits (scripts/bench/get_random.lua) on that instance and on a twin
#     instance without streams, alternating, ROUNDS rounds, medians.
# Everything (wrk, the client, the service, PostgreSQL, memcached) shares this machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
subscribers=${1:-10000}
duration=${2:-10s}
rounds=${3:-3}
list_size=${4:-0}
ids=$(( subscribers / 2 > 0 ? subscribers / 2 : 1 ))
[ "$list_size" -gt 0 ] && ids=10000
out=$(pwd)/.build-bench/sse
port=${PROFILE_SSE_BENCH_PORT:-18091}
mkdir -p "$out"

scripts/deps.sh start
eval "$(scripts/deps.sh env)"
command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
echo "bench-sse: building profile-service (release)" >&2
[ -n "${PROFILE_SERVICE_BIN:-}" ] || swift build -c release --product profile-service >/dev/null
bin=${PROFILE_SERVICE_BIN:-.build/release/profile-service}
$bin migrate --migrations-directory migrations 2>/dev/null
psql -q "$PROFILE_DATABASE_URL" -f scripts/bench/seed_profiles.sql
head -c 32 /dev/urandom | base64 > "$out/jwt-secret"
token=$($bin token --sub 0 --scope profiles:admin --ttl 3600 --jwt-secret-file "$out/jwt-secret")

ulimit -n "$(ulimit -Hn)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -f "$out/hold"; }
trap cleanup EXIT
# Two identical instances: S gets the streams, Q none; wrk alternates between them, so the
# comparison is made under the same (shared, noisy) machine load.
start_instance() {
    $bin serve --port "$1" --database-url "$PROFILE_DATABASE_URL" --memcached "$PROFILE_MEMCACHED" \
        --no-access-log --jwt-secret-file "$out/jwt-secret" --max-connections $(( subscribers * 2 + 1000 )) \
        --max-subscribers "$subscribers" --max-streams-per-client 0 2> "$out/service-$1.log" &
    pids+=("$!")
    for _ in $(seq 1 100); do curl -fs "localhost:$1/readyz" >/dev/null && break; sleep 0.1; done
}
start_instance "$port"
service=${pids[-1]}
start_instance $(( port + 1 ))
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$service/status"; }  # KiB
get_hits() {
    wrk -t2 -c64 -d"$duration" -s scripts/bench/get_random.lua "http://127.0.0.1:$1" -- 10000 \
        | awk '/Requests\/sec/ { print $2 }'
}
for p in "$port" $(( port + 1 )); do  # warm both caches and both processes
    wrk -t2 -c64 -d3s -s scripts/bench/get_random.lua "http://127.0.0.1:$p" -- 10000 >/dev/null
done
rss_before=$(rss)

rm -f "$out/ready"
touch "$out/hold"
python3 scripts/bench/profile_service_sse_subscribers.py --port "$port" --subscribers "$subscribers" --ids "$ids" \
    --writes 200 --rate 50 --token "$token" --ready-file "$out/ready" --hold-file "$out/hold" \
    --list-size "$list_size" > "$out/client.json" &
client=$!
pids+=("$client")
for _ in $(seq 1 1200); do [ -s "$out/ready" ] && break; kill -0 "$client" 2>/dev/null || break; sleep 0.1; done
[ -s "$out/ready" ] || { echo "bench-sse: the subscribers did not connect" >&2; exit 1; }
sleep 1
rss_with=$(rss)
open=$(curl -fs "localhost:$port/metrics" | awk '/^profile_service_sse_subscribers / { print $2 }')
with_runs=() without_runs=()
for round in $(seq 1 "$rounds"); do
    if [ $(( round % 2 )) -eq 1 ]; then
        with_runs+=("$(get_hits "$port")"); without_runs+=("$(get_hits $(( port + 1 )))")
    else
        without_runs+=("$(get_hits $(( port + 1 )))"); with_runs+=("$(get_hits "$port")")
    fi
done
rm -f "$out/hold"
wait "$client"
metrics=$(curl -fs "localhost:$port/metrics")

python3 - "$out/client.json" "$subscribers" "$open" "$rss_before" "$rss_with" "$duration" \
    "${with_runs[*]}" "${without_runs[*]}" "$list_size" <<'PY'
import json, statistics, sys
client = json.load(open(sys.argv[1]))
subscribers, open_streams = int(sys.argv[2]), sys.argv[3]
list_size = int(sys.argv[9])
rss_before, rss_with = int(sys.argv[4]), int(sys.argv[5])
with_runs = [float(x) for x in sys.argv[7].split()]
without_runs = [float(x) for x in sys.argv[8].split()]
with_median, without_median = statistics.median(with_runs), statistics.median(without_runs)
kind = f"lists' streams of {list_size} ids" if list_size else "subscribers"
print(f"live updates, {subscribers} {kind} on one instance (open per /metrics: {open_streams})")
print(f"  RSS: {rss_before / 1024:.1f} MiB before, {rss_with / 1024:.1f} MiB with them "
      f"= {(rss_with - rss_before) / subscribers:.2f} KiB per subscriber")
lat = client["latency_ms"]
print(f"  {client['writes']} writes: {client['events_received']} of {client['events_expected']} events; "
      f"PUT answer -> event p50 {lat['p50']} ms, p99 {lat['p99']} ms, max {lat['max']} ms; "
      f"failed streams {client['failed_streams']}")
print(f"  GET cache hits, wrk -t2 -c64 -d{sys.argv[6]}, {len(with_runs)} rounds alternating: "
      f"with the streams {' / '.join(f'{x:,.0f}' for x in with_runs)} req/s (median {with_median:,.0f}), "
      f"without (twin instance) {' / '.join(f'{x:,.0f}' for x in without_runs)} (median {without_median:,.0f}) "
      f"-> {100 * (with_median - without_median) / without_median:+.1f} %")
PY
echo "$metrics" | grep -E '^sse_' || true
