#!/usr/bin/env bash
# Scaling with cores: profile-service (its defaults, access log included) beside go-seed (GOMAXPROCS=N) and nginx
# `return 200` with a body of the same size (worker_processes N, reuseport), each pinned to cores
# 0..N-1 with taskset, for each N given; wrk, memcached and PostgreSQL on cores of their own.
# GET cache hits on 10,000 warm ids; at N = 2 and 8 also the PostgreSQL path (memcached flushed
# every 2 ms). For each server: requests/s, p99, CPU microseconds per request, the busiest
# threads' share of a core (by name: http-loop-0, http-batch-1, …) and, for profile-service, how
# the requests spread over its event loops (/metrics).
#
#   scripts/bench-cores.sh                 # this machine: N = 1 on two cores, 1 2 4 8 on 16
#   NS="1 2 4 8" scripts/bench-cores.sh     # the curve
#
# Binaries: with B=/dir (a bundle made by ../shared/bench/cores-bundle.sh, for a bare machine)
# everything comes from it; else profile-service is built (release) here, go-seed from
# ../shared/reference/go-seed, and memcached, wrk, nginx and PostgreSQL 15 are the installed ones.
# Cores: WRKC (wrk), MCC (memcached), PGC (PostgreSQL) default to the cores after the largest N
# (four, two and two of them); on a machine with fewer, they share the last core. DUR (8 s),
# CONNS (256), WRKT (4). PGPATH=0 skips the PostgreSQL path. VARIANTS="LABEL|SERVE ARGS|ENV=VALUE;…"
# also measures profile-service with those arguments (and environment) at each N above 1, e.g.
# VARIANTS='one-loop|--event-loops 1 --batch-workers $((2 * N))' for one loop beside the default
# ($N in the arguments is the run's). Needs root (PostgreSQL runs as a user
# of its own).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cores=$(nproc)
if [ "$cores" -ge 16 ]; then NS=${NS:-"1 2 4 8"}; else NS=${NS:-"1"}; fi
maxn=$(echo $NS | tr ' ' '\n' | sort -n | tail -1)
last=$((cores - 1))
pick() { # pick FIRST COUNT: cores FIRST..FIRST+COUNT-1, or the last core when there are too few
  if [ $(($1 + $2 - 1)) -le $last ]; then echo "$1-$(($1 + $2 - 1))"; else echo "$last"; fi
}
WRKC=${WRKC:-$(pick $maxn 4)}; MCC=${MCC:-$(pick $((maxn + 4)) 2)}; PGC=${PGC:-$(pick $((maxn + 6)) 2)}
WRKT=${WRKT:-4}; DUR=${DUR:-8}; CONNS=${CONNS:-256}
R=${R:-/tmp/bench-cores}; mkdir -p $R; chmod 755 $R

if [ -n "${B:-}" ]; then
  export LD_LIBRARY_PATH=$B/lib
  SVC=$B/bin/profile-service; GO=$B/bin/go-seed; MC=$B/bin/memcached; WRK=$B/bin/wrk; NGINX=$B/bin/nginx
  PGB=$B/usr/lib/postgresql/15/bin; MIGRATIONS=$B/etc/migrations; LUA=$B/etc/get_random.lua
else
  for tool in memcached wrk nginx; do command -v $tool >/dev/null || { echo "$tool is missing (scripts/deps.sh installs it)"; exit 1; }; done
  (cd "$here" && swift build -c release --product profile-service >/dev/null) || exit 1
  SVC=$here/.build/release/profile-service; MC=$(command -v memcached); WRK=$(command -v wrk); NGINX=$(command -v nginx)
  PGB=/usr/lib/postgresql/15/bin; MIGRATIONS=$here/migrations; seed=$here/../shared/reference/go-seed
  LUA=$seed/get_random.lua; GO=$R/go-seed
  g=$(mktemp -d); cp $seed/main.go $g/go-seed.go
  (cd $g && CGO_ENABLED=0 GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=/tmp/gocache go build -o $GO go-seed.go) || exit 1
fi
id pgrun >/dev/null 2>&1 || useradd -M -s /bin/sh pgrun
echo "== machine: $cores cores;$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); kernel $(uname -r)"
echo "== servers on cores 0..N-1 for N in: $NS; wrk -t$WRKT -c$CONNS on $WRKC, memcached on $MCC, PostgreSQL on $PGC; $DUR s per run"

