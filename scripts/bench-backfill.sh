#!/usr/bin/env bash
# A backfill against a live instance (docs/design.md §3.9): ROWS profiles (1,000,000), CACHED of
# them (20,000) read into memcached, a paced GET load on those, then one UPDATE of every row at a
# psql prompt. Prints the instance's RSS before and at its peak, when every sampled cached profile
# shows the new content after COMMIT, whether /readyz's lag_bytes stayed above 0 until then, the
# consistency observer's violations, and the GET load's latency and errors
# (scripts/bench/backfill.py).
#
#   scripts/bench-backfill.sh [ROWS] [CACHED]
#
# Release build at its defaults (--no-access-log aside) on the servers of scripts/deps.sh, port
# 18098; the rows get ids from 3,000,000,001 and are deleted again at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rows=${1:-1000000}
cached=${2:-20000}
first=3000000001
last=$((first + rows - 1))
command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
scripts/deps.sh start >/dev/null
eval "$(scripts/deps.sh env)"
swift build -c release --product profile-service >/dev/null
out=.build/bench-backfill
mkdir -p "$out"
.build/release/profile-service migrate --migrations-directory migrations >/dev/null 2>&1
psql -X -q "$PROFILE_DATABASE_URL" -c "DELETE FROM user_profiles WHERE id BETWEEN $first AND $last"
echo "bench-backfill: inserting $rows profiles" >&2
psql -X -q "$PROFILE_DATABASE_URL" -c "INSERT INTO user_profiles (id, username, display_name) \
    SELECT i, 'backfill' || i, 'Profile ' || i FROM generate_series($first, $last) AS i"
.build/release/profile-service serve --port 18098 --auth none --no-access-log >"$out/service.log" 2>&1 &
service=$!
# The rows go again while the instance still consumes the feed, so that no backlog of their
# deletions is left in the slot for the next consumer (a test run, say).
cleanup() {
    psql -X -q "$PROFILE_DATABASE_URL" -c "DELETE FROM user_profiles WHERE id BETWEEN $first AND $last" || true
    sleep 2  # /readyz refreshes the lag every second: a figure from before the COMMIT may still show
    for _ in $(seq 1 240); do
        curl -fs 127.0.0.1:18098/readyz | grep -q '"lag_bytes":0,' && break
        sleep 0.5
    done
    kill $service 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 1 100); do curl -fs 127.0.0.1:18098/readyz >/dev/null && break; sleep 0.1; done
# The insert reaches the feed first: wait until it has caught up.
for _ in $(seq 1 600); do
    curl -fs 127.0.0.1:18098/readyz | grep -q '"state":"active","lag_bytes":0,' && break
    sleep 0.5
done
python3 scripts/bench/backfill.py --port 18098 --pid "$service" --first "$first" --rows "$rows" --cached "$cached"
