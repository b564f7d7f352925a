#!/usr/bin/env bash
# The cost of the pooled line, side by side in one run: one instance with --database-url through
# PgBouncer in transaction mode (scripts/deps.sh start-pgbouncer; every statement unnamed, parsed
# with its parameters in the same round trip) and --database-direct-url PostgreSQL, one straight
# to PostgreSQL (named prepared statements), under the same memcached flush storm.
#
#   scripts/bench-pooler.sh [ROUNDS (3)] [DURATION (10s)]
#
# Release build, defaults but --no-access-log, on the servers of scripts/deps.sh plus an unmeasured
# instance that consumes the change feed. Workloads (wrk -t2 -c64, order alternating by round):
# get_db (GETs of 10,000 ids, memcached flushed every 2 ms: every read a PostgreSQL read) and
# mixed_db (the same with 10 % PUTs). Prints each run and the medians (requests/s, p99), with the
# ratio pooled / direct. BENCH_WORKLOADS="get_db" runs only those.
# Ports: 18096 (pooled), 18097 (direct), 18093 (feed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
duration=${2:-10s}
workloads=${BENCH_WORKLOADS:-get_db mixed_db}
command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
scripts/deps.sh start >/dev/null
scripts/deps.sh start-pgbouncer >/dev/null
eval "$(scripts/deps.sh env)"
pooled_url=${PROFILE_PGBOUNCER_TRANSACTION_URL:?PgBouncer did not start}
out=.build/bench-pooler
mkdir -p "$out"
swift build -c release --product profile-service >/dev/null
source scripts/bench/side_by_side.sh
bench_start .build/release/profile-service 18093
sleep 1
bench_start .build/release/profile-service 18096 --no-change-feed \
    --database-url "$pooled_url" --database-direct-url "$PROFILE_DATABASE_URL"
bench_start .build/release/profile-service 18097 --no-change-feed
declare -A rps p99
run() { # name port workload
    local name=$1 port=$2 workload=$3
    bench_flush_storm "$port" "$workload"
    rps[$name,$workload]+="$(bench_rps "$bench_result") "
    p99[$name,$workload]+="$(bench_p99_ms "$bench_result") "
    echo "bench-pooler: $workload $name $(bench_rps "$bench_result") req/s," \
        "p99 $(awk '$1 == "99%" {print $2}' <<<"$bench_result"), non-2xx $(awk '/Non-2xx/ {print $5}' <<<"$bench_result")" >&2
}
bench_alternate pooled 18096 direct 18097
echo "| workload | through PgBouncer (transaction) req/s | p99 | direct req/s | p99 | ratio |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for workload in $workloads; do
    pooled=$(bench_median <<<"${rps[pooled,$workload]}"); direct=$(bench_median <<<"${rps[direct,$workload]}")
    echo "| $workload | $pooled | $(bench_median <<<"${p99[pooled,$workload]}") ms | $direct | $(bench_median <<<"${p99[direct,$workload]}") ms |" \
        "$(awk -v a="$pooled" -v b="$direct" 'BEGIN {printf "%.2f×", a / b}') |"
done
