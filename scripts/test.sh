#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs and starts PostgreSQL and two memcached
# nodes on loopback (scripts/deps.sh), builds, migrates, and runs every test target.
# Tests that need a server fail (never skip) when it is missing.
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
