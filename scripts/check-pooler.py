#!/usr/bin/env python3
"""The service behind PgBouncer, as production runs it: `--database-url` a PgBouncer in
transaction mode, then in session mode (scripts/deps.sh start-pgbouncer: default_pool_size 20,
no ignore_startup_parameters), `--database-direct-url` PostgreSQL itself. For each mode, against
the built binary at its defaults:

  1. a cold read (a row inserted in psql, read through the pooler);
  2. a PUT;
  3. the read of that write, with its version as the floor;
  4. a psql UPDATE served new within 2 s (the change feed, on the direct line);
  5. 3,200 concurrent reads of rows not cached, from 16 clients: every one 200;
  6. /readyz tells the truth: ready with the feed active; 503 "database":"down" with libpq's
     reason while the pooler is stopped; ready again once it is back.

And with only the pooler as --database-url (no direct line), `serve` exits at start, saying to
give PostgreSQL itself as --database-direct-url.

  scripts/deps.sh start && scripts/deps.sh start-pgbouncer
  eval "$(scripts/deps.sh env)"
  scripts/check-pooler.py --binary .build/debug/profile-service
"""
import argparse, functools, http.client, json, os, random, subprocess, sys, tempfile, threading, time

import service_helpers
from checklist import check, failures
from service_helpers import JSON, free_port, psql

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
request = functools.partial(service_helpers.request, timeout=15)  # this check's requests wait up to 15 s


def deps(*arguments):
    done = subprocess.run([os.path.join(ROOT, "scripts/deps.sh")] + list(arguments), capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"scripts/deps.sh {' '.join(arguments)} failed ({done.returncode}):\n{done.stderr}")


def pooler_pid(mode):
    state = os.environ.get("PROFILE_STATE_DIR", os.path.join(ROOT, ".state"))
    return int(open(os.path.join(state, f"pgbouncer-{mode}", "pgbouncer.pid")).read().strip())


def readiness(port):
    try:
        status, body, _ = request(port, "GET", "/readyz")
        return status, json.loads(body)
    except (OSError, ValueError):
        return None, {}


