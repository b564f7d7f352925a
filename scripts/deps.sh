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
#   scripts/deps.sh start-standby   a streaming standby of that PostgreSQL (pg_basebackup -R, hot
#                                   standby) on a port of its own; idempotent. Not part of `start`.
#   scripts/deps.sh stop-standby    stop it, by pid (idempotent; `stop` stops it too)
#   scripts/deps.sh start-pgbouncer two PgBouncers in front of that PostgreSQL, one in transaction
#                                   mode, one in session mode (default_pool_size 20, no
#                                   ignore_startup_parameters); installs pgbouncer. Not part of
#                                   `start`; `stop-pgbouncer` (and `stop`) stop them.
# While the standby runs, `env` also prints PROFILE_REPLICA_DATABASE_URLS (for issue 22's read
# replicas) and `status` shows it (a stopped standby is reported, not counted as down). Its base
# backup is kept in $PROFILE_STATE_DIR/standby and taken again when the primary was re-initialised
# (another system identifier) or no longer has the WAL the standby needs.
#
# A port that is already taken (by a server of another checkout, say) stops `start` with a message
# naming the port, the process holding it and the setting that moves this checkout's servers.
#
# Settings (environment): PROFILE_STATE_DIR (default ./.state), PROFILE_PG_PORT (55432),
# PROFILE_MC_PORTS (21211,21212), PROFILE_MC_MEMORY_MB (64), PROFILE_PG_SLOT_WAL_KEEP (1GB:
# PostgreSQL's max_slot_wal_keep_size; a test of the slot's invalidation sets it small),
# PROFILE_PG_STANDBY_PORT (55442), PROFILE_PG_STANDBY_DELAY_MS (0: the standby's
# recovery_min_apply_delay, applied by every start-standby, also to a running standby),
# PROFILE_PGBOUNCER_PORTS (55452,55453: transaction mode, session mode).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${PROFILE_STATE_DIR:-$here/.state}
pg_port=${PROFILE_PG_PORT:-55432}
mc_ports=${PROFILE_MC_PORTS:-21211,21212}
mc_memory=${PROFILE_MC_MEMORY_MB:-64}
slot_wal_keep=${PROFILE_PG_SLOT_WAL_KEEP:-1GB}
standby_port=${PROFILE_PG_STANDBY_PORT:-55442}
standby_delay=${PROFILE_PG_STANDBY_DELAY_MS:-0}
pgbouncer_ports=${PROFILE_PGBOUNCER_PORTS:-55452,55453}
pg_data=$state/postgres/data
pg_log=$state/postgres/postgres.log
standby_dir=$state/standby
standby_data=$standby_dir/data
standby_log=$standby_dir/postgres.log
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

