#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the service in the foreground:
# PostgreSQL and two memcached nodes on loopback, a release build of profile-service and of
# profilectl (the command-line client), migrations, a few demo profiles (ids 1-3), a development
# JWT secret (created once in the state folder), then
# `profile-service serve --jwt-secret-file …` on 127.0.0.1:${PROFILE_PORT:-8080}.
# Extra arguments go to `serve` (see `profile-service serve --help`). Ctrl-C stops it
# gracefully; `scripts/deps.sh stop` stops the databases.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/deps.sh start
eval "$(scripts/deps.sh env)"
swift build -c release --product profile-service
swift build -c release --product profilectl
.build/release/profile-service migrate --migrations-directory migrations
psql -q "$PROFILE_DATABASE_URL" <<'SQL'
INSERT INTO user_profiles (id, username, display_name) VALUES
    (1, 'ada', 'Ada Lovelace'),
    (2, 'grace', 'Grace Hopper'),
    (3, 'alan', 'Alan Turing')
ON CONFLICT (id) DO NOTHING;
SQL

# Development secret for HS256 tokens: random, made once, readable by you alone.
secret="${PROFILE_STATE_DIR:-.state}/dev-jwt-secret"
if [[ ! -s "$secret" ]]; then
    mkdir -p "$(dirname "$secret")"
    (umask 077 && head -c 48 /dev/urandom | base64 | tr -d '\n' >"$secret")
fi
chmod 600 "$secret"
token="$(.build/release/profile-service token --sub 1 --ttl 3600 --jwt-secret-file "$secret")"
port="${PROFILE_PORT:-8080}"
# The PUT below must carry profile 1's current version, or it answers 409.
version="$(psql -tA "$PROFILE_DATABASE_URL" -c "SELECT version FROM user_profiles WHERE id = 1")"
cat >&2 <<EOF
profile-service: read   curl -i localhost:$port/users/profile/1
profile-service: write  curl -i -X PUT localhost:$port/users/profile/1 -H 'Content-Type: application/json' \\
                          -H 'Authorization: Bearer $token' -d '{"display_name":"Ada King","version":$version}'
profile-service: more tokens: .build/release/profile-service token --sub ID --jwt-secret-file $secret
profile-service: client   .build/release/profilectl get 1 --url http://127.0.0.1:$port
                          .build/release/profilectl put 1 --display-name "Ada King" --url http://127.0.0.1:$port --token '$token'
EOF
scripts/deps.sh check-port "$port" profile-service "PROFILE_PORT=<port> scripts/run.sh (now $port)"
exec .build/release/profile-service serve --port "$port" --jwt-secret-file "$secret" "$@"
