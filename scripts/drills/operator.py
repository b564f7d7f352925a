#!/usr/bin/env python3
"""Black-box drill for issue 21: what an operator types at a psql prompt, against a running service.

For each statement of README's "What an operator may run in SQL" table: the profile is cached and
followed on an event stream, the statement runs in psql, and the drill measures how long until GET
and the stream show the new content, checks it is under a higher version, and revalidates with the
ETag held before (which must not be answered 304).

  eval "$(scripts/deps.sh env)"; scripts/drills/operator.py      (PROFILE_SERVICE_BIN: the binary)
"""
import http.client, json, sys, threading, time

from drill import get, psql, seed, start_service, until


class Stream:
    """The profile's event stream: the last event's version and data."""

    def __init__(self, port, id):
        self.events = []
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.connection.request("GET", f"/users/profile/{id}/events")
        response = self.connection.getresponse()
        threading.Thread(target=self.read, args=(response,), daemon=True).start()

    def read(self, response):
        version = None
        try:
            for line in response:
                if line.startswith(b"id: "):
                    version = int(line[4:])
                elif line.startswith(b"data: ") and version is not None:
                    self.events.append((version, json.loads(line[6:])))
        except Exception:
            pass

    def close(self):
        self.connection.close()


def cached(port, id):
    status, body, _ = get(port, f"/users/profile/{id}")
    return json.loads(body) if status == 200 else None


def case(port, name, statement, expect, prepare=None):
    (id,) = seed(1, "op")
    if prepare:
        psql(prepare.format(id=id))
    for _ in range(3):
        before = cached(port, id)
    stream = Stream(port, id)
    until(lambda: stream.events, 5)
    etag = f'"{before["version"]}"'
    psql(statement.format(id=id))
    start = time.time()
    on_get = until(lambda: expect(cached(port, id)), 5)
    on_stream = until(lambda: stream.events and expect(stream.events[-1][1]), 5)
    after = cached(port, id)
    status = get(port, f"/users/profile/{id}", {"If-None-Match": etag}).status
    stream.close()
    higher = after is not None and after["version"] > before["version"]
    ok = on_get is not None and on_get <= 2 and on_stream is not None and on_stream <= 2 and higher and status != 304
    figure = lambda t: f"{t * 1000:.0f} ms" if t is not None else "not within 5 s"
    print(f"{name:44} GET {figure(on_get):>14}  stream {figure(on_stream):>14}  version {before['version']} → "
          f"{after['version'] if after else '-'}  old ETag {etag}: {status}  {'ok' if ok else 'FAILS'}")
    return ok


def main():
    process, port = start_service()
    try:
        results = [
            case(port, "UPDATE … SET display_name (version untouched)",
                 "UPDATE user_profiles SET display_name = 'psql edit' WHERE id = {id}",
                 lambda p: p and p["display_name"] == "psql edit"),
            case(port, "UPDATE … SET version = 1 on a row at version 4",
                 "UPDATE user_profiles SET version = 1, display_name = 'lowered' WHERE id = {id}",
                 lambda p: p and p["display_name"] == "lowered",
                 prepare="UPDATE user_profiles SET version = 4 WHERE id = {id}"),
            case(port, "BEGIN; DELETE; INSERT (same id); COMMIT",
                 "BEGIN; DELETE FROM user_profiles WHERE id = {id}; INSERT INTO user_profiles (id, username, display_name) "
                 "VALUES ({id}, 'reborn{id}', 'reborn'); COMMIT",
                 lambda p: p and p["display_name"] == "reborn"),
        ]
        # DELETE, then later INSERT of the same id: the old ETag must not match the new row.
        (id,) = seed(1, "op")
        for _ in range(3):
            before = cached(port, id)
        etag = f'"{before["version"]}"'
        psql(f"DELETE FROM user_profiles WHERE id = {id}")
        gone = until(lambda: get(port, f"/users/profile/{id}")[0] == 404, 5)
        psql(f"INSERT INTO user_profiles (id, username, display_name) VALUES ({id}, 'again{id}', 'created again')")
        back = until(lambda: (cached(port, id) or {}).get("display_name") == "created again", 5)
        status = get(port, f"/users/profile/{id}", {"If-None-Match": etag}).status
        after = cached(port, id)
        ok = gone is not None and back is not None and status != 304 and after["version"] > before["version"]
        print(f"{'DELETE, later INSERT of the same id':44} 404 after {gone and gone * 1000:.0f} ms, new row after "
              f"{back and back * 1000:.0f} ms, version {before['version']} → {after['version']}, old ETag {etag}: {status}  "
              f"{'ok' if ok else 'FAILS'}")
        results.append(ok)
        # 500 cached rows in one statement.
        ids = seed(500, "bulk")
        for id in ids:
            cached(port, id)
        psql(f"UPDATE user_profiles SET display_name = 'bulk edit' WHERE id IN ({','.join(map(str, ids))})")
        bulk = until(lambda: all((cached(port, id) or {}).get("display_name") == "bulk edit" for id in ids), 10)
        print(f"{'500 cached rows in one UPDATE':44} all new on GET after {f'{bulk:.2f} s' if bulk is not None else 'more than 10 s'}  "
              f"{'ok' if bulk is not None and bulk <= 2 else 'FAILS'}")
        results.append(bulk is not None and bulk <= 2)
    finally:
        process.terminate()
        process.wait(10)
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
