#!/usr/bin/env bash
# Prints memcached get/set figures on one connection to one node: MemcachedConnection against
# the same libmemcached C calls made directly (ops/s, p50/p99 per operation, wrapper overhead).
#
#   scripts/bench-clients-mc.sh [operations per round] [value bytes] [rounds]
#
# Uses the first node of PROFILE_MC_PORTS (default 21211) on 127.0.0.1; start it with
# scripts/deps.sh start. Scratch path: PROFILE_SCRATCH (default .build-mc).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
scratch=${PROFILE_SCRATCH:-$here/.build-mc}
port=$(echo "${PROFILE_MC_PORTS:-21211,21212}" | cut -d, -f1)
operations=${1:-20000}
value_bytes=${2:-256}
rounds=${3:-10}

if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "memcached is not listening on 127.0.0.1:$port; run scripts/deps.sh start" >&2
    exit 1
fi

swift build -c release --scratch-path "$scratch" --product MemcachedBenchmark >&2
"$scratch/release/MemcachedBenchmark" "127.0.0.1:$port" "$operations" "$value_bytes" "$rounds"
