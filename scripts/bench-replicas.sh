#!/usr/bin/env bash
# Read replicas side by side in one run (docs/design.md §8): one instance reading misses from the
# standby of `scripts/deps.sh start-standby`, one without, under the same memcached flush storm.
#
#   scripts/bench-replicas.sh [ROUNDS (3)] [DURATION (10s)]
#
# Release build, defaults but --no-access-log, on the servers of scripts/deps.sh plus an unmeasured
# instance that consumes the change feed. Workloads (wrk -t2 -c64, order alternating by round):
# get_db (GETs of 10,000 ids, memcached flushed every 2 ms) and mixed_db (the same with 10 % PUTs).
# For each it prints requests/s, p99 and, from the instance's /metrics, the rows read for misses by
# the primary and by the standby, and the primary's WAL positions the proofs took
# (primary_position): "primary share" is primary rows / all rows read for misses. It also reads the
# CPU time the primary's processes (the postmaster of scripts/deps.sh and its children) spent in
# each run: "primary CPU per 1,000 requests" is what the standby takes off the primary.
# BENCH_WORKLOADS="get_db" runs only those; PROFILE_PG_STANDBY_DELAY_MS makes the standby late.
# Ports: 18094 (with the standby), 18095 (without), 18093 (feed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
duration=${2:-10s}
workloads=${BENCH_WORKLOADS:-get_db mixed_db}
command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
scripts/deps.sh start >/dev/null
scripts/deps.sh start-standby >/dev/null
eval "$(scripts/deps.sh env)"
standby_url=${PROFILE_REPLICA_DATABASE_URLS:?the standby did not start}
unset PROFILE_REPLICA_DATABASE_URLS  # only the instance given --replica-database-url reads it
out=.build/bench-replicas
mkdir -p "$out"
swift build -c release --product profile-service >/dev/null
source scripts/bench/side_by_side.sh
bench_start .build/release/profile-service 18093
sleep 1
bench_start .build/release/profile-service 18094 --no-change-feed --replica-database-url "$standby_url"
bench_start .build/release/profile-service 18095 --no-change-feed
for _ in $(seq 1 50); do curl -fs 127.0.0.1:18094/readyz | grep -q '"state":"up"' && break; sleep 0.1; done
primary_postmaster=$(head -1 "${PROFILE_STATE_DIR:-.state}/postgres/data/postmaster.pid")
primary_cpu_ms() { # CPU time of the primary's postmaster and its children, in ms
    local pid total=0 ticks
    for pid in $primary_postmaster $(ps -o pid= --ppid "$primary_postmaster"); do
        ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
        total=$((total + ticks))
    done
    echo $((total * 1000 / $(getconf CLK_TCK)))
}
counter() { # port event
    curl -fs "127.0.0.1:$1/metrics" | awk -v e="$2" '$1 == "profile_service_cache_events_total{event=\"" e "\"}" {print $2 + 0}'
}
declare -A rps p99 primary standby positions cpu requests
run() { # name port workload
    local name=$1 port=$2 workload=$3 result before_db before_sb before_pos
    before_db=$(counter "$port" database_read); before_sb=$(counter "$port" standby_read)
    before_pos=$(counter "$port" primary_position)
    local before_cpu=$(primary_cpu_ms)
    bench_flush_storm "$port" "$workload"
    result=$bench_result
    local used=$(($(primary_cpu_ms) - before_cpu)) count=$(awk '/requests in/ {print $1}' <<<"$result")
    cpu[$name,$workload]=$((${cpu[$name,$workload]:-0} + used))
    requests[$name,$workload]=$((${requests[$name,$workload]:-0} + count))
    local db=$(($(counter "$port" database_read) - before_db)) sb=$(($(counter "$port" standby_read) - before_sb))
    local pos=$(($(counter "$port" primary_position) - before_pos))
    rps[$name,$workload]+="$(bench_rps "$result") "
    p99[$name,$workload]+="$(bench_p99_ms "$result") "
    primary[$name,$workload]=$((${primary[$name,$workload]:-0} + db))
    standby[$name,$workload]=$((${standby[$name,$workload]:-0} + sb))
    positions[$name,$workload]=$((${positions[$name,$workload]:-0} + pos))
    echo "bench-replicas: $workload $name $(bench_rps "$result") req/s," \
        "p99 $(awk '$1 == "99%" {print $2}' <<<"$result"), miss rows: primary $db standby $sb, positions $pos," \
        "primary CPU $used ms," \
        "non-2xx $(awk '/Non-2xx/ {print $5}' <<<"$result")" >&2
}
bench_alternate standby 18094 primary 18095
share() { awk -v p="$1" -v s="$2" 'BEGIN {if (p + s == 0) print "—"; else printf "%.1f %%", 100 * p / (p + s)}'; }
per_thousand() { awk -v c="$1" -v r="$2" 'BEGIN {if (r == 0) print "—"; else printf "%.0f ms", 1000 * c / r}'; }
echo "| workload | with standby req/s | p99 | primary share of miss rows | positions per 100 miss rows | primary CPU per 1,000 requests | without req/s | p99 | primary CPU per 1,000 requests | ratio |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for workload in $workloads; do
    with=$(bench_median <<<"${rps[standby,$workload]}"); without=$(bench_median <<<"${rps[primary,$workload]}")
    rows=$((${primary[standby,$workload]} + ${standby[standby,$workload]}))
    echo "| $workload | $with | $(bench_median <<<"${p99[standby,$workload]}") ms | $(share "${primary[standby,$workload]}" "${standby[standby,$workload]}") |" \
        "$(awk -v p="${positions[standby,$workload]}" -v r="$rows" 'BEGIN {if (r == 0) print "—"; else printf "%.1f", 100 * p / r}') |" \
        "$(per_thousand "${cpu[standby,$workload]}" "${requests[standby,$workload]}") |" \
        "$without | $(bench_median <<<"${p99[primary,$workload]}") ms | $(per_thousand "${cpu[primary,$workload]}" "${requests[primary,$workload]}") |" \
        "$(awk -v a="$with" -v b="$without" 'BEGIN {printf "%.2f×", a / b}') |"
done