# Runs a server's start, "$@", until it succeeds. The default ports are in the kernel's ephemeral
# range (32768-60999): a client connection the kernel gave the port as its own end keeps a server
# from binding it while it lives and for up to 60 s after it closes (TIME-WAIT), though nobody
# listens there. When a start fails that way (the server's log, $3, says "Address already in use"
# and the port takes no connections) it is tried again every 5 s, for up to 90 s.
# $1: the port; $2: what is started, for the messages; $4: the setting that moves the port.
start_past_closed_connections() {
    local port=$1 what=$2 server_log=$3 setting=$4 logged attempt
    shift 4
    for attempt in $(seq 1 18); do
        logged=$(stat -c %s "$server_log" 2>/dev/null || echo 0)
        "$@" && return 0
        if ! tail -c +"$((logged + 1))" "$server_log" 2>/dev/null | grep -q 'Address already in use' ||
            port_in_use "$port"; then
            log "$what did not start; see $server_log"
            return 1
        fi
        [ "$attempt" = 1 ] &&
            log "port $port is held by a client connection's own end (TIME-WAIT), not a listener; trying again every 5 s"
        sleep 5
    done
    log "cannot start $what: port $port on 127.0.0.1 is still held by a connection's own end, not a listener"
    log "use another port: $setting"
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
        start_past_closed_connections "$pg_port" postgres "$pg_log" "PROFILE_PG_PORT=<port> (now $pg_port)" \
            as_postgres "$(pg_bin pg_ctl)" -D "$pg_data" -l "$pg_log" -w -t 60 start -o \
            "-c listen_addresses=127.0.0.1 -p $pg_port -c unix_socket_directories=$state/postgres \
             -c max_connections=200 -c fsync=off -c synchronous_commit=on -c shared_buffers=128MB \
             -c wal_level=logical -c max_replication_slots=10 -c max_wal_senders=10 \
             -c max_slot_wal_keep_size=$slot_wal_keep -c wal_sender_timeout=30s" \
            >/dev/null 2>&1
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

# Stops the PostgreSQL server of pid file $1 (named $2 in the message): a fast shutdown; after 10 s
# an immediate one (SIGQUIT: the postmaster ends its children and releases its shared memory — a
# walsender with a large backlog can hold a fast shutdown up); SIGKILL only as the last resort,
# since it leaves the children and the shared memory behind and the next start then fails.
stop_cluster() {
    if pid_alive "$1"; then
        local pid
        pid=$(head -n1 "$1")
        log "stopping $2 (pid $pid)"
        kill -INT "$pid" # fast shutdown
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
        log "$2 did not stop within 10 s: immediate shutdown"
        kill -QUIT "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    fi
}

stop_postgres() { stop_cluster "$(pg_pidfile)" postgres; }

# The streaming standby of start-standby and stop-standby: not started by `start`.

standby_pidfile() { echo "$standby_data/postmaster.pid"; }

standby_sql() {
    psql -h 127.0.0.1 -p "$standby_port" -U "$pg_user" -d postgres -tAc "$1" 2>/dev/null || true
}

# The primary's system identifier, from a replication connection: that also proves the primary
# accepts the replication connections pg_basebackup and the standby make. When it does not and the
# cluster is this checkout's, a `host replication` line for 127.0.0.1 is added to its pg_hba.conf.
primary_system_id() {
    local conninfo="host=127.0.0.1 port=$pg_port user=$pg_user replication=true" answer hba i
    if ! port_in_use "$pg_port"; then
        log "cannot start the standby: no PostgreSQL on 127.0.0.1:$pg_port; run scripts/deps.sh start first"
        return 1
    fi
    case $(pg_setting wal_level) in
        replica | logical) ;;
        *) log "cannot start the standby: the primary on 127.0.0.1:$pg_port runs with wal_level=$(pg_setting wal_level)"
           log "restart it: scripts/deps.sh stop-postgres && scripts/deps.sh start-postgres"; return 1 ;;
    esac
    if [ "$(pg_setting max_wal_senders)" = 0 ]; then
        log "cannot start the standby: the primary on 127.0.0.1:$pg_port runs with max_wal_senders=0"
        log "restart it: scripts/deps.sh stop-postgres && scripts/deps.sh start-postgres"
        return 1
    fi
    if answer=$(psql "$conninfo" -tAc IDENTIFY_SYSTEM 2>&1); then
        echo "${answer%%|*}"; return 0
    fi
    if [[ $answer != *pg_hba.conf* ]]; then
        log "cannot start the standby: a replication connection to 127.0.0.1:$pg_port failed: $answer"
        return 1
    fi
    if [ "$(pg_setting data_directory)" != "$pg_data" ]; then
        log "cannot start the standby: the primary on 127.0.0.1:$pg_port refuses replication connections: $answer"
        log "allow them in its pg_hba.conf: host replication all 127.0.0.1/32 trust"
        return 1
    fi
    hba=$(pg_setting hba_file)
    log "allowing replication connections from 127.0.0.1 in $hba"
    sed -i '1i host    replication     all             127.0.0.1/32            trust' "$hba"
    psql -q -h 127.0.0.1 -p "$pg_port" -U "$pg_user" -d postgres -tAc "SELECT pg_reload_conf()" >/dev/null
    for i in $(seq 1 50); do
        answer=$(psql "$conninfo" -tAc IDENTIFY_SYSTEM 2>&1) && { echo "${answer%%|*}"; return 0; }
        sleep 0.1
    done
    log "cannot start the standby: the primary still refuses replication connections: $answer"
    return 1
}

