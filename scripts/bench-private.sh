#!/usr/bin/env bash
# Hits of a profile with a field only its owner reads: the public view, the public view with a
# token that is not the owner's, and the owner's view, side by side, on one built binary, on loopback:
#
#   eval "$(scripts/deps.sh env)"; PROFILE_SERVICE_BIN=.build/release/profile-service scripts/bench-private.sh [ROUNDS (1)] [DURATION (10s)]
#
# Makes a database of its own (profiles_bench_private, on the PostgreSQL of scripts/deps.sh), migrates
# it, declares `email` owner-only with the operator's migration (docs/api.md), seeds 1,000 profiles
# (ids 8200000001…8200001000, each about 430 bytes of public JSON like scripts/bench/seed_profiles.sql,
# and an email), starts one instance (`serve --no-access-log --jwt-secret-file F`, no standby), reads
# every id twice (the cache warm), then, ROUNDS times, the order rotating by round:
#   public    wrk -t2 -c64 -d$DURATION --latency: GET /users/profile/{random seeded id}, no token
#   stranger  the same with the token of a user who owns none of them (verified, public view)
#   owner     the same with the token of the id read (the owner's view: every field)
# and prints requests/s, p50 and p99 of each, the CPU time the instance spent per request (from /proc:
# wrk shares the machine), the answers other than 200 (must be 0), and the ratios.
# Environment: PROFILE_SERVICE_BIN (default .build/release/profile-service), CONNECTIONS (64),
# THREADS (2), BENCH_PRIVATE_PORT (a free one). The service's log: $PROFILE_STATE_DIR/bench-private-<port>.log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-1}
duration=${2:-10s}
bin=${PROFILE_SERVICE_BIN:-.build/release/profile-service}
connections=${CONNECTIONS:-64}
threads=${THREADS:-2}
: "${PROFILE_DATABASE_URL:?run eval \"\$(scripts/deps.sh env)\" first}"
[ -x "$bin" ] || { echo "bench-private: no binary at $bin (PROFILE_SERVICE_BIN)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "bench-private: wrk is not installed" >&2; exit 2; }
port=${BENCH_PRIVATE_PORT:-$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import service_helpers; print(service_helpers.free_port())')}
work=$(mktemp -d /tmp/bench-private.XXXXXX)
database=profiles_bench_private
admin_url=${PROFILE_DATABASE_URL%/*}/postgres
url=${PROFILE_DATABASE_URL%/*}/$database
first_id=8200000001
count=1000
pid=""
drop_database() {
    psql -X -q "$admin_url" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '$database' AND NOT active" >/dev/null 2>&1 || true
    psql -X -q "$admin_url" -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null
}
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    sleep 0.5
    drop_database
    rm -rf "$work"
}
trap cleanup EXIT

drop_database
psql -X -q "$admin_url" -c "CREATE DATABASE $database" >/dev/null
"$bin" migrate --database-url "$url" --migrations-directory migrations >"$work/migrate.log" 2>&1 ||
    { cat "$work/migrate.log" >&2; exit 1; }
psql -X -q -v ON_ERROR_STOP=1 "$url" <<SQL
ALTER TABLE user_profiles ADD COLUMN email text;
INSERT INTO profile_fields (name, kind, max_length, position, read_by) VALUES ('email', 'email', 254, 5, 'owner');
INSERT INTO user_profiles (id, username, display_name, bio, avatar_url, location, email)
SELECT $first_id - 1 + i, 'Pb_User' || i, 'Private bench ' || i,
    left('User ' || i || ' writes about distributed systems, caches and coffee; reads Borges and Le Guin; '
         || 'runs slow marathons by the sea and answers every message, eventually. ' || repeat('More. ', 20), 160),
    'https://cdn.example.com/avatars/' || i || '/' || md5(i::text) || '.jpg', 'Lisbon, Portugal',
    'user' || i || '@mail.example.com'
FROM generate_series(1, $count) AS i;
SQL

secret=$work/jwt-secret
head -c 48 /dev/urandom | base64 | tr -d '\n' >"$secret"
# The tokens, minted here (HS256, as `profile-service token` mints them): one per seeded id, and a stranger's.
python3 - "$secret" "$first_id" "$count" >"$work/tokens.lua" <<'PY'
import base64, hashlib, hmac, json, sys, time
secret, first, count = open(sys.argv[1], "rb").read(), int(sys.argv[2]), int(sys.argv[3])
b64 = lambda data: base64.urlsafe_b64encode(data).rstrip(b"=")
def token(sub):
    now = int(time.time())
    head = b64(b'{"alg":"HS256","typ":"JWT"}') + b"." + b64(json.dumps({"sub": sub, "iat": now, "nbf": now, "exp": now + 7200}).encode())
    return (head + b"." + b64(hmac.new(secret, head, hashlib.sha256).digest())).decode()
print("tokens = {")
for i in range(1, count + 1):
    print(f'  "{token(str(first - 1 + i))}",')
print("}")
print(f'stranger = "{token("1")}"')
PY

service_log=${PROFILE_STATE_DIR:-.state}/bench-private-$port.log
mkdir -p "$(dirname "$service_log")"
env -u PROFILE_REPLICA_DATABASE_URLS "$bin" serve --port "$port" --no-access-log --database-url "$url" --jwt-secret-file "$secret" >"$service_log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do curl -fs "127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "127.0.0.1:$port/readyz" >/dev/null || { echo "bench-private: the service did not become ready" >&2; tail "$service_log" >&2; exit 1; }

cat "$work/tokens.lua" - >"$work/read.lua" <<'LUA'
-- GET a random seeded profile: with no token, a stranger's, or its owner's. args: mode first_id count
local mode, first_id, count = "public", 1, 1000
function init(args)
  mode, first_id, count = args[1], tonumber(args[2]), tonumber(args[3])
  math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)"), 16) or 0))
end
function request()
  local i = math.random(1, count)
  local headers = {}
  if mode == "owner" then headers["Authorization"] = "Bearer " .. tokens[i] end
  if mode == "stranger" then headers["Authorization"] = "Bearer " .. stranger end
  return wrk.format("GET", "/users/profile/" .. string.format("%d", first_id - 1 + i), headers)
end
LUA

python3 - "$port" "$first_id" "$count" <<'PY'
import http.client, json, sys
port, first, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
bad = 0
for _ in range(2):
    for i in range(1, count + 1):
        c.request("GET", f"/users/profile/{first - 1 + i}"); r = c.getresponse(); body = json.loads(r.read())
        if r.status != 200 or body["id"] != first - 1 + i or "email" in body:
            bad += 1
print(f"warmed: {count} ids read twice; {bad} answers not 200 of the right id without the email")
if bad:
    sys.exit(1)
PY

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; } # the instance's user + system time, in clock ticks
run_wrk() { # mode round
    local out=$work/wrk-$1-$2.txt before
    before=$(cpu_ticks)
    wrk -t"$threads" -c"$connections" -d"$duration" --latency -s "$work/read.lua" "http://127.0.0.1:$port" -- "$1" "$first_id" "$count" >"$out"
    # CPU µs per request: what the instance spent, free of wrk's share of the machine.
    awk -v ticks=$(( $(cpu_ticks) - before )) -v hz="$(getconf CLK_TCK)" '/requests in/ { printf "cpu_us_per_request: %.1f\n", ticks / hz * 1e6 / $1 }' "$out" >>"$out"
    echo "round $2 $1: $(awk '/^Requests\/sec:/ { print $2 }' "$out") req/s"
}
modes=(public stranger owner)
for round in $(seq 1 "$rounds"); do
    for k in 0 1 2; do run_wrk "${modes[$(( (k + round - 1) % 3 ))]}" "$round"; done
done
# A last check of the views the load was served: the owner's carries the email, the others' do not.
owner_token=$(sed -n '2s/^  "\(.*\)",$/\1/p' "$work/tokens.lua")
owner_view=$(curl -fs -H "Authorization: Bearer $owner_token" "127.0.0.1:$port/users/profile/$first_id")
public_view=$(curl -fs "127.0.0.1:$port/users/profile/$first_id")
[[ $owner_view == *'"email":"user1@mail.example.com"'* ]] || { echo "bench-private: the owner's view lacks the email: $owner_view" >&2; exit 1; }
[[ $public_view != *'"email"'* ]] || { echo "bench-private: the public view carries the email: $public_view" >&2; exit 1; }

python3 scripts/bench/wrk_table.py "warm cache, an owner-only email declared, wrk -t$threads -c$connections -d$duration" "$work" public stranger owner
