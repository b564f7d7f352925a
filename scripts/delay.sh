#!/usr/bin/env bash
# A network round trip between profile-service (or the test suite, or go-seed) and the servers of
# scripts/deps.sh, on loopback: one delay proxy (scripts/bench/delay_proxy.c) in front of
# PostgreSQL and each memcached node, which delivers every chunk, in each direction, RTT/2 after
# reading it. The kernel has no netem; the proxy times deliveries with a timerfd (nanoseconds).
#
#   scripts/delay.sh start RTT_MS [HOST:PORT...]   build the proxy, (re)start it with RTT_MS added
#                             to every request/answer round trip (0.2 allowed; 0 = the proxy's own
#                             hop only); extra HOST:PORT upstreams get a route too (listen port =
#                             their port + the offset)
#   scripts/delay.sh stop     stop it, by pid (idempotent)
#   scripts/delay.sh env      the `export PROFILE_DATABASE_URL=… PROFILE_MEMCACHED=…` lines that
#                             go through it (and PROFILE_REPLICA_DATABASE_URLS when deps.sh's
#                             standby ran at start), in the format of `scripts/deps.sh env`:
#                               eval "$(scripts/deps.sh env)"; eval "$(scripts/delay.sh env)"
#   scripts/delay.sh status   the routes, the configured and the measured round trip (exit 1: down)
#   scripts/delay.sh measure  only the measurement (scripts/bench/measure_rtt.py; last line JSON)
#   scripts/delay.sh build    build .build-bench/delay-proxy if missing or older than its source
#                             (installs gcc if there is no cc); prints its path
#
# The proxy listens on 127.0.0.1 at each server's port + PROFILE_DELAY_PORT_OFFSET (1000: PostgreSQL
# 56432, memcached 22211 and 22212 with deps.sh's defaults). It reads the servers' addresses from
# `scripts/deps.sh env` at start (so deps.sh's PROFILE_PG_PORT / PROFILE_MC_PORTS apply). State
# (pid, routes, log) is kept in PROFILE_DELAY_DIR (default $PROFILE_STATE_DIR/delay, i.e.
# .state/delay); a second proxy (the benchmarks') uses a directory and an offset of its own.
# A stopped (SIGSTOP) server looks like silence through the proxy; a refused connect resets the
# client. Connection set-up itself is not delayed (the client's connect completes at once), only
# the bytes: PostgreSQL's start-up messages pay it, a memcached connect does not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${PROFILE_STATE_DIR:-$here/.state}
dir=${PROFILE_DELAY_DIR:-$state/delay}
offset=${PROFILE_DELAY_PORT_OFFSET:-1000}
bin=$here/.build-bench/delay-proxy
src=$here/scripts/bench/delay_proxy.c

log() { printf 'delay: %s\n' "$*" >&2; }

build() {
    if [ -x "$bin" ] && [ "$bin" -nt "$src" ]; then return 0; fi
    if ! command -v cc >/dev/null; then
        log "installing gcc"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null
    fi
    mkdir -p "$(dirname "$bin")"
    cc -std=gnu11 -O2 -Wall -Wextra -o "$bin.tmp" "$src"
    mv "$bin.tmp" "$bin"
}