standby_system_id() {
    as_postgres "$(pg_bin pg_controldata)" -D "$standby_data" 2>/dev/null |
        awk -F': *' '/^Database system identifier/ { print $2 }'
}

# Whether the primary still has the WAL the stopped standby needs to resume streaming: the newest
# segment in the standby's pg_wal (streaming resumes at its start) is not older than the oldest the
# primary keeps. Segment names compare as text once the timeline (8 digits) is cut off.
standby_wal_available() {
    local newest oldest
    newest=$(ls "$standby_data/pg_wal" 2>/dev/null | grep -E '^[0-9A-F]{24}$' | sort | tail -n1)
    oldest=$(psql -h 127.0.0.1 -p "$pg_port" -U "$pg_user" -d postgres -tAc \
        "SELECT min(name) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'" 2>/dev/null || true)
    [ -n "$newest" ] && [ -n "$oldest" ] && [[ ! ${newest:8} < ${oldest:8} ]]
}

# recovery_min_apply_delay lives in a file of its own, included by the standby's postgresql.conf,
# so that a running standby takes a new value with a reload.
write_standby_delay() {
    echo "recovery_min_apply_delay = '${standby_delay}ms'" >"$standby_data/deps-standby.conf"
    chown postgres: "$standby_data/deps-standby.conf"
}

start_standby() {
    local systemid old delay minimums i log_size
    if ! [[ $standby_delay =~ ^[0-9]+$ ]]; then
        log "PROFILE_PG_STANDBY_DELAY_MS must be a whole number of milliseconds (now $standby_delay)"
        return 1
    fi
    systemid=$(primary_system_id) || return 1
    mkdir -p "$standby_dir"
    chmod 755 "$state" "$standby_dir"
    chown postgres: "$standby_dir"
    local d=$state
    while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
    if pid_alive "$(standby_pidfile)"; then
        old=$(standby_system_id)
        if [ "$old" != "$systemid" ]; then
            log "the primary was initialised again (system identifier $systemid, the standby's $old): a new base backup"
            stop_standby
            rm -rf "$standby_data"
        elif [ "$(standby_sql "SELECT status FROM pg_stat_wal_receiver")" != streaming ] &&
            tail -c 4096 "$standby_log" 2>/dev/null | grep -q "has already been removed"; then
            log "the standby runs but cannot stream: the primary no longer has its WAL; a new base backup"
            stop_standby
            rm -rf "$standby_data"
        else
            delay=$(standby_sql "SELECT setting FROM pg_settings WHERE name = 'recovery_min_apply_delay'")
            if [ "$delay" != "$standby_delay" ]; then
                log "standby: recovery_min_apply_delay ${delay:-?}ms → ${standby_delay}ms"
                write_standby_delay
                standby_sql "SELECT pg_reload_conf()" >/dev/null
                for i in $(seq 1 50); do
                    [ "$(standby_sql "SELECT setting FROM pg_settings WHERE name = 'recovery_min_apply_delay'")" = "$standby_delay" ] && break
                    sleep 0.1
                done
            fi
            log "postgres standby already running (pid $(head -n1 "$(standby_pidfile)"), port $standby_port, recovery_min_apply_delay ${standby_delay}ms)"
            return 0
        fi
    fi
    if [ -f "$standby_data/PG_VERSION" ]; then
        old=$(standby_system_id)
        if [ "$old" != "$systemid" ]; then
            log "the primary was initialised again (system identifier $systemid, the standby's ${old:-unknown}): a new base backup"
            rm -rf "$standby_data"
        elif ! standby_wal_available; then
            log "the primary no longer has the WAL the standby needs: a new base backup"
            rm -rf "$standby_data"
        fi
    fi
    if [ ! -f "$standby_data/PG_VERSION" ]; then
        rm -rf "$standby_data"
        log "pg_basebackup of 127.0.0.1:$pg_port into $standby_data"
        as_postgres "$(pg_bin pg_basebackup)" -d "host=127.0.0.1 port=$pg_port user=$pg_user application_name=deps-standby" \
            -D "$standby_data" -R -X stream -c fast || { log "pg_basebackup failed"; return 1; }
        echo "include_if_exists = 'deps-standby.conf'" >>"$standby_data/postgresql.conf"
    fi
    write_standby_delay
    require_free_port "$standby_port" "postgres standby" "PROFILE_PG_STANDBY_PORT=<port> (now $standby_port)" \
        "not by this checkout's standby (state: $state)"
    # A hot standby refuses to run with less of these than its primary has.
    minimums=$(psql -h 127.0.0.1 -p "$pg_port" -U "$pg_user" -d postgres -tAc \
        "SELECT string_agg(format('-c %s=%s', name, setting), ' ') FROM pg_settings WHERE name IN
         ('max_connections', 'max_worker_processes', 'max_wal_senders', 'max_prepared_transactions',
          'max_locks_per_transaction')")
    log "starting postgres standby of 127.0.0.1:$pg_port on 127.0.0.1:$standby_port (recovery_min_apply_delay ${standby_delay}ms)"
    log_size=$(stat -c %s "$standby_log" 2>/dev/null || echo 0)
    start_past_closed_connections "$standby_port" "postgres standby" "$standby_log" \
        "PROFILE_PG_STANDBY_PORT=<port> (now $standby_port)" \
        as_postgres "$(pg_bin pg_ctl)" -D "$standby_data" -l "$standby_log" -w -t 120 start -o \
        "-c listen_addresses=127.0.0.1 -p $standby_port -c unix_socket_directories=$standby_dir \
         -c hot_standby=on -c fsync=off -c shared_buffers=32MB $minimums" >/dev/null 2>&1 || return 1
    for i in $(seq 1 300); do
        [ "$(standby_sql "SELECT status FROM pg_stat_wal_receiver")" = streaming ] && return 0
        # The primary recycled the WAL the standby would resume from (the check above reads the
        # standby's newest segment, which may be one it had only begun): a new base backup, once.
        if [ -z "${standby_retaken:-}" ] && tail -c +$((log_size + 1)) "$standby_log" 2>/dev/null |
            grep -q "has already been removed"; then
            log "the primary no longer has the WAL the standby resumes from: a new base backup"
            standby_retaken=1
            stop_standby
            rm -rf "$standby_data"
            start_standby
            return
        fi
        sleep 0.2
    done
    log "the standby accepts connections but does not stream from 127.0.0.1:$pg_port; see $standby_log"
    return 1
}

stop_standby() { stop_cluster "$(standby_pidfile)" "postgres standby"; }

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

# PgBouncer 1.18 as production runs it in front of PostgreSQL: `pool_mode` $1 (transaction or
# session) on port $2, 20 server connections per database and user, trust for the postgres user.
pgbouncer_dir() { echo "$state/pgbouncer-$1"; }
pgbouncer_port() {
    case $1 in transaction) echo "${pgbouncer_ports%%,*}" ;; session) echo "${pgbouncer_ports##*,}" ;; esac
}

