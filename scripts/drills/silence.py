#!/usr/bin/env python3
"""Black-box drill for issue 25 ("silence is never an answer") against `serve` with its defaults.

Starts two instances of the built binary on the servers of scripts/deps.sh (`eval "$(scripts/deps.sh
env)"` first) and runs, printing figures:

  1. silent nodes: 50 profiles cached; every memcached node frozen (SIGSTOP) for 3 s while one SQL
     transaction raises their versions; 5 s after the thaw, how many GETs still answer the old one.
  2. lost notifier: the feed's NOTIFY session terminated by the server (pg_terminate_backend), then
     a profile changes in SQL; how long until the other instance's event stream sends the version.
  3. publication gap: DROP PUBLICATION, a change, CREATE PUBLICATION, another change; what /readyz
     said meanwhile, and how long until both changes are answered by GET.

  scripts/drills/silence.py      (PROFILE_SERVICE_BIN: the binary, default .build/debug/profile-service)
"""
import http.client, json, os, signal, sys, threading, time

from drill import get, memcached_pids, psql, seed, start_service, until, version, wait_stopped


def silent_nodes(port):
    ids = seed(50, "sil")
    for _ in range(3):  # the feed's INSERT repair may take a first reader's lease
        for id in ids:
            version(port, id)
    pids = memcached_pids()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
        wait_stopped(pid)
    try:
        psql("UPDATE user_profiles SET display_name = 'while silent', version = version + 1 "
             f"WHERE id IN ({','.join(map(str, ids))})")
        time.sleep(3)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    time.sleep(5)
    old = sum(1 for id in ids if version(port, id) != 2)
    print(f"1. silent nodes: {old} of {len(ids)} profiles old 5 s after the thaw (target 0)")
    return old == 0


def lost_notifier(port_a, port_b):
    (id,) = seed(1, "ntf")
    version(port_a, id)
    psql(f"UPDATE user_profiles SET version = version + 1, display_name = 'first' WHERE id = {id}")
    time.sleep(0.5)  # the notifier has sent at least once: its last query is the NOTIFY
    events = []
    connection = http.client.HTTPConnection("127.0.0.1", port_b, timeout=10)
    connection.request("GET", f"/users/profile/{id}/events")
    response = connection.getresponse()

    def read():
        try:
            for line in response:
                if line.startswith(b"id: "):
                    events.append((time.time(), int(line[4:])))
        except Exception:
            pass

    threading.Thread(target=read, daemon=True).start()
    until(lambda: events and events[-1][1] == 2, 5)
    killed = psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                  "AND backend_type = 'client backend' AND query LIKE 'SELECT pg_notify%'")
    committed = time.time()
    psql(f"UPDATE user_profiles SET version = version + 1, display_name = 'second' WHERE id = {id}")
    delivered = until(lambda: events and events[-1][1] == 3, 5)
    connection.close()
    figure = f"{delivered * 1000:.0f} ms" if delivered is not None else "never (5 s)"
    print(f"2. lost notifier ({killed} session terminated): version 3 reached the other instance's stream after {figure} (target ≤ 2 s)")
    return delivered is not None and delivered <= 2


def publication_gap(port):
    in_gap, after = seed(2, "gap")
    for _ in range(3):
        version(port, in_gap), version(port, after)
    psql("DROP PUBLICATION profile_service_changes")
    psql(f"UPDATE user_profiles SET version = version + 1, display_name = 'in the gap' WHERE id = {in_gap}")
    said = set()
    deadline = time.time() + 3
    while time.time() < deadline:
        said.add(json.loads(get(port, "/readyz")[1])["change_feed"]["state"])
        time.sleep(0.1)
    psql("CREATE PUBLICATION profile_service_changes FOR TABLE user_profiles")
    created = time.time()
    psql(f"UPDATE user_profiles SET version = version + 1, display_name = 'after the gap' WHERE id = {after}")
    served = until(lambda: version(port, in_gap) == 2 and version(port, after) == 2, 10)
    readyz = json.loads(get(port, "/readyz")[1])["change_feed"]
    figure = f"{served * 1000:.0f} ms" if served is not None else "not within 10 s"
    print(f"3. publication gap: /readyz said {sorted(said)} while it was missing; both changes on GET {figure} "
          f"after CREATE PUBLICATION (target ≤ 3 s); now {readyz['state']}, gaps_closed {readyz.get('gaps_closed')}")
    return served is not None and served <= 3 and "stalled" in said


def main():
    services = [start_service(), start_service()]
    try:
        # The instance holding the slot repairs; wait until one is active.
        until(lambda: any(json.loads(get(p, "/readyz")[1])["change_feed"]["state"] == "active" for _, p in services), 10)
        active = next(p for _, p in services if json.loads(get(p, "/readyz")[1])["change_feed"]["state"] == "active")
        other = next(p for _, p in services if p != active)
        results = [silent_nodes(other), lost_notifier(active, other), publication_gap(other)]
    finally:
        for process, _ in services:
            process.terminate()
            process.wait(10)
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
