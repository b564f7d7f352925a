#!/usr/bin/env bash
# Installs and runs profile-service's real dependencies on loopback:
# a throwaway PostgreSQL 15 cluster and two memcached nodes (the service always talks to
# a cluster). Every server gets a port of its own and is stopped by its process id.
#
#   scripts/deps.sh install   apt-get install what is missing (idempotent)
#   scripts/deps.sh start     install, then start whatever is not running (idempotent)
#   scripts/deps.sh stop      stop what is running, by pid (idempotent)
#   scripts/deps.sh status    one line per server; exit 1 if any is down
#   scripts/deps.sh env       print the PROFILE_* / TEST_* variables for these servers
#   scripts/deps.sh restart-memcached N | stop-memcached N | start-memcached N
#   scripts/deps.sh stop-postgres | start-postgres
#   scripts/deps.sh check-port PORT WHAT SETTING   exit 1, saying who holds it, if PORT is taken
#
# A port that is already taken (by a server of another checkout, say) stops `start` with a message
# naming the port, the process holding it and the setting that moves this checkout's servers.
#
# Settings (environment): PROFILE_STATE_DIR (default ./.state), PROFILE_PG_PORT (55432),
# PROFILE_MC_PORTS (21211,21212), PROFILE_MC_MEMORY_MB (64), PROFILE_PG_SLOT_WAL_KEEP (1GB:
# PostgreSQL's max_slot_wal_keep_size; a test of the slot's invalidation sets it small).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${PROFILE_STATE_DIR:-$here/.state}
pg_port=${PROFILE_PG_PORT:-55432}
mc_ports=${PROFILE_MC_PORTS:-21211,21212}
mc_memory=${PROFILE_MC_MEMORY_MB:-64}
slot_wal_keep=${PROFILE_PG_SLOT_WAL_KEEP:-1GB}
pg_data=$state/postgres/data
pg_log=$state/postgres/postgres.log
pg_db=profiles
pg_user=postgres

log() { printf 'deps: %s\n' "$*" >&2; }

pg_bin() {
    local dir
    for dir in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
        [ -x "$dir/$1" ] && { echo "$dir/$1"; return; }
    done
    command -v "$1"
}

install() {
    local missing=()
    command -v memcached >/dev/null || missing+=(memcached)
    pkg-config --exists libmemcached 2>/dev/null || missing+=(libmemcached-dev)
    [ -f /usr/include/postgresql/libpq-fe.h ] || missing+=(libpq-dev)
    pkg-config --exists libpq 2>/dev/null || missing+=(pkg-config)
    [ -n "$(pg_bin initdb 2>/dev/null)" ] || missing+=(postgresql-15)
    command -v psql >/dev/null || missing+=(postgresql-client-15)
    command -v curl >/dev/null || missing+=(curl)
    command -v runuser >/dev/null || missing+=(util-linux)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    # Debian's memcached package may start a system instance on 11211; ours do not use it.
    id postgres >/dev/null 2>&1 || useradd --system --home /var/lib/postgresql postgres
    id memcache >/dev/null 2>&1 || useradd --system --no-create-home memcache
}

as_postgres() { runuser -u postgres -- "$@"; }

pid_alive() { [ -f "$1" ] && kill -0 "$(head -n1 "$1")" 2>/dev/null; }

