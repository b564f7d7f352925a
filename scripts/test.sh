#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs and starts PostgreSQL and two memcached
# nodes on loopback (scripts/deps.sh), builds, migrates, checks the documentation
# (scripts/check-docs.py), and runs every test target.
# Tests that need a server fail (never skip) when it is missing. Then the checks against real
# instances of the binary: README's commands (check-readme.py), TLS and SCRAM
# (check-database-tls.py), PgBouncer (check-pooler.py), the alert rules (check-alerts.sh) and a
# real Prometheus (check-prometheus.py), the deployment files and openapi.yaml (check-deploy.py),
# and the property-based contract tester (contract-test.sh, schemathesis); the run fails if any
# check fails.
#
# At the end — also when a step fails or the run is interrupted — the servers this run started
# are stopped (those already running before it are left alone), and so is any profile-service
# process a test left behind.
#
#   scripts/test.sh                   every test
#   scripts/test.sh --filter NAME     only tests matching NAME (passed to swift test); skips the
#                                     docs and deploy checks and the contract test
#   scripts/test.sh --keep-servers    leave PostgreSQL and memcached running afterwards
#                                     (or PROFILE_KEEP_SERVERS=1)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

keep_servers=${PROFILE_KEEP_SERVERS:-0}
swift_test_arguments=()
for argument in "$@"; do
    case $argument in
        --keep-servers) keep_servers=1 ;;
        *) swift_test_arguments+=("$argument") ;;
    esac
done

# Which servers are down now: those this run starts, and so stops.
down_before=$(scripts/deps.sh status 2>/dev/null | awk '$2 == "down" { print $1 " " NR - 1 }' || true)
# The standby a test starts (StandbyTests) is stopped by that test; this catches a test that died.
standby_up_before=$(scripts/deps.sh status 2>/dev/null | awk '$1 == "standby" && $2 == "up"' || true)
# The PgBouncers of scripts/check-pooler.py: stopped at the end unless they ran before.
pgbouncer_up_before=$(scripts/deps.sh status 2>/dev/null | awk '$1 == "pgbouncer"' || true)

# Every process this run starts inherits this marker, so a service a killed test left behind can
# be found (and only those: never a server started elsewhere from the same binary).
export PROFILE_TEST_RUN="$$-$RANDOM$RANDOM"

stop_leftover_services() {
    local environ pid exe
    for environ in /proc/[0-9]*/environ; do
        pid=${environ#/proc/}; pid=${pid%%/*}
        [ "$pid" = $$ ] && continue
        exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
        [[ $exe == */profile-service ]] || continue
        if tr '\0' '\n' <"$environ" 2>/dev/null | grep -qx "PROFILE_TEST_RUN=$PROFILE_TEST_RUN"; then
            echo "test.sh: stopping profile-service pid $pid left by a test" >&2
            kill "$pid" 2>/dev/null || true
        fi
    done
}

cleanup() {
    local status=$? kind number
    trap - EXIT INT TERM
    stop_leftover_services
    if [ "$keep_servers" = 1 ]; then
        echo "test.sh: servers kept running (scripts/deps.sh status; scripts/deps.sh stop)" >&2
    else
        [ -n "$standby_up_before" ] || scripts/deps.sh stop-standby
        [ -n "$pgbouncer_up_before" ] || scripts/deps.sh stop-pgbouncer
        while read -r kind number; do
            case $kind in
                postgres) scripts/deps.sh stop-postgres ;;
                memcached) scripts/deps.sh stop-memcached "$number" ;;
            esac
        done <<<"$down_before"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

scripts/deps.sh start
eval "$(scripts/deps.sh env)"
# Tools some tests drive as real clients (curl, python3's http.client, nginx).
missing=()
command -v curl >/dev/null || missing+=(curl)
command -v python3 >/dev/null || missing+=(python3)
command -v nginx >/dev/null || missing+=(nginx-light)
if [ ${#missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

swift build --build-tests
.build/debug/profile-service migrate --migrations-directory migrations
if [ ${#swift_test_arguments[@]} -gt 0 ]; then
    swift test --skip-build --no-parallel "${swift_test_arguments[@]}"
    exit 0
fi

# The documentation, against the binary built above and the sources (scripts/check-docs.py):
# links and anchors, the configuration reference against `--help`, the metrics reference, the
# commands the documents show, no project history outside CHANGELOG.md. No server; seconds.
python3 scripts/check-docs.py --binary "$root/.build/debug/profile-service"
# Phase 1, the unit targets: no server, in parallel, seconds. Phase 2, the integration targets
# (*IntegrationTests, EndToEndTests) and HTTPServerTests (loopback sockets and timings that want a
# quiet machine): serial, since some tests stop and restart the shared PostgreSQL and memcached.
# The client's tests run in a process of their own: the server's unit tests block threads of the
# shared Swift concurrency pool (synchronous waits on sockets and threads), which would starve the
# client's tasks for seconds on a 2-core machine — as an app's process never is.
server_unit_targets='HTTP1Tests|ProfileAuthTests|ServiceRuntimeTests|CacheProtocolTests|RouteTests|PostgresClientTests|MemcachedClientTests|ProfileServiceTests'
unit_targets="^($server_unit_targets|ProfileClientTests)\\."
phase_started=$SECONDS
swift test --skip-build --parallel --filter "^($server_unit_targets)\\."
swift test --skip-build --parallel --filter '^ProfileClientTests\.'
echo "test.sh: unit phase $((SECONDS - phase_started)) s" >&2
phase_started=$SECONDS
swift test --skip-build --no-parallel --skip "$unit_targets"
echo "test.sh: integration phase $((SECONDS - phase_started)) s" >&2

# README's read, token, PUT and floored read, as a newcomer pastes them, against a real instance.
python3 scripts/check-readme.py --binary "$root/.build/debug/profile-service"

# PostgreSQL as production runs it: a PostgreSQL of the script's own that takes only TLS and a
# SCRAM password (right CA, wrong CA, wrong password, server down), then PgBouncer 1.18 in
# transaction and in session mode in front of the one of scripts/deps.sh.
python3 scripts/check-database-tls.py --binary "$root/.build/debug/profile-service"
python3 scripts/check-pooler.py --binary "$root/.build/debug/profile-service"

# The Python packages of the checks below (PyYAML: the rules and the deployment files).
python3 -c 'import yaml, jsonschema, openapi_spec_validator' 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check PyYAML jsonschema openapi-spec-validator
# The alert and recording rules: promtool check and unit tests, every runbook_url's anchor. Then a
# real Prometheus scraping a real instance: three alerts pending → firing → resolved, every
# dashboard query evaluated, promtool check metrics on the live /metrics.
scripts/check-alerts.sh
python3 scripts/check-prometheus.py --binary "$root/.build/debug/profile-service"

# Deployment files and openapi.yaml: static checks, nginx -t, the nginx gateway for real in front
# of two instances of the binary built above, and the service's answers against openapi.yaml.
export PROFILE_SERVICE_BIN=${PROFILE_SERVICE_BIN:-$root/.build/debug/profile-service}
python3 scripts/check-deploy.py

# openapi.yaml against a real instance: every schemathesis check and phase, 0 failures.
scripts/contract-test.sh
