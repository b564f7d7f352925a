# Sourced by the side-by-side benchmarks (bench-ab.sh, bench-pooler.sh, bench-replicas.sh) once
# this checkout's release build is there and $out is set: migrates and seeds the database of scripts/deps.sh, makes
# a JWT secret in $out and an admin $token, and starts services with `bench_start BINARY PORT
# [args…]` (defaults but --no-access-log, log in $out, ready or exit), each killed on exit, and runs
# their rounds with `bench_alternate` (the order alternating by round).
# BENCH_SERVE_ARGS="--flag value …" is appended to every service's serve command line (every binary
# started must know those flags).
# BENCH_RTT_MS (0.2 allowed; default 0: direct) starts one delay proxy (scripts/delay.sh, state in
# $out/delay, ports of the servers + BENCH_DELAY_PORT_OFFSET, 2000) in front of PostgreSQL and the
# memcached nodes, gives the services its addresses (the harness's own connections stay direct),
# measures the round trip it adds (scripts/bench/measure_rtt.py) and sets $bench_rtt_note for the
# caller's table. Only for a caller that sets bench_rtt_supported=1 before sourcing (bench-ab.sh):
# the others refuse it rather than delay only some of their servers.
.build/release/profile-service migrate --migrations-directory migrations >/dev/null 2>&1
psql -q "$PROFILE_DATABASE_URL" -f scripts/bench/seed_profiles.sql
secret=$out/jwt-secret
[ -f "$secret" ] || head -c 32 /dev/urandom | base64 >"$secret"
token=$(.build/release/profile-service token --sub 1 --scope profiles:admin --ttl 7200 --jwt-secret-file "$secret")
read -ra bench_serve_extra <<<"${BENCH_SERVE_ARGS:-}"
bench_rtt_ms=${BENCH_RTT_MS:-0}
[[ $bench_rtt_ms =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
    { echo "$(basename "$0"): BENCH_RTT_MS must be a number of milliseconds, not '$bench_rtt_ms'" >&2; exit 2; }
bench_rtt_ms=$(awk -v r="$bench_rtt_ms" 'BEGIN { print r + 0 }')
bench_delay() { PROFILE_DELAY_DIR=$out/delay PROFILE_DELAY_PORT_OFFSET=${BENCH_DELAY_PORT_OFFSET:-2000} scripts/delay.sh "$@"; }
bench_pids=()
bench_cleanup() {
    for pid in "${bench_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ "$bench_rtt_ms" = 0 ] || bench_delay stop 2>/dev/null || true
}
trap bench_cleanup EXIT
bench_service_env=() # PROFILE_…=… for the services: the proxied addresses, when there is a proxy
bench_rtt_note=""
if [ "$bench_rtt_ms" != 0 ]; then
    if [ "${bench_rtt_supported:-0}" != 1 ]; then
        echo "$(basename "$0"): BENCH_RTT_MS is not supported by this benchmark (only bench.sh and bench-ab.sh)" >&2
        exit 2
    fi
    bench_delay start "$bench_rtt_ms"
    mapfile -t bench_service_env < <(bench_delay env | sed -n "s/^export \(PROFILE_[A-Z_]*\)='\(.*\)'\$/\1=\2/p")
    echo "$(basename "$0"): measuring the round trip the delay proxy adds (BENCH_RTT_MS=$bench_rtt_ms)" >&2
    bench_measured=$(bench_delay measure)
    sed '$d' <<<"$bench_measured" | sed "s/^/$(basename "$0"): /" >&2
    bench_rtt_note=$(tail -n1 <<<"$bench_measured" | python3 -c '
import json, sys
m, rtt = json.load(sys.stdin), sys.argv[1]
mc, pg = ("?" if v is None else f"+{v:.2f} ms" for v in (m["memcached_added_ms"], m["postgres_added_ms"]))
print(f"Round trip added between the services and PostgreSQL / memcached: {rtt} ms (BENCH_RTT_MS, a delay "
      f"proxy); measured: memcached {mc}, PostgreSQL {pg} (medians, the proxy hop included).")' "$bench_rtt_ms")
fi
bench_start() { # binary port [args…]
    local binary=$1 port=$2; shift 2
    env "${bench_service_env[@]}" "$binary" serve --port "$port" --jwt-secret-file "$secret" --no-access-log "$@" \
        "${bench_serve_extra[@]}" >>"$out/service-$port.log" 2>&1 &
    bench_pids+=($!)
    for _ in $(seq 1 100); do curl -fs "127.0.0.1:$port/readyz" >/dev/null && return; sleep 0.1; done
    echo "$(basename "$0"): the service on $port did not become ready" >&2
    exit 1
}
# Every workload of $workloads, $rounds times, against two services: the caller's
# `run NAME PORT WORKLOAD` for each, the first one first in odd rounds and second in even ones.
bench_alternate() { # name_a port_a name_b port_b
    local round workload
    for round in $(seq 1 "$rounds"); do
        for workload in $workloads; do
            if [ $((round % 2)) = 1 ]; then run "$1" "$2" "$workload"; run "$3" "$4" "$workload"
            else run "$3" "$4" "$workload"; run "$1" "$2" "$workload"; fi
        done
    done
}
# Figures of one wrk run ($1: its --latency output): requests/s, and p99 in milliseconds.
bench_rps() { awk '/Requests\/sec/ {print $2}' <<<"$1"; }
bench_p99_ms() { awk '$1 == "99%" {v = $2 + 0; if ($2 ~ /us$/) v /= 1000; else if ($2 ~ /[0-9]s$/) v *= 1000; print v}' <<<"$1"; }
# The median of the numbers on stdin (separated by spaces or lines).
bench_median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# A flush-storm run: memcached flushed every 2 ms while wrk -t2 -c64 runs scripts/bench/mixed.lua
# for $duration against port $1 — workload $2, get_db (GETs of 10,000 ids) or mixed_db (10 % PUTs).
# Sets $bench_result to wrk's output.
bench_flush_storm() { # port workload
    local port=$1 flusher args=()
    case $2 in
        get_db) args=(0.0 10000) ;;
        mixed_db) args=(0.1 10000) ;;
        *) echo "$(basename "$0"): unknown workload $2" >&2; exit 2 ;;
    esac
    python3 scripts/bench/memcached_flush.py "${PROFILE_MEMCACHED}" 0.002 3600 2>/dev/null &
    flusher=$!
    bench_result=$(BENCH_TOKEN=$token wrk -t2 -c64 -d"$duration" --latency -s scripts/bench/mixed.lua \
        "http://127.0.0.1:$port" -- "${args[@]}")
    kill "$flusher" 2>/dev/null || true
}
