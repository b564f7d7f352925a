#!/usr/bin/env bash
# Lookup by handle against lookup by id, side by side, on one built binary, on loopback:
#
#   eval "$(scripts/deps.sh env)"; PROFILE_SERVICE_BIN=.build/release/profile-service scripts/bench-handles.sh [ROUNDS (1)] [DURATION (10s)]
#
# Migrates the database of scripts/deps.sh, seeds 1,000 profiles of its own (ids 8100000001…8100001000,
# usernames Hb_User1…Hb_User1000, each about 430 bytes of JSON like scripts/bench/seed_profiles.sql),
# starts one instance (`serve --no-access-log --auth none`, no standby), reads every id and every
# handle twice (the cache warm), then, ROUNDS times, the order alternating by round:
#   by_id      wrk -t2 -c64 -d$DURATION --latency: GET /users/profile/{random seeded id}
#   by_handle  the same: GET /users/by-username/{random seeded handle, in lower case}
# and prints requests/s, p50 and p99 of each, the answers other than 200 (must be 0) and the ratio.
# Then the absent names: 10,000 lookups of 500 names no one holds (each 20 times, the 20 close
# together, 32 client threads) and how many PostgreSQL reads they caused: seq_scan + idx_scan of
# user_profiles and username_reservations (pg_stat_user_tables, after the 10 s PostgreSQL may take
# to publish a backend's counts; an idle interval as long is measured first, as the baseline), and
# the service's profile_service_cache_events_total series that moved.
# Environment: PROFILE_SERVICE_BIN (the binary; default .build/release/profile-service),
# CONNECTIONS (64), THREADS (2), BENCH_HANDLES_PORT (a free one), BENCH_STATS_WAIT_S (11).
# The service's log: $PROFILE_STATE_DIR/bench-handles-<port>.log (kept). Cache events `error` in a
# round mean memcached failed reads there: that round did not run on a warm cache.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-1}
duration=${2:-10s}
bin=${PROFILE_SERVICE_BIN:-.build/release/profile-service}
connections=${CONNECTIONS:-64}
threads=${THREADS:-2}
stats_wait=${BENCH_STATS_WAIT_S:-11}
: "${PROFILE_DATABASE_URL:?run eval \"\$(scripts/deps.sh env)\" first}"
[ -x "$bin" ] || { echo "bench-handles: no binary at $bin (PROFILE_SERVICE_BIN)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "bench-handles: wrk is not installed" >&2; exit 2; }
port=${BENCH_HANDLES_PORT:-$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import service_helpers; print(service_helpers.free_port())')}
work=$(mktemp -d /tmp/bench-handles.XXXXXX)
first_id=8100000001
count=1000
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$bin" migrate --migrations-directory migrations >"$work/migrate.log" 2>&1 ||
    { cat "$work/migrate.log" >&2; exit 1; }
psql -X -q -v ON_ERROR_STOP=1 "$PROFILE_DATABASE_URL" <<SQL
INSERT INTO user_profiles (id, username, display_name, bio, avatar_url, location)
SELECT $first_id - 1 + i, 'Hb_User' || i, 'Handle bench ' || i,
    left('User ' || i || ' writes about distributed systems, caches and coffee; reads Borges and Le Guin; '
         || 'runs slow marathons by the sea and answers every message, eventually. ' || repeat('More. ', 20), 160),
    'https://cdn.example.com/avatars/' || i || '/' || md5(i::text) || '.jpg', 'Lisbon, Portugal'
FROM generate_series(1, $count) AS i
ON CONFLICT (id) DO NOTHING;
SQL
held=$(psql -X -tA "$PROFILE_DATABASE_URL" -c "SELECT count(*) FROM user_profiles WHERE id BETWEEN $first_id AND $first_id + $count - 1 AND username = 'Hb_User' || (id - $first_id + 1)")
[ "$held" = "$count" ] || { echo "bench-handles: only $held of the $count seeded profiles have their username" >&2; exit 1; }

service_log=${PROFILE_STATE_DIR:-.state}/bench-handles-$port.log
mkdir -p "$(dirname "$service_log")"
env -u PROFILE_REPLICA_DATABASE_URLS "$bin" serve --port "$port" --no-access-log --auth none >"$service_log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do curl -fs "127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "127.0.0.1:$port/readyz" >/dev/null || { echo "bench-handles: the service did not become ready" >&2; tail "$service_log" >&2; exit 1; }

cat >"$work/lookup.lua" <<'LUA'
-- GET a random seeded profile: by id or by handle. args: mode (id|handle) first_id count
local mode, first_id, count = "id", 1, 1000
function init(args)
  mode, first_id, count = args[1], tonumber(args[2]), tonumber(args[3])
  math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)"), 16) or 0))
end
function request()
  local i = math.random(1, count)
  if mode == "handle" then
    return wrk.format("GET", "/users/by-username/hb_user" .. i)
  end
  return wrk.format("GET", "/users/profile/" .. string.format("%d", first_id - 1 + i))
end
LUA

# The service's cache events, as "event value" lines.
cache_events() {
    curl -fs "127.0.0.1:$port/metrics" | sed -n 's/^profile_service_cache_events_total{event="\([a-z_]*\)"} \([0-9.e+]*\)$/\1 \2/p'
}
# The lines of events that moved between two cache_events outputs ($1, $2: files).
events_moved() {
    awk 'NR == FNR { before[$1] = $2; next } { d = $2 - before[$1]; if (d != 0) printf "%s %d, ", $1, d }' "$1" "$2" | sed 's/, $//'
}

python3 - "$port" "$first_id" "$count" <<'PY'
import http.client, json, sys
port, first, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
bad = 0
for _ in range(2):
    for i in range(1, count + 1):
        for path in (f"/users/profile/{first - 1 + i}", f"/users/by-username/hb_user{i}"):
            c.request("GET", path); r = c.getresponse(); body = r.read()
            if r.status != 200 or json.loads(body)["id"] != first - 1 + i:
                bad += 1
print(f"warmed: {2 * count} ids and handles read twice; {bad} answers not 200 of the right id")
if bad:
    sys.exit(1)
PY

declare -A rps p50 p99 non2xx
run_wrk() { # mode round
    local out=$work/wrk-$1-$2.txt
    cache_events >"$work/before"
    wrk -t"$threads" -c"$connections" -d"$duration" --latency -s "$work/lookup.lua" "http://127.0.0.1:$port" -- "$1" "$first_id" "$count" >"$out"
    cache_events >"$work/after"
    rps[$1]="${rps[$1]:-} $(awk '/^Requests\/sec:/ { print $2 }' "$out")"
    p50[$1]="${p50[$1]:-} $(awk '$1 == "50%" { print $2 }' "$out")"
    p99[$1]="${p99[$1]:-} $(awk '$1 == "99%" { print $2 }' "$out")"
    non2xx[$1]=$(( ${non2xx[$1]:-0} + $(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out" | grep . || echo 0) ))
    echo "round $2 by_$1: $(awk '/^Requests\/sec:/ { print $2 }' "$out") req/s; cache events: $(events_moved "$work/before" "$work/after")"
}
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then run_wrk id "$round"; run_wrk handle "$round"; else run_wrk handle "$round"; run_wrk id "$round"; fi
done

python3 - "${rps[id]}" "${rps[handle]}" "${p50[id]}" "${p50[handle]}" "${p99[id]}" "${p99[handle]}" "${non2xx[id]}" "${non2xx[handle]}" "$duration" "$connections" <<'PY'
import statistics, sys
def ms(text):  # wrk's 1.23ms / 456.00us / 1.02s
    for unit, factor in (("us", 0.001), ("ms", 1), ("s", 1000)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float("nan")
rps_id, rps_h, p50_id, p50_h, p99_id, p99_h = ([float(x) if i < 2 else ms(x) for x in a.split()] for i, a in enumerate(sys.argv[1:7]))
non_id, non_h, duration, connections = sys.argv[7:]
m = statistics.median
print(f"\nwarm cache, wrk -t2 -c{connections} -d{duration}, medians of {len(rps_id)} round(s):")
print(f"{'lookup':<10} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8}")
print(f"{'by_id':<10} {m(rps_id):>10.0f} {m(p50_id):>8.2f} {m(p99_id):>8.2f} {non_id:>8}")
print(f"{'by_handle':<10} {m(rps_h):>10.0f} {m(p50_h):>8.2f} {m(p99_h):>8.2f} {non_h:>8}")
print(f"by_handle / by_id: {m(rps_h) / m(rps_id):.2f} of the requests/s; p50 x{m(p50_h) / m(p50_id):.2f}, p99 x{m(p99_h) / m(p99_id):.2f}")
PY

# PostgreSQL's scans of the two tables a lookup by handle reads: "seq idx" summed over both, and each.
table_scans() {
    psql -X -tA -F ' ' "$PROFILE_DATABASE_URL" -c "SELECT relname, coalesce(seq_scan, 0), coalesce(idx_scan, 0)
        FROM pg_stat_user_tables WHERE relname IN ('user_profiles', 'username_reservations') ORDER BY relname"
}
scan_delta() { # before after → "user_profiles seq+idx …, username_reservations …"
    awk 'NR == FNR { s[$1] = $2; i[$1] = $3; next } { printf "%s seq_scan %d idx_scan %d; ", $1, $2 - s[$1], $3 - i[$1]; t += $2 - s[$1] + $3 - i[$1] } END { printf "total %d\n", t }' "$1" "$2"
}
echo
echo "absent names: waiting ${stats_wait}s for PostgreSQL's statistics, then ${stats_wait}s idle as the baseline"
sleep "$stats_wait"
table_scans >"$work/scans0"
sleep "$stats_wait"
table_scans >"$work/scans1"
cache_events >"$work/absent-before"
tag=$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
python3 - "$port" "$tag" <<'PY'
import collections, http.client, queue, random, sys, threading, time
port, tag = int(sys.argv[1]), sys.argv[2]
names = [f"hb_absent_{tag}_{i}" for i in range(500)]
sequence = [n for n in names for _ in range(20)]
chunks = [sequence[i:i + 100] for i in range(0, len(sequence), 100)]  # 5 names' 20 lookups each, shuffled among them
for chunk in chunks:
    random.shuffle(chunk)
work = queue.Queue()
for name in (n for chunk in chunks for n in chunk):
    work.put(name)
statuses = collections.Counter()
def lookups():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    while True:
        try:
            name = work.get_nowait()
        except queue.Empty:
            return
        c.request("GET", f"/users/by-username/{name}"); r = c.getresponse(); r.read()
        statuses[r.status] += 1
began = time.monotonic()
threads = [threading.Thread(target=lookups) for _ in range(32)]
for t in threads: t.start()
for t in threads: t.join()
elapsed = time.monotonic() - began
print(f"absent names: {sum(statuses.values())} lookups of {len(names)} names in {elapsed:.1f}s "
      f"({sum(statuses.values()) / elapsed:.0f}/s, 32 threads); answers {dict(statuses)}")
PY
cache_events >"$work/absent-after"
sleep "$stats_wait"
table_scans >"$work/scans2"
echo "  PostgreSQL scans while idle ${stats_wait}s (baseline): $(scan_delta "$work/scans0" "$work/scans1")"
echo "  PostgreSQL scans for the 10,000 absent lookups (+${stats_wait}s): $(scan_delta "$work/scans1" "$work/scans2")"
echo "  service cache events: $(events_moved "$work/absent-before" "$work/absent-after")"