def wait_for(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return None


def run_mode(binary, mode, pooled_url, direct_url, folder):
    port = free_port()
    log_path = os.path.join(folder, f"serve-{mode}.log")
    service = subprocess.Popen(
        [binary, "serve", "--port", str(port), "--auth", "none", "--no-access-log",
         "--database-url", pooled_url, "--database-direct-url", direct_url],
        stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    try:
        ready = wait_for(lambda: readiness(port)[1].get("change_feed", {}).get("state") == "active", 30)
        check(ready is not None, f"{mode}: the service starts behind the pooler, its change feed active on the direct line")
        base = random.randrange(10**12, 9 * 10**15)
        # 1. A cold read.
        psql(direct_url, f"INSERT INTO user_profiles (id, username, display_name) VALUES ({base}, 'pool{base}', 'Cold')")
        status, body, _ = request(port, "GET", f"/users/profile/{base}")
        check(status == 200 and b'"Cold"' in body, f"{mode}: a cold read through the pooler: {status}")
        # 2. A PUT; 3. its read, with its version as the floor.
        status, body, _ = request(port, "PUT", f"/users/profile/{base}",
                                  json.dumps({"display_name": "Written", "version": 1}), JSON)
        version = json.loads(body).get("version") if status == 200 else None
        check(status == 200 and version == 2, f"{mode}: a PUT through the pooler: {status} version {version}")
        status, body, _ = request(port, "GET", f"/users/profile/{base}?min_version={version}")
        check(status == 200 and b'"Written"' in body, f"{mode}: the read of the write: {status}")
        # 4. A psql UPDATE, served new within 2 s.
        psql(direct_url, f"UPDATE user_profiles SET display_name = 'From psql' WHERE id = {base}")
        updated = time.time()
        seen = wait_for(lambda: b'"From psql"' in request(port, "GET", f"/users/profile/{base}")[1], 2)
        check(seen is not None, f"{mode}: a psql UPDATE is served new within 2 s ({(time.time() - updated) * 1000:.0f} ms)")
        # 5. 3,200 concurrent reads of rows not cached, from 16 clients.
        first = base + 1
        psql(direct_url, f"INSERT INTO user_profiles (id, username, display_name) SELECT i, 'pool' || i, 'Row ' || i "
                         f"FROM generate_series({first}, {first + 3199}) AS i")
        statuses = {}
        lock = threading.Lock()

        def client(index):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            mine = {}
            for n in range(200):
                try:
                    status = request(port, "GET", f"/users/profile/{first + index * 200 + n}", connection=connection)[0]
                except OSError as error:
                    status = type(error).__name__
                    connection.close()
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                mine[status] = mine.get(status, 0) + 1
            with lock:
                for status, count in mine.items():
                    statuses[status] = statuses.get(status, 0) + count

        started = time.time()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        check(statuses == {200: 3200},
              f"{mode}: 3,200 concurrent cold reads from 16 clients: {statuses} in {time.time() - started:.1f} s")
        # 6. /readyz tells the truth while the pooler is away, and after.
        status, body = readiness(port)
        check(status == 200 and body.get("database") == "up", f"{mode}: /readyz ready: {status} {body.get('database')}")
        os.kill(pooler_pid(mode), 9)
        # The first check after the loss finds the connection gone; the next ones, the reconnect refused.
        down = wait_for(lambda: (lambda answer: answer if answer[1].get("database_error") else None)(readiness(port)), 10)
        reason = down[1].get("database_error", "") if down else ""
        check(down is not None and down[0] == 503 and down[1].get("database") == "down" and "refused" in reason.lower(),
              f"{mode}: pooler stopped: /readyz 503 database down, database_error \"{reason.splitlines()[0] if reason else ''}\"")
        deps("start-pgbouncer")
        back = wait_for(lambda: readiness(port)[0] == 200, 10)
        check(back is not None, f"{mode}: pooler back: /readyz 200 again")
        status, body, _ = request(port, "GET", f"/users/profile/{first + 3200 - 1}")
        check(status == 200, f"{mode}: reads through the pooler again: {status}")
        metrics = request(port, "GET", "/metrics").text
        violations = [line for line in metrics.splitlines()
                      if line.startswith('profile_service_consistency_checks_total{result="violation"}')]
        checked = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                      if line.startswith("profile_service_consistency_checks_total{"))
        check(violations and float(violations[0].rsplit(" ", 1)[1]) == 0,
              f"{mode}: the consistency observer counted no violation ({checked:.0f} checks)")
    finally:
        service.terminate()
        try:
            service.wait(timeout=15)
        except subprocess.TimeoutExpired:
            service.kill()
    if failures:
        print(open(log_path).read()[-3000:], file=sys.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build/debug/profile-service"))
    binary = os.path.abspath(parser.parse_args().binary)
    direct = os.environ.get("PROFILE_DATABASE_URL", "postgres://postgres@127.0.0.1:55432/profiles")
    deps("start-pgbouncer")
    environment = subprocess.run([os.path.join(ROOT, "scripts/deps.sh"), "env"], capture_output=True, text=True).stdout
    urls = dict(line.replace("export ", "").replace("'", "").split("=", 1) for line in environment.splitlines())
    folder = tempfile.mkdtemp(prefix="profile-pooler-")
    # Only the pooler: a clear refusal at start.
    alone = subprocess.run([binary, "serve", "--port", str(free_port()), "--auth", "none", "--database-url",
                            urls["PROFILE_PGBOUNCER_TRANSACTION_URL"]], capture_output=True, text=True, timeout=30)
    check(alone.returncode != 0 and "--database-direct-url" in alone.stderr,
          f"only a transaction pooler as --database-url: serve exits {alone.returncode}, naming --database-direct-url")
    for mode in ("transaction", "session"):
        run_mode(binary, mode, urls[f"PROFILE_PGBOUNCER_{mode.upper()}_URL"], direct, folder)
    if failures:
        sys.exit(f"check-pooler: {len(failures)} failed (logs in {folder})")
    print("check-pooler: all passed")


if __name__ == "__main__":
    main()
