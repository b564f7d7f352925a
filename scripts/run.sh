#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the service in the foreground:
# PostgreSQL and two memcached nodes on loopback, a release build, migrations, a few demo
# profiles (ids 1-3), then `profile-service serve` on 127.0.0.1:${PROFILE_PORT:-8080}.
# Extra arguments go to `serve` (see `profile-service serve --help`). Ctrl-C stops it
# gracefully; `scripts/deps.sh stop` stops the databases.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/deps.sh start
eval "$(scripts/deps.sh env)"
swift build -c release --product profile-service
.build/release/profile-service migrate --migrations-directory migrations
psql -q "$PROFILE_DATABASE_URL" <<'SQL'
INSERT INTO user_profiles (id, username, display_name) VALUES
    (1, 'ada', 'Ada Lovelace'),
    (2, 'grace', 'Grace Hopper'),
    (3, 'alan', 'Alan Turing')
ON CONFLICT (id) DO NOTHING;
SQL
echo "profile-service: try  curl -i localhost:${PROFILE_PORT:-8080}/users/profile/1" >&2
exec .build/release/profile-service serve --port "${PROFILE_PORT:-8080}" "$@"