running() { [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; }

# Whether something listens on 127.0.0.1:$1 (from /proc: connecting would open a connection
# through the proxy to the server).
listening() {
    awk -v a="$(printf '0100007F:%04X' "$1")" 'NR > 1 && $2 == a && $4 == "0A" { found = 1 } END { exit !found }' /proc/net/tcp
}

# RTT in ms → the proxy's delay each way in µs, to the nanosecond ("0.2" → "100", "0.001" → "0.5")
one_way_us() { awk -v r="$1" 'BEGIN { s = sprintf("%.3f", r * 500); sub(/\.?0+$/, "", s); print s }'; }

# "host:port" → "127.0.0.1:port+offset"
via() { echo "127.0.0.1:$((${1##*:} + offset))"; }
# A postgres:// URL with its host:port replaced by the proxy's route
via_url() {
    [[ $1 =~ ^([a-z]+://[^@/]*@)?([^:/@]+):([0-9]+)(/.*)?$ ]] || { log "cannot parse $1"; return 1; }
    echo "${BASH_REMATCH[1]}127.0.0.1:$((BASH_REMATCH[3] + offset))${BASH_REMATCH[4]}"
}
url_address() { [[ $1 =~ ^([a-z]+://[^@/]*@)?([^:/@]+):([0-9]+) ]] && echo "${BASH_REMATCH[2]}:${BASH_REMATCH[3]}"; }

stop() {
    if running; then
        local pid
        pid=$(cat "$dir/pid")
        kill "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        log "stopped the delay proxy (pid $pid)"
    fi
    rm -f "$dir/pid"
}

start() {
    local rtt=$1 us upstreams=() routes=() address proxied mc=() replica="" port
    shift
    [[ $rtt =~ ^[0-9]+(\.[0-9]+)?$ ]] || { log "RTT_MS must be a number of milliseconds (e.g. 1 or 0.2), not '$rtt'"; return 2; }
    build
    stop
    # The servers' addresses, from deps.sh (a subshell: this script's own variables stay unset).
    local deps
    deps=$("$here/scripts/deps.sh" env)
    local database_url memcached replicas
    database_url=$(eval "$deps"; echo "$PROFILE_DATABASE_URL")
    memcached=$(eval "$deps"; echo "$PROFILE_MEMCACHED")
    replicas=$(eval "$deps"; echo "${PROFILE_REPLICA_DATABASE_URLS:-}")
    upstreams+=("$(url_address "$database_url")")
    IFS=, read -ra mc <<<"$memcached"
    upstreams+=("${mc[@]}")
    if [ -n "$replicas" ]; then upstreams+=("$(url_address "$replicas")"); fi
    upstreams+=("$@")
    mkdir -p "$dir"
    : >"$dir/routes"
    for address in "${upstreams[@]}"; do
        proxied=$(via "$address")
        port=${proxied##*:}
        "$here/scripts/deps.sh" check-port "$port" "the delay proxy's route to $address" \
            "PROFILE_DELAY_PORT_OFFSET=<n> (now $offset)"
        routes+=(--route "$port:$address")
        echo "$proxied $address" >>"$dir/routes"
    done
    us=$(one_way_us "$rtt")
    {
        echo "export PROFILE_DATABASE_URL='$(via_url "$database_url")'"
        echo "export PROFILE_MEMCACHED='$(for address in "${mc[@]}"; do via "$address"; done | paste -sd, -)'"
        if [ -n "$replicas" ]; then echo "export PROFILE_REPLICA_DATABASE_URLS='$(via_url "$replicas")'"; fi
        # The nodes' own ports, in the same order: tests that freeze or stop a node find its pid by them.
        echo "export PROFILE_MC_PORTS='$(for address in "${mc[@]}"; do echo "${address##*:}"; done | paste -sd, -)'"
    } >"$dir/env"
    # What `measure` compares: the first memcached node and PostgreSQL, direct and proxied.
    printf '%s\n' "--memcached" "${mc[0]}" "$(via "${mc[0]}")" "--postgres" "$database_url" \
        "$(via_url "$database_url")" >"$dir/measure-args"
    echo "$rtt" >"$dir/rtt_ms"
    # Its own log; stdin/stdout away from the caller, so that `$(scripts/delay.sh start 1)` returns.
    "$bin" --delay-us "$us" "${routes[@]}" </dev/null >>"$dir/proxy.log" 2>&1 &
    echo $! >"$dir/pid"
    for port in "${routes[@]}"; do
        [ "$port" = --route ] && continue
        port=${port%%:*}
        for _ in $(seq 1 100); do
            running || { log "the delay proxy exited; see $dir/proxy.log:"; tail -n3 "$dir/proxy.log" >&2; return 1; }
            listening "$port" && break
            sleep 0.02
        done
    done
    log "delay proxy up (pid $(cat "$dir/pid")): +$rtt ms round trip ($us µs each way) via ports $(cut -d' ' -f1 "$dir/routes" | sed 's/.*://' | paste -sd' ' -)"
}

measure() {
    running || { log "the delay proxy is not running (scripts/delay.sh start RTT_MS)"; return 1; }
    local args=()
    mapfile -t args <"$dir/measure-args"
    python3 "$here/scripts/bench/measure_rtt.py" --configured-ms "$(cat "$dir/rtt_ms")" "${args[@]}"
}

status() {
    if ! running; then
        echo "delay proxy down"
        return 1
    fi
    local rtt
    rtt=$(cat "$dir/rtt_ms")
    echo "delay proxy up, pid $(cat "$dir/pid"): configured +$rtt ms round trip ($(one_way_us "$rtt") µs each way), log $dir/proxy.log"
    while read -r proxied address; do echo "  $proxied -> $address"; done <"$dir/routes"
    measure
}

case "${1:-}" in
    start) start "${2:?usage: scripts/delay.sh start RTT_MS [HOST:PORT...]}" "${@:3}" ;;
    stop) stop ;;
    env)
        running || { log "the delay proxy is not running (scripts/delay.sh start RTT_MS)"; exit 1; }
        cat "$dir/env" ;;
    status) status ;;
    measure) measure ;;
    build) build; echo "$bin" ;;
    *) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 2 ;;
esac