rm -rf $R/pg; mkdir -p $R/pg; chown pgrun $R/pg; chmod 700 $R/pg; chown pgrun $R
runuser -u pgrun -- env LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} $PGB/initdb -D $R/pg -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >$R/initdb.log 2>&1 || { tail -5 $R/initdb.log; exit 1; }
runuser -u pgrun -- env LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} taskset -c $PGC $PGB/pg_ctl -D $R/pg -l $R/pg/server.log -w start -o "-c listen_addresses=127.0.0.1 -p 5544 -c unix_socket_directories=$R/pg -c max_connections=300 -c wal_level=logical -c max_replication_slots=8 -c max_wal_senders=8 -c shared_buffers=1GB" >/dev/null || { tail -5 $R/pg/server.log; exit 1; }
PSQL="$PGB/psql -X -q -h 127.0.0.1 -p 5544 -U postgres"
$PSQL -d postgres -c "CREATE DATABASE profiles" || exit 1
DB="postgres://postgres@127.0.0.1:5544/profiles?sslmode=disable"
mcpids=()
for p in 22211 22212 22213; do taskset -c $MCC $MC -u pgrun -l 127.0.0.1 -p $p -U 0 -m 256 -t 2 -c 8192 -d -P $R/mc$p.pid; done
sleep 0.5
cleanup() {
  for p in 22211 22212 22213; do [ -f $R/mc$p.pid ] && kill $(cat $R/mc$p.pid) 2>/dev/null; done
  runuser -u pgrun -- env LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} $PGB/pg_ctl -D $R/pg -m fast -w stop >/dev/null 2>&1
}
trap cleanup EXIT
$SVC migrate --migrations-directory $MIGRATIONS --database-url "$DB" >$R/migrate.log 2>&1 || { tail -3 $R/migrate.log; exit 1; }
$PSQL -d profiles -c "INSERT INTO user_profiles (id, username, display_name) SELECT g, 'user' || g, 'User ' || g FROM generate_series(1, 10000) g" || exit 1
body='{"id":1234,"username":"user1234","display_name":"User 1234","version":1,"updated_at":"2026-11-27T16:03:30.158823Z"}'
mkdir -p $R/ngx/logs
cat > $R/ngx.conf <<NGX
worker_processes NWORK; error_log $R/ngx/logs/error.log; pid $R/ngx/nginx.pid; daemon on;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 100000000; client_body_temp_path $R/ngx/b; proxy_temp_path $R/ngx/p; fastcgi_temp_path $R/ngx/f; uwsgi_temp_path $R/ngx/u; scgi_temp_path $R/ngx/s;
  server { listen 127.0.0.1:28090 reuseport; location / { default_type application/json; return 200 '$body'; } } }
NGX

