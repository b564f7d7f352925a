#!/usr/bin/env bash
# openapi.yaml against the real service: schemathesis, a property-based contract tester, with
# every check and every phase (examples, coverage, fuzzing, stateful). 0 failures or exit 1.
#
# Starts `profile-service serve` with JWT authentication on a free loopback port, on a fresh
# database `profiles_contract` in the PostgreSQL of scripts/deps.sh (PROFILE_DATABASE_URL) and a
# memcached node of its own on a free port (so the generated profiles never meet another run's,
# or a development server's, cached ones), gives schemathesis a token that may write any profile
# (sub 1, scope profiles:admin), and stops the service and that node at the end. schemathesis is pinned and lives in a virtual environment of its own
# ($PROFILE_STATE_DIR/venv, made here when missing). Event streams are included: the instance
# ends each after a second, and every event is checked against the documented ProfileEvent.
#
#   scripts/contract-test.sh [schemathesis run options…]   e.g. --max-examples 20, --seed 1
#
# Environment: PROFILE_SERVICE_BIN (default .build/debug/profile-service), PROFILE_STATE_DIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

schemathesis_version=4.32.5
state=${PROFILE_STATE_DIR:-$(pwd)/.state}
venv=$state/venv
bin=${PROFILE_SERVICE_BIN:-.build/debug/profile-service}

if [ "$("$venv/bin/schemathesis" --version 2>/dev/null)" != "schemathesis, version $schemathesis_version" ]; then
    echo "contract-test: installing schemathesis $schemathesis_version into $venv" >&2
    if ! python3 -m venv --clear "$venv" >/dev/null 2>&1; then
        # Debian's python3 keeps venv (ensurepip) in a package of its own.
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
        python3 -m venv --clear "$venv"
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$schemathesis_version"
fi

work=$(mktemp -d)
service_pid= memcached_pid=
stop() {
    local pid
    for pid in $service_pid $memcached_pid; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

[ -n "${PROFILE_DATABASE_URL:-}" ] || eval "$(scripts/deps.sh env)"
database_url="${PROFILE_DATABASE_URL%/*}/profiles_contract"
admin_url="${PROFILE_DATABASE_URL%/*}/postgres"
psql -q "$admin_url" -c "DROP DATABASE IF EXISTS profiles_contract WITH (FORCE)" -c "CREATE DATABASE profiles_contract"
"$bin" migrate --database-url "$database_url" --migrations-directory migrations 2>"$work/migrate.log" ||
    { cat "$work/migrate.log" >&2; exit 1; }
# `migrate` also creates the change feed's replication slot when none exists, and a slot's name
# is one per cluster: one made here would belong to this throwaway database and leave the real
# one's service without its feed. The contract run needs no feed (serve --no-change-feed).
psql -q -tA "$admin_url" -c \
    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = 'profiles_contract'" >/dev/null

memcached_port=$(free_port)
memcached -l 127.0.0.1 -p "$memcached_port" -U 0 -m 16 $([ "$(id -u)" = 0 ] && echo -u memcache) \
    2>"$work/memcached.log" &
memcached_pid=$!

(umask 077 && head -c 48 /dev/urandom | base64 | tr -d '\n' >"$work/jwt-secret")
port=$(free_port)
# Event streams end after a second (--sse-max-lifetime-s 1): the tester reads each answer to its
# end and checks every event of the stream against openapi.yaml's ProfileEvent.
"$bin" serve --port "$port" --workers 4 --no-access-log --no-change-feed --sse-max-lifetime-s 1 \
    --jwt-secret-file "$work/jwt-secret" \
    --database-url "$database_url" --memcached "127.0.0.1:$memcached_port" 2>"$work/service.log" &
service_pid=$!
ready=0
for _ in $(seq 1 150); do  # up to 15 s
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && { ready=1; break; }
    kill -0 "$service_pid" 2>/dev/null || break
    sleep 0.1
done
[ "$ready" = 1 ] || { echo "contract-test: the service did not become ready:" >&2; cat "$work/service.log" >&2; exit 1; }
token=$("$bin" token --sub 1 --scope profiles:admin --ttl 3600 --jwt-secret-file "$work/jwt-secret")

status=0
SCHEMATHESIS_HOOKS=scripts/schemathesis_hooks.py "$venv/bin/schemathesis" --config-file scripts/schemathesis.toml run openapi.yaml \
    --url "http://127.0.0.1:$port" \
    --checks all \
    --phases examples,coverage,fuzzing,stateful \
    --header "Authorization: Bearer $token" \
    --report junit --report-dir "$state/schemathesis" \
    "$@" || status=$?
if [ "$status" -ne 0 ]; then
    echo "contract-test: schemathesis found differences (report: $state/schemathesis); service log:" >&2
    tail -n 20 "$work/service.log" >&2
fi
exit "$status"
