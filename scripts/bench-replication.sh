#!/usr/bin/env bash
# Prints how fast committed changes come out of PostgresClient's LogicalReplicationStream:
# COMMIT-to-arrival latency for paced single-row commits, rows/s and commits/s for a burst, and
# the pgoutput decoder's messages/s. Makes (and drops) a table, publication and slot "bench_feed".
#
#   PROFILE_PG_PORT=55433 PROFILE_STATE_DIR=$PWD/.state scripts/bench-replication.sh [paced commits] [burst commits] [rows per burst commit]
#
# Needs the PostgreSQL of scripts/deps.sh (wal_level=logical). Builds into $BENCH_DIR (default
# .build-bench): swift-log in release mode with SwiftPM, then the PostgresClient sources plus
# Benchmarks/ReplicationBench/main.swift with swiftc -O.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
paced=${1:-2000}
burst=${2:-2000}
rows=${3:-10}
port=${PROFILE_PG_PORT:-55432}
url=${PROFILE_DATABASE_URL:-postgres://postgres@127.0.0.1:$port/profiles}
out=${BENCH_DIR:-$here/.build-bench}
mkdir -p "$out"

(cd "$here" && swift build -c release --scratch-path "$out/spm" --target Logging >/dev/null)
release=$(cd "$here" && swift build -c release --scratch-path "$out/spm" --show-bin-path)
swiftc -O -swift-version 6 -module-name ReplicationBench \
    -enable-upcoming-feature ExistentialAny -enable-upcoming-feature MemberImportVisibility \
    -enable-upcoming-feature InternalImportsByDefault \
    -I "$here/Sources/CLibPQ" $(pkg-config --cflags-only-I libpq | sed 's/-I/-Xcc -I/g') \
    -I "$release/Modules" "$release"/Logging.build/*.o \
    "$here"/Sources/PostgresClient/*.swift "$here"/Sources/PostgresClient/LogicalReplication/*.swift \
    "$here/Benchmarks/ReplicationBench/main.swift" -lpq -o "$out/replication-bench"

"$out/replication-bench" "$url" "$paced" "$burst" "$rows"
