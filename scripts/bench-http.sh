#!/usr/bin/env bash
# Benchmarks the HTTPServer against nginx on loopback with wrk, alternately, and prints requests/s,
# p50, p99 and peak RSS (VmHWM) of each. Both answer GET / with the same fixed 74-byte JSON body.
# Then runs wrk through nginx as a keep-alive reverse proxy in front of the server and reports
# non-2xx answers (must be 0).
#
# Usage: scripts/bench-http.sh [ROUNDS=3] [DURATION=10s]
# Environment: CONNECTIONS (64), THREADS (2), WORKERS (server worker threads, 16),
#              NGINX_WORKERS (auto), SERVER_PORT (18080), NGINX_PORT (18081), PROXY_PORT (18082).
set -euo pipefail
rounds="${1:-3}"
duration="${2:-10s}"
connections="${CONNECTIONS:-64}"
threads="${THREADS:-2}"
workers="${WORKERS:-16}"
nginx_workers="${NGINX_WORKERS:-auto}"
server_port="${SERVER_PORT:-18080}"
nginx_port="${NGINX_PORT:-18081}"
proxy_port="${PROXY_PORT:-18082}"
root="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$root/.build-http"
build="$scratch/release"
work="$(mktemp -d /tmp/bench-http.XXXXXX)"
body='{"id":"00000000-0000-0000-0000-000000000000","name":"bench!!","version":1}'
[ "${#body}" -eq 74 ] || { echo "body must be 74 bytes"; exit 1; }

server_pid=""
nginx_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "== building (release)"
swift build -c release --scratch-path "$scratch" --target HTTPServer >/dev/null
swiftc -O -o "$work/http-echo" "$root/Benchmarks/HTTPEcho/main.swift" -I "$build/Modules" \
    -Xcc -fmodule-map-file="$build/CLinuxShims.build/module.modulemap" \
    -Xcc -I -Xcc "$root/Sources/CLinuxShims/include" \
    "$build"/HTTP1.build/*.o "$build"/HTTPServer.build/*.o "$build"/Logging.build/*.o "$build"/CLinuxShims.build/*.o

echo "== starting servers"
"$work/http-echo" "$server_port" "$workers" >"$work/server.log" 2>&1 &
server_pid=$!

mkdir -p "$work/nginx/logs"
cat >"$work/nginx/nginx.conf" <<NGINX
worker_processes $nginx_workers;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    keepalive_requests 10000000;
    keepalive_timeout 75s;
    upstream swift { server 127.0.0.1:$server_port; keepalive 64; }
    server {
        listen 127.0.0.1:$nginx_port;
        location / { default_type application/json; return 200 '$body'; }
    }
    server {
        listen 127.0.0.1:$proxy_port;
        location / {
            proxy_pass http://swift;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
NGINX
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
nginx_pid=$!

for _ in $(seq 1 100); do
    if curl -s -o /dev/null "http://127.0.0.1:$server_port/" && curl -s -o /dev/null "http://127.0.0.1:$nginx_port/"; then
        break
    fi
    sleep 0.1
done
[ "$(curl -s "http://127.0.0.1:$server_port/")" = "$body" ] || { echo "server answer differs"; cat "$work/server.log"; exit 1; }
[ "$(curl -s "http://127.0.0.1:$nginx_port/")" = "$body" ] || { echo "nginx answer differs"; exit 1; }

# Prints "req/s p50 p99 non2xx" from wrk --latency output.
run_wrk() {
    local out
    out="$(wrk -t"$threads" -c"$connections" -d"$duration" --latency "$1")"
    echo "$out" >>"$work/wrk.log"
    local rps p50 p99 bad
    rps="$(echo "$out" | awk '/^Requests\/sec:/ {print $2}')"
    p50="$(echo "$out" | awk '$1 == "50%" {print $2}')"
    p99="$(echo "$out" | awk '$1 == "99%" {print $2}')"
    bad="$(echo "$out" | awk '/Non-2xx or 3xx responses:/ {print $5}')"
    if echo "$out" | grep -q "Socket errors"; then echo "  $1: $(echo "$out" | grep "Socket errors")" >&2; fi
    echo "$rps $p50 $p99 ${bad:-0}"
}

# Sum of VmHWM (kB) over a process and its children.
hwm_kb() {
    local total=0 pid
    for pid in "$1" $(pgrep -P "$1" || true); do
        total=$((total + $(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

echo "== wrk -t$threads -c$connections -d$duration, $rounds rounds, alternating (server workers: $workers, nginx worker_processes: $nginx_workers)"
printf "%-6s %-8s %12s %10s %10s\n" round target "req/s" p50 p99
swift_sum=0
nginx_sum=0
for round in $(seq 1 "$rounds"); do
    read -r rps p50 p99 _ < <(run_wrk "http://127.0.0.1:$nginx_port/")
    printf "%-6s %-8s %12s %10s %10s\n" "$round" nginx "$rps" "$p50" "$p99"
    nginx_sum="$(echo "$nginx_sum + $rps" | bc)"
    read -r rps p50 p99 _ < <(run_wrk "http://127.0.0.1:$server_port/")
    printf "%-6s %-8s %12s %10s %10s\n" "$round" swift "$rps" "$p50" "$p99"
    swift_sum="$(echo "$swift_sum + $rps" | bc)"
done
swift_mean="$(echo "scale=0; $swift_sum / $rounds" | bc)"
nginx_mean="$(echo "scale=0; $nginx_sum / $rounds" | bc)"
echo "mean req/s: swift $swift_mean, nginx $nginx_mean, ratio swift/nginx $(echo "scale=2; $swift_sum / $nginx_sum" | bc)"
echo "peak RSS (VmHWM): swift $(hwm_kb "$server_pid") kB, nginx (master+workers) $(hwm_kb "$nginx_pid") kB"

echo "== nginx reverse proxy (upstream keep-alive) -> server"
read -r rps p50 p99 bad < <(run_wrk "http://127.0.0.1:$proxy_port/")
echo "proxy req/s $rps p50 $p50 p99 $p99 non-2xx $bad"
[ "$bad" = "0" ] || { echo "FAIL: non-2xx answers through the proxy"; exit 1; }
