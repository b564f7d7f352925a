#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs and starts PostgreSQL and two memcached
# nodes on loopback (scripts/deps.sh), builds, migrates, and runs every test target.
# Tests that need a server fail (never skip) when it is missing. Last, scripts/check-deploy.py
# checks the deployment files and openapi.yaml (see there); the run fails if any check fails.
#
#   scripts/test.sh                 every test
#   scripts/test.sh --filter NAME   only tests matching NAME (passed to swift test)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

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
# Serial: some tests stop and restart the shared PostgreSQL and memcached servers.
swift test --skip-build --no-parallel "$@"

# Deployment files and openapi.yaml: static checks, nginx -t, the nginx gateway for real in front
# of two instances of the binary built above, and the service's answers against openapi.yaml.
python3 -c 'import yaml, jsonschema, openapi_spec_validator' 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check PyYAML jsonschema openapi-spec-validator
PROFILE_SERVICE_BIN=${PROFILE_SERVICE_BIN:-.build/debug/profile-service} python3 scripts/check-deploy.py