start_pgbouncer() {
    local mode=$1 port dir
    port=$(pgbouncer_port "$mode")
    dir=$(pgbouncer_dir "$mode")
    if ! command -v pgbouncer >/dev/null; then
        log "installing pgbouncer"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null ||
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null; }
        # Debian's package may start a system instance on 6432; ours do not use it.
        service pgbouncer stop >/dev/null 2>&1 || true
    fi
    # A pooler killed a moment ago may linger as a zombie whose pid still answers kill -0.
    if pid_alive "$dir/pgbouncer.pid" && port_in_use "$port"; then
        log "pgbouncer ($mode) already running (pid $(cat "$dir/pgbouncer.pid"), port $port)"; return 0
    fi
    require_free_port "$port" "pgbouncer ($mode)" "PROFILE_PGBOUNCER_PORTS=<port>,<port> (now $pgbouncer_ports)"
    mkdir -p "$dir"
    rm -f "$dir/pgbouncer.pid"  # a dead instance's: pgbouncer refuses to start while a zombie holds it
    echo '"postgres" ""' >"$dir/userlist.txt"
    cat >"$dir/pgbouncer.ini" <<EOF
[databases]
$pg_db = host=127.0.0.1 port=$pg_port dbname=$pg_db
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = $mode
default_pool_size = 20
max_client_conn = 1000
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
    chown -R postgres: "$dir"
    log "starting pgbouncer ($mode pooling) on 127.0.0.1:$port"
    start_past_closed_connections "$port" "pgbouncer ($mode)" "$dir/pgbouncer.log" \
        "PROFILE_PGBOUNCER_PORTS=<port>,<port> (now $pgbouncer_ports)" launch_pgbouncer "$dir" "$port"
}

