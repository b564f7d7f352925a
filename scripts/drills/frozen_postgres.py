#!/usr/bin/env python3
"""Black-box drill for issue 25: PostgreSQL stops answering (SIGSTOP of the cluster: connections stay
up, nothing answers) for 8 s while 32 clients read ids that are not cached, one reads a cached id,
and one asks /healthz. Prints the longest wait of each, the cached reads' p99 and their statuses.

  eval "$(scripts/deps.sh env)"; scripts/drills/frozen_postgres.py  (PROFILE_SERVICE_BIN: the binary)
"""
import http.client, os, signal, subprocess, sys, threading, time

from drill import STATE, psql, seed, start_service, version

FREEZE_SECONDS = 8


def cluster_pids():
    postmaster = int(open(os.path.join(STATE, "postgres", "data", "postmaster.pid")).readline())
    children = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True).stdout.split()
    return [postmaster] + [int(pid) for pid in children]


class Client(threading.Thread):
    def __init__(self, port, paths):
        super().__init__(daemon=True)
        self.port, self.paths, self.samples, self.running = port, paths, [], True

    def run(self):
        connection = None
        index = 0
        while self.running:
            path = self.paths[index % len(self.paths)]
            index += 1
            started = time.time()
            try:
                if connection is None:
                    connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                connection.request("GET", path)
                response = connection.getresponse()
                response.read()
                status = response.status
                if response.getheader("Connection", "").lower() == "close":
                    connection.close()
                    connection = None
            except Exception:
                status = 0
                connection = None
            self.samples.append((started, time.time() - started, status))


def main():
    process, port = start_service()
    try:
        (cached,) = seed(1, "frz")
        for _ in range(3):
            version(port, cached)
        base = int(time.time() * 1000) % 1_000_000 * 100_000 + 8_000_000_000_000
        psql(f"INSERT INTO user_profiles (id, username, display_name) SELECT g, 'frz' || g, 'Cold' FROM generate_series({base}, {base + 31_999}) g")
        cold = [Client(port, [f"/users/profile/{base + client * 1000 + i}" for i in range(1000)]) for client in range(32)]
        warm = Client(port, [f"/users/profile/{cached}"])
        health = Client(port, ["/healthz"])
        clients = cold + [warm, health]
        for client in clients:
            client.start()
        time.sleep(1)
        pids = cluster_pids()
        frozen_at = time.time()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(FREEZE_SECONDS)
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        thawed_at = time.time()
        time.sleep(2)
        for client in clients:
            client.running = False
        for client in clients:
            client.join(35)

        def during(samples):
            return [s for s in samples if s[0] < thawed_at and s[0] + s[1] > frozen_at]

        cold_samples = during([s for c in cold for s in c.samples])
        warm_samples = during(warm.samples)
        health_samples = during(health.samples)
        durations = sorted(s[1] for s in warm_samples)
        p99 = durations[min(len(durations) - 1, int(len(durations) * 0.99))] if durations else 0
        statuses = lambda samples: {st: sum(1 for s in samples if s[2] == st) for st in sorted({s[2] for s in samples})}
        print(f"PostgreSQL frozen {FREEZE_SECONDS} s; requests under way meanwhile:")
        print(f"  cold reads   {len(cold_samples):6}  longest {max((s[1] for s in cold_samples), default=0):.2f} s  statuses {statuses(cold_samples)}")
        print(f"  cached reads {len(warm_samples):6}  longest {max((s[1] for s in warm_samples), default=0) * 1000:.1f} ms  p99 {p99 * 1000:.1f} ms  statuses {statuses(warm_samples)}")
        print(f"  /healthz     {len(health_samples):6}  longest {max((s[1] for s in health_samples), default=0) * 1000:.1f} ms  statuses {statuses(health_samples)}")
        psql(f"DELETE FROM user_profiles WHERE id BETWEEN {base} AND {base + 31_999}")
    finally:
        process.terminate()
        process.wait(30)


if __name__ == "__main__":
    main()