cpu_of() { awk '{print $14+$15}' /proc/$1/stat; }   # clock ticks (100/s)
cpu_tree() { local t=0 p; for p in "$@"; do t=$((t + $(cpu_of $p))); done; echo $t; }
threads_of() { local p t; for p in "$@"; do for t in /proc/$p/task/*; do echo "${t##*/} $(tr ' ' _ <$t/comm) $(awk '{print $14+$15}' $t/stat)"; done; done; }
loop_requests() { python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$1/metrics', timeout=5).read().decode())" | awk '/^profile_service_http_loop_requests_total/{print $2}' | tr '\n' ' '; }
warm() { python3 - "$1" <<'PY'
import http.client, sys, threading
def run(k):
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
    for i in range(k, 10001, 8):
        c.request("GET", f"/users/profile/{i}"); c.getresponse().read()
ts = [threading.Thread(target=run, args=(k,)) for k in range(1, 9)]
[t.start() for t in ts]; [t.join() for t in ts]
PY
}
bench() { # bench NAME PORT PIDS...
  local name=$1 port=$2; shift 2
  taskset -c $WRKC $WRK -t$WRKT -c$CONNS -d2s -s $LUA "http://127.0.0.1:$port" -- 10000 >/dev/null 2>&1
  local l0=""; [ "$name" = "${name#profile-service}" ] || l0=$(loop_requests $port)
  local c0 t0; c0=$(cpu_tree "$@"); t0=$(threads_of "$@")
  local out; out=$(taskset -c $WRKC $WRK -t$WRKT -c$CONNS -d${DUR}s --latency -s $LUA "http://127.0.0.1:$port" -- 10000 2>&1)
  local c1 t1; c1=$(cpu_tree "$@"); t1=$(threads_of "$@")
  local rps p99 non us busiest spread=""
  rps=$(echo "$out" | awk '/Requests\/sec/{print $2}'); p99=$(echo "$out" | awk '/ 99%/{print $2}')
  non=$(echo "$out" | awk '/Non-2xx/{print $5}')
  us=$(python3 -c "print(round(($c1-$c0)*10000/($rps*$DUR),1))")
  busiest=$(python3 -c "
a={l.split()[0]: int(l.split()[2]) for l in '''$t0'''.strip().splitlines()}
b=[(l.split()[0], l.split()[1], int(l.split()[2])) for l in '''$t1'''.strip().splitlines()]
d=sorted(((c-a.get(t,0))/$DUR, n) for t,n,c in b)[::-1][:3]; print(', '.join(f'{n} {x:.0f}%' for x,n in d))")
  if [ -n "$l0" ]; then
    spread=$(python3 -c "
a=[float(x) for x in '$l0'.split()]; b=[float(x) for x in '$(loop_requests $port)'.split()]
d=[y-x for x,y in zip(a,b)]; t=sum(d) or 1; print('; loops: ' + ' '.join(f'{100*x/t:.0f}%' for x in d))")
  fi
  echo "N=$N $name: $rps req/s, p99 $p99, CPU ${us} us/req, non-2xx ${non:-0}; busiest threads (% of a core): $busiest$spread"
}
for N in $NS; do
  C="0-$((N-1))"
  taskset -c $C $SVC serve --port 28080 --database-url "$DB" --memcached 127.0.0.1:22211,127.0.0.1:22212 --auth none >$R/svc-$N.log 2>&1 & sp=$!
  GOMAXPROCS=$N taskset -c $C $GO -listen 127.0.0.1:28081 -pg "$DB" -memcached 127.0.0.1:22213 >$R/go-$N.log 2>&1 & gp=$!
  sed "s/NWORK/$N/" $R/ngx.conf > $R/ngx-$N.conf; taskset -c $C $NGINX -c $R/ngx-$N.conf -p $R/ngx || echo "nginx failed"
  sleep 2; np=$(cat $R/ngx/nginx.pid); nw=$(pgrep -P $np | tr '\n' ' ')
  for p in 28080 28081; do for _ in $(seq 50); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$p/users/profile/1', timeout=2)" 2>/dev/null && break; sleep 0.2; done; done
  warm 28080; warm 28081
  bench profile-service 28080 $sp
  bench go-seed 28081 $gp
  bench nginx-return-200 28090 $np $nw
  IFS=';' read -ra variants <<< "${VARIANTS:-}"
  for variant in "${variants[@]}"; do
    IFS='|' read -r vlabel vargs venv <<< "$variant"
    [ $N -gt 1 ] || continue
    vargs=$(eval "echo $vargs")   # $N and $((…)) in the arguments are the run's
    env $venv taskset -c $C $SVC serve --port 28082 $vargs --database-url "$DB" --memcached 127.0.0.1:22211,127.0.0.1:22212 --auth none --no-change-feed >$R/svc-$vlabel-$N.log 2>&1 & s1=$!
    for _ in $(seq 50); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:28082/users/profile/1', timeout=2)" 2>/dev/null && break; sleep 0.2; done
    bench profile-service-$vlabel 28082 $s1
    kill $s1; wait $s1 2>/dev/null
  done
  if [ "${PGPATH:-1}" = 1 ] && { [ $N = 2 ] || [ $N = 8 ]; }; then
    python3 - <<'PY' & fl=$!
import socket, time
ss = [socket.create_connection(("127.0.0.1", p)) for p in (22211, 22212, 22213)]
end = time.time() + 40
while time.time() < end:
    for s in ss: s.sendall(b"flush_all noreply\r\n")
    time.sleep(0.002)
PY
    bench profile-service-pgpath 28080 $sp
    bench go-seed-pgpath 28081 $gp
    kill $fl 2>/dev/null; wait $fl 2>/dev/null
  fi
  echo "N=$N $(awk '/listening/' $R/svc-$N.log | grep -o 'event_loops=[0-9]*\|batch_workers=[0-9]*' | tr '\n' ' ')threads: profile-service $(ls /proc/$sp/task | wc -l), go-seed $(ls /proc/$gp/task | wc -l); peak RSS profile-service $(awk '/VmHWM/{print $2}' /proc/$sp/status) kB"
  kill $sp $gp; kill $np; wait $sp $gp 2>/dev/null; sleep 1
done
echo "== done"
