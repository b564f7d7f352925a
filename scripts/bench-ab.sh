#!/usr/bin/env bash
# This checkout against an earlier revision of profile-service, side by side in one run: what a
# change costs on the hot paths, free of the drift between runs on a shared machine.
#
#   scripts/bench-ab.sh REV [ROUNDS (3)] [DURATION (10s)]
#
# Builds REV (a git worktree in .build-ab/src, built in .build-ab/build) and this checkout in
# release mode, starts both with their defaults (--no-access-log aside, to compare the code, not
# the log) on the servers of scripts/deps.sh, plus an unmeasured instance of this checkout that
# consumes the change feed, and runs wrk -t2 -c64 against each in turn, the order changing by
# round: get_hit (every read a hit), get_db (memcached flushed every 2 ms) and put_100 (versions
# reset to 1 first); on request (BENCH_WORKLOADS) also patch (a PATCH without If-Match of a random
# profile's bio) and list (lists of 100 random ids, every entry cached; a list counts as one request). Prints each round and the medians (requests/s, p99, and the CPU time the
# instance spent per request — user and system, from /proc — which a busy or shared machine
# disturbs far less than the rates) with the ratio.
# BENCH_WORKLOADS="get_db put_100" runs only those. Ports: 18091 (checkout), 18092 (REV), 18093 (feed).
# BENCH_SKIP_BUILD=1 uses the existing release binaries (.build/release and .build-ab/build/release;
# the latter must be a build of REV): no swift build.
# BENCH_SERVE_ARGS="--flag value …" is appended to every serve command line (both revisions must
# know the flags).
# BENCH_RTT_MS=1 (0.2 allowed; default 0: direct) puts that round trip between every instance and
# PostgreSQL / memcached (one delay proxy, see scripts/bench/side_by_side.sh); the round trip it
# really adds is measured first and printed above the table.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rev=${1:?usage: scripts/bench-ab.sh REV [ROUNDS] [DURATION]}
rounds=${2:-3}
duration=${3:-10s}
workloads=${BENCH_WORKLOADS:-get_hit get_db put_100}
command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
scripts/deps.sh start >/dev/null
eval "$(scripts/deps.sh env)"
out=.build-ab
mkdir -p "$out"
rev_commit=$(git rev-parse --verify "$rev^{commit}")
if [ "${BENCH_SKIP_BUILD:-0}" = 1 ]; then
    # The commit the binary in $out/build was built from: recorded by the build below (else the worktree's).
    built=$(cat "$out/built-rev" 2>/dev/null || git -C "$out/src" rev-parse HEAD 2>/dev/null || true)
    if [ ! -x "$out/build/release/profile-service" ] || [ "$built" != "$rev_commit" ] || [ ! -x .build/release/profile-service ]; then
        echo "bench-ab: BENCH_SKIP_BUILD=1, but there is no release build of this checkout or of $rev (${rev_commit:0:10}) in $out/build (it holds ${built:0:10}); run once without it" >&2
        exit 1
    fi
    echo "bench-ab: the existing release builds of $(git log --oneline -1 "$rev_commit" | cut -c1-60) and this checkout (BENCH_SKIP_BUILD=1)" >&2
else
    if [ -d "$out/src" ]; then git -C "$out/src" checkout -q --detach "$rev"; else git worktree add -q --detach "$out/src" "$rev"; fi
    echo "bench-ab: building $(git -C "$out/src" log --oneline -1 | cut -c1-60) and this checkout (release)" >&2
    (cd "$out/src" && swift build -c release --product profile-service --scratch-path "$PWD/../build" >/dev/null)
    echo "$rev_commit" >"$out/built-rev"
    swift build -c release --product profile-service >/dev/null
fi
bench_rtt_supported=1 # side_by_side.sh puts every instance behind the delay proxy (BENCH_RTT_MS)
source scripts/bench/side_by_side.sh
bench_start .build/release/profile-service 18093
sleep 1
bench_start .build/release/profile-service 18091
bench_start "$out/build/release/profile-service" 18092
declare -A pid_of=([18091]=${bench_pids[-2]} [18092]=${bench_pids[-1]})
declare -A rps p99 cpu
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # user + system, in clock ticks
run() { # name port workload
    local name=$1 port=$2 workload=$3 script args=() flusher= result
    case $workload in
        get_hit) script=scripts/bench/get_random.lua; args=(10000)
            wrk -t2 -c64 -d2s -s $script "http://127.0.0.1:$port" -- 10000 >/dev/null ;;
        get_db) script=scripts/bench/get_random.lua; args=(10000)
            python3 scripts/bench/memcached_flush.py "${PROFILE_MEMCACHED}" 0.002 3600 2>/dev/null & flusher=$! ;;
        patch) script=scripts/bench/patch.lua; args=(10000) ;;
        list) script=scripts/bench/list_random.lua; args=(10000 100)
            wrk -t2 -c64 -d2s -s $script "http://127.0.0.1:$port" -- 10000 100 >/dev/null ;;
        put_100) script=scripts/bench/mixed.lua; args=(1.0 10000 assume_v1)
            psql -q "$PROFILE_DATABASE_URL" -c "SET session_replication_role = replica" \
                -c "UPDATE user_profiles SET version = 1 WHERE id <= 10000"
            python3 scripts/bench/memcached_flush.py "${PROFILE_MEMCACHED}" >/dev/null ;;
    esac
    local ticks_before requests
    ticks_before=$(cpu_ticks "${pid_of[$port]}")
    result=$(BENCH_TOKEN=$token wrk -t2 -c64 -d"$duration" --latency -s $script "http://127.0.0.1:$port" -- "${args[@]}")
    requests=$(awk '/ requests in / { print $1 }' <<<"$result")
    cpu[$name,$workload]+="$(awk -v t="$(($(cpu_ticks "${pid_of[$port]}") - ticks_before))" -v hz="$(getconf CLK_TCK)" -v n="$requests" \
        'BEGIN { printf "%.1f", t / hz * 1e6 / n }') "
    [ -n "$flusher" ] && kill "$flusher" 2>/dev/null
    rps[$name,$workload]+="$(bench_rps "$result") "
    p99[$name,$workload]+="$(bench_p99_ms "$result") "
    echo "bench-ab: $workload $name $(bench_rps "$result") req/s, p99 $(awk '$1 == "99%" {print $2}' <<<"$result"), CPU $(awk '{ print $NF }' <<<"${cpu[$name,$workload]}") µs/request" >&2
}
bench_alternate new 18091 old 18092
if [ -n "$bench_rtt_note" ]; then echo "$bench_rtt_note"; echo; fi
echo "| workload | this checkout req/s | p99 | CPU/req | $rev req/s | p99 | CPU/req | ratio req/s | ratio CPU/req |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for workload in $workloads; do
    new=$(bench_median <<<"${rps[new,$workload]}"); old=$(bench_median <<<"${rps[old,$workload]}")
    new_cpu=$(bench_median <<<"${cpu[new,$workload]}"); old_cpu=$(bench_median <<<"${cpu[old,$workload]}")
    echo "| $workload | $new | $(bench_median <<<"${p99[new,$workload]}") ms | $new_cpu µs | $old | $(bench_median <<<"${p99[old,$workload]}") ms | $old_cpu µs | $(awk -v a="$new" -v b="$old" 'BEGIN {printf "%.2f×", a / b}') | $(awk -v a="$new_cpu" -v b="$old_cpu" 'BEGIN {printf "%.2f×", a / b}') |"
done
