# Sourced by the side-by-side benchmarks (bench-ab.sh, bench-replicas.sh) once this checkout's
# release build is there and $out is set: migrates and seeds the database of scripts/deps.sh, makes
# a JWT secret in $out and an admin $token, and starts services with `bench_start BINARY PORT
# [args…]` (defaults but --no-access-log, log in $out, ready or exit), each killed on exit.
.build/release/profile-service migrate --migrations-directory migrations >/dev/null 2>&1
psql -q "$PROFILE_DATABASE_URL" -f scripts/bench/seed_profiles.sql
secret=$out/jwt-secret
[ -f "$secret" ] || head -c 32 /dev/urandom | base64 >"$secret"
token=$(.build/release/profile-service token --sub 1 --scope profiles:admin --ttl 7200 --jwt-secret-file "$secret")
bench_pids=()
bench_cleanup() { for pid in "${bench_pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap bench_cleanup EXIT
bench_start() { # binary port [args…]
    local binary=$1 port=$2; shift 2
    "$binary" serve --port "$port" --jwt-secret-file "$secret" --no-access-log "$@" >>"$out/service-$port.log" 2>&1 &
    bench_pids+=($!)
    for _ in $(seq 1 100); do curl -fs "127.0.0.1:$port/readyz" >/dev/null && return; sleep 0.1; done
    echo "$(basename "$0"): the service on $port did not become ready" >&2
    exit 1
}