# Whether something accepts TCP connections on 127.0.0.1:$1.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# "name (pid N)" of the process listening on TCP port $1, when it can be seen: ss, else the
# socket's inode in /proc/net/tcp* matched against every process's descriptors.
port_holder() {
    local port=$1 hex inode fd pid
    if command -v ss >/dev/null; then
        ss -ltnpH "sport = :$port" 2>/dev/null | grep -o 'users:(("[^"]*",pid=[0-9]*' | head -n1 |
            sed -E 's/users:\(\("([^"]*)",pid=([0-9]*)/\1 (pid \2)/'
        return 0
    fi
    hex=$(printf '%04X' "$port")
    inode=$(awk -v p=":$hex" '$2 ~ p"$" && $4 == "0A" { print $10; exit }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
    [ -n "$inode" ] || return 0
    fd=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "socket:\[$inode\]" 2>/dev/null | head -n1)
    [ -n "$fd" ] || return 0
    pid=${fd#/proc/}; pid=${pid%%/*}
    echo "$(cat "/proc/$pid/comm" 2>/dev/null) (pid $pid)"
}

# Fails with a message naming the port, its holder and the setting that moves it, when $1 is
# taken. $2: what we wanted to start; $3: the setting; $4: why the holder is not ours, if known.
require_free_port() {
    local port=$1 what=$2 setting=$3 why=${4:-} holder hint=""
    port_in_use "$port" || return 0
    holder=$(port_holder "$port")
    [[ $holder =~ \(pid\ ([0-9]+)\) ]] && hint=" (kill ${BASH_REMATCH[1]})"
    log "cannot start $what: port $port on 127.0.0.1 is already taken by ${holder:-a process that cannot be seen from here}${why:+, $why}"
    log "stop that process$hint, or use another port: $setting"
    return 1
}

pg_pidfile() { echo "$pg_data/postmaster.pid"; }

pg_setting() {
    psql -h 127.0.0.1 -p "$pg_port" -U "$pg_user" -d postgres -tAc "SHOW $1" 2>/dev/null || true
}

start_postgres() {
    mkdir -p "$state/postgres"
    chmod 755 "$state" "$state/postgres"
    chown postgres: "$state/postgres"
    # The data directory must be reachable by the postgres user: every parent needs +x.
    local d=$state
    while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
    if [ ! -f "$pg_data/PG_VERSION" ]; then
        log "initdb $pg_data"
        as_postgres "$(pg_bin initdb)" -D "$pg_data" -U "$pg_user" -A trust -E UTF8 \
            --locale=C.UTF-8 >/dev/null
    fi
    if pid_alive "$(pg_pidfile)" && [ "$(pg_setting wal_level)" != logical ]; then
        # Started by an older deps.sh: the change feed needs logical decoding (a restart).
        log "restarting postgres with wal_level=logical"
        stop_postgres
    fi
    if pid_alive "$(pg_pidfile)"; then
        log "postgres already running (pid $(head -n1 "$(pg_pidfile)"), port $pg_port)"
    else
        require_free_port "$pg_port" postgres "PROFILE_PG_PORT=<port> (now $pg_port)" \
            "not by this checkout's server (state: $state)"
        log "starting postgres on 127.0.0.1:$pg_port"
        as_postgres "$(pg_bin pg_ctl)" -D "$pg_data" -l "$pg_log" -w -t 60 start -o \
            "-c listen_addresses=127.0.0.1 -p $pg_port -c unix_socket_directories=$state/postgres \
             -c max_connections=200 -c fsync=off -c synchronous_commit=on -c shared_buffers=128MB \
             -c wal_level=logical -c max_replication_slots=10 -c max_wal_senders=10 \
             -c max_slot_wal_keep_size=$slot_wal_keep -c wal_sender_timeout=30s" \
            >/dev/null
    fi
    local i
    for i in $(seq 1 50); do
        "$(pg_bin pg_isready)" -q -h 127.0.0.1 -p "$pg_port" && break
        sleep 0.2
    done
    if ! psql -h 127.0.0.1 -p "$pg_port" -U "$pg_user" -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$pg_db'" | grep -q 1; then
        psql -q -h 127.0.0.1 -p "$pg_port" -U "$pg_user" -d postgres -c "CREATE DATABASE $pg_db"
    fi
}

stop_postgres() {
    if pid_alive "$(pg_pidfile)"; then
        local pid
        pid=$(head -n1 "$(pg_pidfile)")
        log "stopping postgres (pid $pid)"
        kill -INT "$pid" # fast shutdown
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    fi
}

mc_port() { echo "$mc_ports" | cut -d, -f"$1"; }
mc_pidfile() { echo "$state/memcached/$(mc_port "$1").pid"; }
mc_count() { echo "$mc_ports" | tr ',' '\n' | grep -c .; }

start_memcached() {
    local n=$1 port pidfile
    port=$(mc_port "$n"); pidfile=$(mc_pidfile "$n")
    # memcached drops to the memcache user before it writes its pid file.
    mkdir -p "$state/memcached"
    chown memcache: "$state/memcached"
    if pid_alive "$pidfile"; then
        log "memcached $n already running (pid $(cat "$pidfile"), port $port)"
        return
    fi
    rm -f "$pidfile"
    require_free_port "$port" "memcached $n" "PROFILE_MC_PORTS=<port>,<port> (now $mc_ports)" \
        "not by this checkout's server (state: $state)"
    log "starting memcached $n on 127.0.0.1:$port"
    memcached -d -P "$pidfile" -l 127.0.0.1 -p "$port" -U 0 -m "$mc_memory" -c 4096 -t 2 -u memcache \
        </dev/null >>"$state/memcached/$port.log" 2>&1
    for _ in $(seq 1 50); do
        [ -s "$pidfile" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.1
    done
    log "memcached $n did not start; see $state/memcached/$port.log"
    return 1
}

stop_memcached() {
    local n=$1 pidfile pid
    pidfile=$(mc_pidfile "$n")
    if pid_alive "$pidfile"; then
        pid=$(cat "$pidfile")
        log "stopping memcached $n (pid $pid)"
        kill "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$pidfile"
}

status() {
    local ok=0 n
    if pid_alive "$(pg_pidfile)"; then
        echo "postgres  up    pid $(head -n1 "$(pg_pidfile)")  127.0.0.1:$pg_port  db $pg_db"
    else
        echo "postgres  down  127.0.0.1:$pg_port"; ok=1
    fi
    for n in $(seq 1 "$(mc_count)"); do
        if pid_alive "$(mc_pidfile "$n")"; then
            echo "memcached up    pid $(cat "$(mc_pidfile "$n")")  127.0.0.1:$(mc_port "$n")"
        else
            echo "memcached down  127.0.0.1:$(mc_port "$n")"; ok=1
        fi
    done
    return $ok
}

print_env() {
    local servers
    servers=$(echo "$mc_ports" | tr ',' '\n' | sed 's/^/127.0.0.1:/' | paste -sd, -)
    echo "export PROFILE_DATABASE_URL='postgres://$pg_user@127.0.0.1:$pg_port/$pg_db'"
    echo "export PROFILE_MEMCACHED='$servers'"
    echo "export PROFILE_STATE_DIR='$state'"
}

case "${1:-}" in
    install) install ;;
    start)
        install
        start_postgres
        for n in $(seq 1 "$(mc_count)"); do start_memcached "$n"; done
        ;;
    stop)
        for n in $(seq 1 "$(mc_count)"); do stop_memcached "$n"; done
        stop_postgres
        ;;
    status) status ;;
    env) print_env ;;
    start-postgres) start_postgres ;;
    stop-postgres) stop_postgres ;;
    start-memcached) start_memcached "${2:?node number}" ;;
    stop-memcached) stop_memcached "${2:?node number}" ;;
    restart-memcached) stop_memcached "${2:?node number}"; start_memcached "$2" ;;
    check-port) require_free_port "${2:?port}" "${3:?what}" "${4:?setting}" ;;
    *) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
