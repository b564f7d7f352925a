#!/usr/bin/env bash
# Benchmarks PostgresClient on ONE connection against raw libpq (a C program), with the same
# prepared point select and single-row update, and prints ops/s, p50 and p99 for each.
#
#   PROFILE_PG_PORT=55433 PROFILE_STATE_DIR=$PWD/.state scripts/bench-clients-pg.sh [selects] [updates] [rounds]
#
# Needs the PostgreSQL of scripts/deps.sh (PROFILE_DATABASE_URL or PROFILE_PG_PORT). Builds into
# $BENCH_DIR (default .build-bench): swift-log in release mode with SwiftPM, then the
# PostgresClient sources plus Benchmarks/PostgresClientBench/main.swift with swiftc -O, and
# raw.c with gcc -O2. Runs C and Swift alternately, `rounds` times each.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
selects=${1:-20000}
updates=${2:-5000}
rounds=${3:-2}
port=${PROFILE_PG_PORT:-55432}
url=${PROFILE_DATABASE_URL:-postgres://postgres@127.0.0.1:$port/profiles}
out=${BENCH_DIR:-$here/.build-bench}
mkdir -p "$out"

psql -q "$url" <<'SQL'
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_profiles;
CREATE TABLE bench_profiles (
    id BIGINT PRIMARY KEY, username TEXT NOT NULL UNIQUE, display_name TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 1);
INSERT INTO bench_profiles (id, username, display_name)
    SELECT i, 'user' || i, 'User ' || i FROM generate_series(1, 1000) AS i;
VACUUM ANALYZE bench_profiles;
SQL

gcc -O2 -o "$out/raw-pg" "$here/Benchmarks/PostgresClientBench/raw.c" \
    $(pkg-config --cflags libpq) $(pkg-config --libs libpq)

(cd "$here" && swift build -c release --scratch-path "$out/spm" --target Logging >/dev/null)
release=$(cd "$here" && swift build -c release --scratch-path "$out/spm" --show-bin-path)
swiftc -O -swift-version 6 -module-name PostgresClientBench \
    -enable-upcoming-feature ExistentialAny -enable-upcoming-feature MemberImportVisibility \
    -enable-upcoming-feature InternalImportsByDefault \
    -I "$here/Sources/CLibPQ" $(pkg-config --cflags-only-I libpq | sed 's/-I/-Xcc -I/g') \
    -I "$release/Modules" "$release"/Logging.build/*.o \
    "$here"/Sources/PostgresClient/*.swift "$here/Benchmarks/PostgresClientBench/main.swift" \
    -lpq -o "$out/swift-pg"

conninfo=$(psql -tA "$url" -c "SELECT 'host=127.0.0.1 port=' || current_setting('port') || ' dbname=' || current_database() || ' user=' || current_user")
for round in $(seq 1 "$rounds"); do
    echo "-- round $round ($selects selects, $updates updates, one connection)"
    "$out/raw-pg" "$conninfo" "$selects" "$updates" 2>/dev/null
    "$out/swift-pg" "$url" "$selects" "$updates" 2>/dev/null
done
psql -q "$url" -c "DROP TABLE bench_profiles"
