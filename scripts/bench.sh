#!/usr/bin/env bash
# profile-service against the Go reference (../shared/reference/go-seed), side by side, on the
# same PostgreSQL and memcached, alternating in the same run.
#
#   scripts/bench.sh [ROUNDS (3)] [DURATION (10s)]
#
# Builds both in release mode, seeds 10,000 profiles, and for each round runs wrk -t2 -c64
# (after a warm-up) against each of three servers in turn, the order changing by round (the two
# profile-service instances always one right after the other):
#   ps    profile-service with its defaults (access log on)
#   psq   profile-service with its defaults and --no-access-log
#   go    go-seed (which logs no requests)
# A fourth instance (defaults, --no-access-log, not measured) is started first and consumes the
# change feed, as one instance of a cluster does; the measured ones stand by.
#   get_hit   GET of random ids, every read a cache hit
#   get_db    GET with memcached flushed every 2 ms (the PostgreSQL path)
#   mix_90_10 90 % GET / 10 % PUT with the right versions
#   put_100   100 % PUT with the right versions (versions reset to 1 first)
# Prints one table (medians of the rounds: requests/s, p50, p99, non-2xx, ratios, the access log's
# cost) and each server's peak RSS and CPU seconds; writes docs/benchmark.md and docs/benchmark.svg.
# Both profile-service instances use the two-node cluster and the database of scripts/deps.sh;
# go-seed gets a memcached node and a database (profiles_go) of its own.
# The access log goes to .build-bench/profile-service.log, emptied after each run (it grows by
# about 3 MB/s); the service's other lines are kept in .build-bench/profile-service-events.log.
# BENCH_WORKLOADS="get_hit get_db" runs only those workloads.
# Ports: BENCH_PS_PORT (18081), BENCH_PSQ_PORT (18083), BENCH_GO_PORT (18082), BENCH_FEED_PORT (18084) and
# BENCH_GO_MC_PORT (21219, go-seed's memcached).
# BENCH_SKIP_BUILD=1 uses the existing release binaries (.build/release/profile-service, and
# .build-bench/go-seed unless it is missing): no swift build.
# BENCH_SERVE_ARGS="--flag value …" is appended to every profile-service serve command line (all
# three instances), e.g. to compare flags.
# BENCH_RTT_MS=1 (0.2 allowed; default 0: direct on loopback, as ever) puts a network round trip of
# that many ms between every server process (the three profile-service instances and go-seed) and
# PostgreSQL and memcached: one delay proxy (scripts/delay.sh, scripts/bench/delay_proxy.c; half of
# it each way) in front of PostgreSQL, both memcached nodes and go-seed's node, on their ports +
# BENCH_DELAY_PORT_OFFSET (2000), so both sides pay the same. The harness's own connections
# (seeding, version resets, flushes) stay direct. The round trip really added (memcached and
# PostgreSQL, scripts/bench/measure_rtt.py) is measured before the runs, printed, and heads the
# report, which then goes to docs/benchmark-rtt-<RTT>ms.md and .svg (not docs/benchmark.*).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
duration=${2:-10s}
here=$(pwd)
out=$here/.build-bench
results=$out/results
go_seed_dir=${GO_SEED_DIR:-$here/../shared/reference/go-seed}
ps_port=${BENCH_PS_PORT:-18081} psq_port=${BENCH_PSQ_PORT:-18083} go_port=${BENCH_GO_PORT:-18082}
feed_port=${BENCH_FEED_PORT:-18084}
go_mc_port=${BENCH_GO_MC_PORT:-21219}
skip_build=${BENCH_SKIP_BUILD:-0}
read -ra serve_extra <<<"${BENCH_SERVE_ARGS:-}"
rtt_ms=${BENCH_RTT_MS:-0}
[[ $rtt_ms =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "bench: BENCH_RTT_MS must be a number of milliseconds, not '$rtt_ms'" >&2; exit 2; }
rtt_ms=$(awk -v r="$rtt_ms" 'BEGIN { print r + 0 }') # 1.0 → 1, 0.20 → 0.2: the report's name
delay_offset=${BENCH_DELAY_PORT_OFFSET:-2000}
delay() { PROFILE_DELAY_DIR=$out/delay PROFILE_DELAY_PORT_OFFSET=$delay_offset scripts/delay.sh "$@"; }
mkdir -p "$results" docs
rm -f "$results"/*.txt "$out"/profile-service*.log

scripts/deps.sh start
eval "$(scripts/deps.sh env)"
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v go >/dev/null || missing+=(golang-go)
[ -d /usr/share/gocode/src/github.com/bradfitz/gomemcache ] || missing+=(golang-github-bradfitz-gomemcache-dev)
[ -d /usr/share/gocode/src/github.com/lib/pq ] || missing+=(golang-github-lib-pq-dev)
if [ ${#missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "$skip_build" = 1 ]; then
    [ -x .build/release/profile-service ] ||
        { echo "bench: BENCH_SKIP_BUILD=1, but there is no .build/release/profile-service" >&2; exit 1; }
    echo "bench: the existing release build of profile-service (BENCH_SKIP_BUILD=1)" >&2
else
    echo "bench: building profile-service (release)" >&2
    swift build -c release --product profile-service >/dev/null
fi
if [ "$skip_build" != 1 ] || [ ! -x "$out/go-seed" ]; then
    echo "bench: building go-seed" >&2
    cp "$go_seed_dir/main.go" "$out/go-seed.go"
    (cd "$out" && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$out/gocache go build -o "$out/go-seed" "$out/go-seed.go")
fi
.build/release/profile-service migrate --migrations-directory migrations 2>/dev/null

# go-seed gets a database of its own: profile-service's change feed (on by default) decodes every
# commit of its database, and must not spend the machine's CPU on go-seed's writes.
go_database_url="${PROFILE_DATABASE_URL%/*}/profiles_go"
psql -q "$PROFILE_DATABASE_URL" -tAc "SELECT 1 FROM pg_database WHERE datname = 'profiles_go'" | grep -q 1 ||
    psql -q "$PROFILE_DATABASE_URL" -c "CREATE DATABASE profiles_go"
.build/release/profile-service migrate --migrations-directory migrations --database-url "$go_database_url" 2>/dev/null
for url in "$PROFILE_DATABASE_URL" "$go_database_url"; do
    psql -q "$url" -f scripts/bench/seed_profiles.sql
done

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -f "$out/memcached/go.pid"
    [ "$rtt_ms" = 0 ] || delay stop 2>/dev/null || true
}
trap cleanup EXIT

# go-seed's own memcached node (memcached writes its pid file after dropping to memcache).
mkdir -p "$out/memcached" && chown memcache: "$out/memcached"
memcached -d -P "$out/memcached/go.pid" -l 127.0.0.1 -p $go_mc_port -U 0 -m 64 -t 2 -u memcache
for _ in $(seq 1 50); do [ -s "$out/memcached/go.pid" ] && break; sleep 0.1; done
[ -s "$out/memcached/go.pid" ] || { echo "bench: memcached for go-seed did not start (port $go_mc_port taken?)" >&2; exit 1; }
pids+=("$(cat "$out/memcached/go.pid")")

# The servers' addresses for the server processes: direct, or through the delay proxy.
svc_database_url=$PROFILE_DATABASE_URL svc_memcached=$PROFILE_MEMCACHED svc_go_memcached=127.0.0.1:$go_mc_port
rtt_note=""
if [ "$rtt_ms" != 0 ]; then
    delay start "$rtt_ms" "127.0.0.1:$go_mc_port"
    # `delay env` prints export lines; read them as proxied_DATABASE_URL etc., not over the
    # harness's own (direct) PROFILE_* variables.
    eval "$(delay env | sed 's/^export PROFILE_/proxied_/')"
    svc_database_url=$proxied_DATABASE_URL svc_memcached=$proxied_MEMCACHED
    svc_go_memcached=127.0.0.1:$((go_mc_port + delay_offset))
    # The standby of deps.sh, if it ran: the instances read PROFILE_REPLICA_DATABASE_URLS too.
    [ -z "${proxied_REPLICA_DATABASE_URLS:-}" ] || export PROFILE_REPLICA_DATABASE_URLS=$proxied_REPLICA_DATABASE_URLS
    echo "bench: measuring the round trip the delay proxy adds (BENCH_RTT_MS=$rtt_ms)" >&2
    measured=$(delay measure)
    sed '$d' <<<"$measured" | sed 's/^/bench: /' >&2
    tail -n1 <<<"$measured" >"$out/rtt.json"
    rtt_note=$(python3 - "$out/rtt.json" "$rtt_ms" <<'PY'
import json, sys
m, rtt = json.load(open(sys.argv[1])), sys.argv[2]
def ms(v):
    return "?" if v is None else f"+{v:.2f} ms"
print(f"**Round trip added: {rtt} ms** (BENCH_RTT_MS) between every server process (the profile-service "
      f"instances and go-seed) and PostgreSQL / memcached, by one delay proxy (scripts/bench/delay_proxy.c, "
      f"{float(rtt) * 500:g} µs each way); measured before the runs (scripts/bench/measure_rtt.py, medians, "
      f"the proxy's own hop included): memcached {ms(m['memcached_added_ms'])}, PostgreSQL "
      f"{ms(m['postgres_added_ms'])} per request/answer. The harness's own connections are direct.")
PY
)
fi
go_database_url_svc="${svc_database_url%/*}/profiles_go"

serve_args=(serve --database-url "$svc_database_url" --memcached "$svc_memcached")
export BENCH_TOKEN=""
# Not `serve --help | grep -q`: grep's early exit fails the pipeline (SIGPIPE) under pipefail.
if grep -q -- '--jwt-secret-file' <<<"$(.build/release/profile-service serve --help)"; then
    head -c 32 /dev/urandom | base64 > "$out/jwt-secret"
    serve_args+=(--jwt-secret-file "$out/jwt-secret")
    BENCH_TOKEN=$(.build/release/profile-service token --sub 0 --scope profiles:admin --ttl 3600 \
        --jwt-secret-file "$out/jwt-secret")
fi
# The change feed's consumer runs in one instance of a cluster; the others stand by (README, Change
# feed). A third instance, started first, takes the slot, so that neither measured instance carries
# the consumer for both: its CPU (the commit stream of every PUT) stays on the same two cores and in
# every figure, but the defaults-against---no-access-log comparison measures the access log alone.
.build/release/profile-service "${serve_args[@]}" --port $feed_port --no-access-log "${serve_extra[@]}" 2>"$out/profile-service-feed.log" &
feed_pid=$!; pids+=($feed_pid)
for _ in $(seq 1 100); do
    curl -s "http://127.0.0.1:$feed_port/readyz" | grep -q '"state":"active"' && break
    sleep 0.1
done
curl -s "http://127.0.0.1:$feed_port/readyz" | grep -q '"state":"active"' ||
    echo "bench: warning: the feed instance did not take the change feed's slot" >&2
# stderr to a file, as a service manager's log file would take it (appending: emptied after each run).
.build/release/profile-service "${serve_args[@]}" --port $ps_port "${serve_extra[@]}" 2>>"$out/profile-service.log" &
ps_pid=$!; pids+=($ps_pid)
.build/release/profile-service "${serve_args[@]}" --port $psq_port --no-access-log "${serve_extra[@]}" 2>"$out/profile-service-quiet.log" &
psq_pid=$!; pids+=($psq_pid)
"$out/go-seed" -listen 127.0.0.1:$go_port -pg "${go_database_url_svc}?sslmode=disable" \
    -memcached "$svc_go_memcached" 2>"$out/go-seed.log" &
go_pid=$!; pids+=($go_pid)
for port in $ps_port $psq_port $go_port; do
    for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/users/profile/1" && break; sleep 0.1; done
done

cpu_seconds() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$1/stat"; }
memcached_of() { [ "$1" = go ] && echo "127.0.0.1:$go_mc_port" || echo "$PROFILE_MEMCACHED"; }
database_of() { [ "$1" = go ] && echo "$go_database_url" || echo "$PROFILE_DATABASE_URL"; }
port_of() { case $1 in ps) echo $ps_port ;; psq) echo $psq_port ;; go) echo $go_port ;; esac; }
pid_of() { case $1 in ps) echo $ps_pid ;; psq) echo $psq_pid ;; go) echo $go_pid ;; esac; }

# wrk 4.1 now and then crashes (SIGSEGV) in a Lua script's response callback: run it again.
wrk() {
    local attempt
    for attempt in 1 2 3; do
        command wrk "$@" && return 0
        echo "bench: wrk failed (attempt $attempt), again" >&2
    done
    return 1
}

run() { # workload service round
    local workload=$1 svc=$2 round=$3 url file script args=() flusher=
    url="http://127.0.0.1:$(port_of "$svc")"
    file="$results/$round-$workload-$svc.txt"
    case $workload in
        get_hit) script=scripts/bench/get_random.lua; args=(10000)
            wrk -t2 -c64 -d3s -s $script "$url" -- 10000 >/dev/null ;;  # warm-up: populate
        get_db) script=scripts/bench/get_random.lua; args=(10000)
            python3 scripts/bench/memcached_flush.py "$(memcached_of "$svc")" 0.002 3600 2>/dev/null &
            flusher=$! ;;
        mix_90_10) script=scripts/bench/mixed.lua; args=(0.1 10000)
            wrk -t2 -c64 -d2s -s $script "$url" -- 0.1 10000 >/dev/null ;;
        put_100) script=scripts/bench/mixed.lua; args=(1.0 10000 assume_v1)
            # Versions back to 1 so that assume_v1 holds: the harness resetting its own data, not an
            # edit, so past the triggers that keep versions from going down (migrations/0003).
            psql -q "$(database_of "$svc")" -c "SET session_replication_role = replica" \
                -c "UPDATE user_profiles SET version = 1 WHERE id <= 10000"
            python3 scripts/bench/memcached_flush.py "$(memcached_of "$svc")" ;;
    esac
    local before after
    before=$(cpu_seconds "$(pid_of "$svc")")
    wrk -t2 -c64 -d"$duration" --latency -s $script "$url" -- "${args[@]}" >"$file"
    after=$(cpu_seconds "$(pid_of "$svc")")
    [ -n "$flusher" ] && kill "$flusher" 2>/dev/null
    echo "cpu_seconds: $(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.2f", a - b }')" >>"$file"
    echo "bench: round $round $workload $svc: $(grep 'Requests/sec' "$file")" >&2
    grep -v -F ' msg=request ' "$out/profile-service.log" >>"$out/profile-service-events.log" || true
    : >"$out/profile-service.log"
}

for round in $(seq 1 "$rounds"); do
    # The two profile-service instances always run one right after the other (the access log's
    # cost is their difference, and the machine drifts between rounds), each first in turn; go-seed
    # runs before them in every other pair of rounds.
    case $(((round - 1) % 4)) in
        0) order=(ps psq go) ;;
        1) order=(go psq ps) ;;
        2) order=(psq ps go) ;;
        3) order=(go ps psq) ;;
    esac
    for workload in ${BENCH_WORKLOADS:-get_hit get_db mix_90_10 put_100}; do
        for svc in "${order[@]}"; do run $workload "$svc" "$round"; done
    done
done

rss() { awk '/VmHWM/ { print $2 }' "/proc/$1/status"; }
dropped=$(curl -s "http://127.0.0.1:$ps_port/metrics" | awk '/^profile_service_log_lines_dropped_total/ { print $2 }')
usage=("ps:$(rss $ps_pid):$(cpu_seconds $ps_pid)" "psq:$(rss $psq_pid):$(cpu_seconds $psq_pid)"
    "go:$(rss $go_pid):$(cpu_seconds $go_pid)" "feed:$(rss $feed_pid):$(cpu_seconds $feed_pid)")
if [ "$rtt_ms" = 0 ]; then
    python3 scripts/bench/report.py "$results" "$rounds" "$duration" "${dropped:-?}" "${usage[@]}"
else
    # report.py writes docs/benchmark.md and .svg under its working directory: run it in a
    # directory of its own, then file them under the round trip's name, headed by the note.
    rm -rf "$out/report-rtt" && mkdir -p "$out/report-rtt"
    echo "$rtt_note"
    echo
    (cd "$out/report-rtt" && python3 "$here/scripts/bench/report.py" "$results" "$rounds" "$duration" "${dropped:-?}" "${usage[@]}")
    proxy_note="The delay proxy itself used $(cpu_seconds "$(cat "$out/delay/pid")") CPU seconds over the whole run (on the same cores)."
    echo
    echo "$proxy_note"
    { echo "$rtt_note"; echo; cat "$out/report-rtt/docs/benchmark.md"; echo; echo "$proxy_note"; } >"docs/benchmark-rtt-${rtt_ms}ms.md"
    cp "$out/report-rtt/docs/benchmark.svg" "docs/benchmark-rtt-${rtt_ms}ms.svg"
    echo "bench: wrote docs/benchmark-rtt-${rtt_ms}ms.md and .svg" >&2
fi