# Starts the PgBouncer configured in folder $1 and waits until it listens on port $2; fails as soon
# as it has exited (it logs why, for instance a port it cannot bind).
launch_pgbouncer() {
    local dir=$1 port=$2
    as_postgres pgbouncer -d -q "$dir/pgbouncer.ini" || return 1
    for _ in $(seq 1 50); do
        port_in_use "$port" && return 0
        pid_alive "$dir/pgbouncer.pid" || { sleep 0.1; pid_alive "$dir/pgbouncer.pid" || port_in_use "$port" || return 1; }
        sleep 0.1
    done
    return 1
}

stop_pgbouncer() {
    local mode=$1 pidfile pid
    pidfile=$(pgbouncer_dir "$mode")/pgbouncer.pid
    if pid_alive "$pidfile"; then
        pid=$(cat "$pidfile")
        log "stopping pgbouncer ($mode, pid $pid)"
        kill -INT "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    fi
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
    if [ -f "$standby_data/PG_VERSION" ]; then
        if pid_alive "$(standby_pidfile)"; then
            echo "standby   up    pid $(head -n1 "$(standby_pidfile)")  127.0.0.1:$standby_port  streaming from 127.0.0.1:$pg_port"
        else
            echo "standby   down  127.0.0.1:$standby_port  (optional: scripts/deps.sh start-standby)"
        fi
    fi
    for n in transaction session; do
        pid_alive "$(pgbouncer_dir $n)/pgbouncer.pid" &&
            echo "pgbouncer up    pid $(cat "$(pgbouncer_dir $n)/pgbouncer.pid")  127.0.0.1:$(pgbouncer_port $n)  $n pooling"
    done
    return $ok
}

print_env() {
    local servers
    servers=$(echo "$mc_ports" | tr ',' '\n' | sed 's/^/127.0.0.1:/' | paste -sd, -)
    echo "export PROFILE_DATABASE_URL='postgres://$pg_user@127.0.0.1:$pg_port/$pg_db'"
    echo "export PROFILE_MEMCACHED='$servers'"
    echo "export PROFILE_STATE_DIR='$state'"
    if pid_alive "$(standby_pidfile)"; then
        echo "export PROFILE_REPLICA_DATABASE_URLS='postgres://$pg_user@127.0.0.1:$standby_port/$pg_db'"
    fi
    if pid_alive "$(pgbouncer_dir transaction)/pgbouncer.pid"; then
        echo "export PROFILE_PGBOUNCER_TRANSACTION_URL='postgres://$pg_user@127.0.0.1:$(pgbouncer_port transaction)/$pg_db'"
    fi
    if pid_alive "$(pgbouncer_dir session)/pgbouncer.pid"; then
        echo "export PROFILE_PGBOUNCER_SESSION_URL='postgres://$pg_user@127.0.0.1:$(pgbouncer_port session)/$pg_db'"
    fi
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
        stop_pgbouncer transaction; stop_pgbouncer session
        stop_standby
        stop_postgres
        ;;
    status) status ;;
    env) print_env ;;
    start-postgres) start_postgres ;;
    stop-postgres) stop_postgres ;;
    start-standby) start_standby ;;
    stop-standby) stop_standby ;;
    start-pgbouncer) start_pgbouncer transaction; start_pgbouncer session ;;
    stop-pgbouncer) stop_pgbouncer transaction; stop_pgbouncer session ;;
    start-memcached) start_memcached "${2:?node number}" ;;
    stop-memcached) stop_memcached "${2:?node number}" ;;
    restart-memcached) stop_memcached "${2:?node number}"; start_memcached "$2" ;;
    check-port) require_free_port "${2:?port}" "${3:?what}" "${4:?setting}" ;;
    *) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
