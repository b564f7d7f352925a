#!/usr/bin/env python3
"""Black-box drill of handles (lookup by username, renames with reservations) under load, with a
cache that keeps being emptied.

Each run seeds 8 fresh profiles whose usernames come from a pool of 12 names of its own (`<tag>_ada`,
`<tag>_bob`…, seeded and renamed to in mixed case spellings), sets `profile_handle_settings.reservation`
to 1 second, and starts --instances instances (2) of the built binary with their defaults
(`serve --no-access-log --auth none`), on the servers of scripts/deps.sh. For --seconds (15):

  - 3 renamers, each owning some of the 8 ids, PATCH /users/profile/{id} {"username": …} with the
    `If-Match` version they know (a version-conflict 409 gives them the current one; a username-taken
    409 is expected and counted): plain renames to a random pool name and spelling, new spellings of
    the same handle, swaps of two handles through a third (waiting out the reservations), renames
    back after a random 0-1.6 s (within the 1 s reservation the owner must get its handle back), and
    deletions followed 20-300 ms later by `PUT … If-None-Match: *` {"username", "display_name"} (its old
    name or another). Right after each 200 the renamer GETs /users/by-username/{new}?min_version={acked}
    (200 of that id, version >= acked) and /users/by-username/{old} without following redirects (308,
    Location ending in /users/by-username/{new}); after a deletion its old handle must answer 404, after
    a re-creation its name must answer 200 (?min_version);
  - 1 operator renames a random profile at a psql prompt (`UPDATE user_profiles SET username = …`)
    every ~500 ms, mostly to a name free a moment before (a taken or reserved one fails: counted, fine);
  - 8 readers GET /users/by-username/{h} for random pool handles in random case spellings;
  - 1 flusher sends `flush_all` to every memcached node every 5 ms.

Every request goes to a random instance over a keep-alive connection of its thread; no redirect is
followed. Then the reservation goes back to 30 days, 2 closing renames through the API, 1 at psql and
1 deletion leave live redirects and a deleted owner's handle, and after 2 s of quiescence every pool
handle is read through every instance and compared with PostgreSQL (the holder's id, else a live
reservation's owner's current handle, else 404).

Counted as violations (exit status 1 if any run counts one):
  wrong person           a 200 whose body's username, lowered, is not the handle asked, lowered
  redirect loop          a 308 whose Location names the handle asked (or is no /users/by-username/ path)
  missed own write       a renamer's check after its own rename / deletion / re-creation answered
                         otherwise than above, and no later change of the profile (the operator's
                         rename, begun before the answer) nor the end of the 1 s reservation explains it
  own reservation refused  a rename back answered username-taken while the handle was surely still
                         reserved for the profile (the PATCH ended within 1 s of the first rename's start)
  stale after quiescence an (instance, handle) whose answer differs from PostgreSQL's after the load
Also reported: answers by status (readers, renamers' checks), renames made (API, psql), 409s, swaps,
renames back, deletions; examples name the handle, the instance (port), X-Cache and the wall-clock time.

  eval "$(scripts/deps.sh env)"; scripts/drills/handles.py [--instances N] [--seconds S] [--runs K]
      [--standby | --no-standby]    (PROFILE_SERVICE_BIN: the binary, default .build/debug/profile-service)

--standby (the default when `scripts/deps.sh env` names a standby) gives every instance
"--replica-database-url URL" of it, so misses may be read from a standby; start one that applies 300 ms
late first: PROFILE_PG_STANDBY_DELAY_MS=300 scripts/deps.sh start-standby. Without it the instances
get no standby (PROFILE_REPLICA_DATABASE_URLS is taken out of their environment). --serve-args "…" adds
flags. The flusher is strict_consistency.py's. Each run's pool (`<tag>_*`) is new: the reservations of
earlier runs (30 days for the closing writes) never meet it.
"""
import argparse, collections, http.client, json, os, random, shlex, string, subprocess, sys, threading, time

from drill import BIN, DB_URL, MEMCACHED, ROOT, STATE, KeepAliveThread, free_port, get, parsed_json, psql, run_for, stop_instances
from drill import start_instance as start_drill_instance
import service_helpers
from service_helpers import PsqlError
from strict_consistency import Background, cache_events

PROFILES = 8
WORDS = ["ada", "bob", "cy", "dee", "eve", "fay", "gus", "hal", "ivy", "jo", "kit", "lu"]  # the pool: 12
RENAMERS = 3
READERS = 8
OPERATOR_INTERVAL = 0.5
RESERVATION = 1.0  # seconds, during the load
QUIESCENCE = 2.0
PREFIX = "/users/by-username/"


def spell(name):
    """A random case spelling of `name`: as is, lower, upper or letter by letter."""
    kind = random.random()
    if kind < 0.25:
        return name
    if kind < 0.4:
        return name.lower()
    if kind < 0.55:
        return name.upper()
    return "".join(c.upper() if random.random() < 0.5 else c.lower() for c in name)


def wall(t):
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"






def start_instance(serve_args):
    # The service reads PROFILE_REPLICA_DATABASE_URLS: the standby only with --standby.
    return start_drill_instance(serve_args=serve_args, log_prefix="handles", without_env=("PROFILE_REPLICA_DATABASE_URLS",))


class Reply:
    """One answer: status (0: none), parsed JSON body (or None), headers (lower-case names), the
    monotonic start and end, the wall-clock start, the instance's port and X-Cache."""
    __slots__ = ("status", "body", "headers", "t0", "t1", "wall", "port", "xcache")

    def __init__(self, status, body, headers, t0, t1, wall_t, port):
        self.status, self.body, self.headers, self.t0, self.t1, self.wall, self.port = status, body, headers, t0, t1, wall_t, port
        self.xcache = headers.get("x-cache", "-")

    def target(self):
        """A 308's Location handle as spelled (None if it is no /users/by-username/ path)."""
        location = self.headers.get("location", "")
        if PREFIX not in location:
            return None
        return location.rsplit(PREFIX, 1)[1].split("?", 1)[0]

    def problem(self):
        return (self.body or {}).get("type", "") if isinstance(self.body, dict) else ""

    def summary(self):
        if self.status == 200 and isinstance(self.body, dict):
            what = f"200 id {self.body.get('id')} v{self.body.get('version')} {self.body.get('username')!r}"
        elif self.status == 308:
            what = f"308 → {self.headers.get('location')}"
        else:
            what = f"{self.status} {self.problem().rsplit(':', 1)[-1]}".strip()
        return f"{what} (:{self.port} X-Cache {self.xcache}, sent {wall(self.wall)}, {1000 * (self.t1 - self.t0):.1f} ms)"


class Worker(KeepAliveThread):
    """A thread with one keep-alive connection per instance."""

    def __init__(self, name, ports, stop, run):
        super().__init__(name)
        self.ports, self.stop, self.state = ports, stop, run

    def request(self, method, path, body=None, headers=None, port=None):
        port = port or random.choice(self.ports)
        wall_t = time.time()
        t0 = time.monotonic()
        answered = self.exchange(port, method, path, body, headers)
        if answered is None:
            return Reply(0, None, {}, t0, time.monotonic(), wall_t, port)
        response, raw, _, t1 = answered
        answer_headers = {k.lower(): v for k, v in response.getheaders()}
        return Reply(response.status, parsed_json(raw), answer_headers, t0, t1, wall_t, port)

    def lookup(self, handle, floor=None, counter=None):
        """GET /users/by-username/{handle}, judged for a wrong person and a redirect loop."""
        reply = self.request("GET", PREFIX + handle + (f"?min_version={floor}" if floor is not None else ""))
        (counter if counter is not None else self.state.reader_statuses)[reply.status] += 1
        self.state.judge(handle, reply, self.name)
        return reply

class Reader(Worker):
    def work(self):
        while not self.stop.is_set():
            self.lookup(spell(random.choice(self.state.pool)))


class Renamer(Worker):
    """Renames, swaps, renames back, deletes and re-creates the ids it owns, checking each of its
    own writes at once (judged after the load, against every write of the run)."""

    def __init__(self, name, ports, stop, run, ids):
        super().__init__(name, ports, stop, run)
        self.ids = ids
        self.deleted = set()

    def known(self, id):
        return self.state.known[id]

    def rename(self, id, new, check=True):
        """'ok' (checked), 'taken', 'gone' or 'error'."""
        for _ in range(6):
            version, old = self.known(id)
            reply = self.request("PATCH", f"/users/profile/{id}", {"username": new}, {"If-Match": f'"{version}"'})
            if reply.status == 200 and isinstance(reply.body, dict):
                acked = reply.body["version"]
                self.state.known[id] = (acked, reply.body["username"])
                self.state.log_rename(id, acked, old, reply.body["username"], reply.t0, reply.t1, self.name)
                if check:
                    self.check_rename(id, acked, old, reply.body["username"], reply)
                return "ok", reply
            if reply.status == 409 and reply.problem().endswith("username-taken"):
                self.state.counts["409 username-taken (API renames)"] += 1
                return "taken", reply
            if reply.status == 409 and isinstance(reply.body, dict) and isinstance(reply.body.get("current"), dict):
                self.state.counts["409 version-conflict (API renames)"] += 1
                current = reply.body["current"]
                self.state.known[id] = (current["version"], current["username"])
                continue
            self.state.counts[f"rename answered {reply.status} {reply.problem().rsplit(':', 1)[-1]}".strip()] += 1
            time.sleep(0.01)
            return ("gone" if reply.status == 404 else "error"), reply
        return "error", None

    def check_rename(self, id, acked, old, new, ack):
        checks = self.state.renamer_statuses
        fresh = self.lookup(spell(new), floor=acked, counter=checks)
        self.state.checks.append(("rename-new", id, acked, old, new, ack, fresh))
        if old.lower() != new.lower():
            former = self.lookup(spell(old), counter=checks)
            self.state.checks.append(("rename-old", id, acked, old, new, ack, former))

    def pick_name(self, avoid=()):
        """A random spelling of a pool name none of this renamer's ids holds (as far as it knows)."""
        avoid = {a.lower() for a in avoid} | {self.known(id)[1].lower() for id in self.ids if id not in self.deleted}
        return spell(random.choice([n for n in self.state.pool if n.lower() not in avoid]))

    def work(self):
        while not self.stop.is_set():
            for id in list(self.deleted):
                self.recreate(id, None)
            id = random.choice(self.ids)
            if id in self.deleted:
                continue
            action = random.random()
            if action < 0.45:
                self.rename(id, self.pick_name([self.known(id)[1]]))
            elif action < 0.52:
                current = self.known(id)[1]
                respelled = spell(current)
                if respelled != current:
                    self.rename(id, respelled)
            elif action < 0.67:
                self.swap(id, random.choice([i for i in self.ids if i != id]))
            elif action < 0.85:
                self.rename_back(id)
            else:
                self.delete_and_recreate(id)

    def retry_rename(self, id, new, seconds):
        """Renames until 200 or `seconds` (the other's reservation may need to end first)."""
        deadline = time.monotonic() + seconds
        while not self.stop.is_set():
            outcome, _ = self.rename(id, new)
            if outcome != "taken" or time.monotonic() > deadline:
                return outcome
            time.sleep(0.15)
        return "stopped"

    def swap(self, a, b):
        if b in self.deleted:
            return
        name_a, name_b = self.known(a)[1], self.known(b)[1]
        for _ in range(3):
            outcome, _ = self.rename(a, self.pick_name([name_a, name_b]))
            if outcome == "ok":
                break
        else:
            return
        if self.retry_rename(b, spell(name_a), RESERVATION + 1.5) != "ok":
            return
        if self.retry_rename(a, spell(name_b), RESERVATION + 1.5) == "ok":
            self.state.counts["swaps completed"] += 1

    def rename_back(self, id):
        version, old = self.known(id)
        outcome, first = self.rename(id, self.pick_name([old]))
        if outcome != "ok":
            return
        time.sleep(random.uniform(0, RESERVATION * 1.6))
        if self.stop.is_set():
            return
        outcome, back = self.rename(id, spell(old))
        if outcome == "ok":
            self.state.counts["renames back"] += 1
        elif outcome == "taken":
            self.state.counts["renames back refused (username-taken)"] += 1
            if back.t1 < first.t0 + RESERVATION - 0.02:
                self.state.refused.append((id, old, first, back))

    def delete_and_recreate(self, id):
        for _ in range(4):
            version, name = self.known(id)
            reply = self.request("DELETE", f"/users/profile/{id}", headers={"If-Match": f'"{version}"'})
            if reply.status == 204:
                break
            if reply.status == 409 and isinstance(reply.body, dict) and isinstance(reply.body.get("current"), dict):
                current = reply.body["current"]
                self.state.known[id] = (current["version"], current["username"])
                continue
            self.state.counts[f"DELETE answered {reply.status}"] += 1
            return
        else:
            return
        self.deleted.add(id)
        self.state.log_delete(id, version, name, reply.t0, reply.t1, self.name)
        self.state.counts["deletions"] += 1
        former = self.lookup(spell(name), counter=self.state.renamer_statuses)
        self.state.checks.append(("deleted", id, version, name, None, reply, former))
        time.sleep(random.uniform(0.02, 0.3))
        self.recreate(id, name if random.random() < 0.5 else self.pick_name([name]))

    def recreate(self, id, name):
        """PUT If-None-Match: * under `name` (None: its old name), else its old name, else any free one."""
        old = self.known(id)[1]
        candidates = ([name] if name else []) + [spell(old)] + [self.pick_name() for _ in range(6)]
        for candidate in candidates:
            if self.stop.is_set():
                return
            reply = self.request("PUT", f"/users/profile/{id}", {"username": candidate, "display_name": "Again"},
                                 {"If-None-Match": "*"})
            if reply.status == 201 and isinstance(reply.body, dict):
                self.deleted.discard(id)
                created = reply.body["version"]
                self.state.known[id] = (created, reply.body["username"])
                self.state.log_rename(id, created, None, reply.body["username"], reply.t0, reply.t1, self.name)
                self.state.counts["re-creations"] += 1
                fresh = self.lookup(spell(candidate), floor=created, counter=self.state.renamer_statuses)
                self.state.checks.append(("recreated", id, created, None, reply.body["username"], reply, fresh))
                return
            if reply.status == 409 and reply.problem().endswith("username-taken"):
                self.state.counts["409 username-taken (re-creations)"] += 1
                continue
            self.state.counts[f"re-creation answered {reply.status} {reply.problem().rsplit(':', 1)[-1]}".strip()] += 1
            return


class Operator(threading.Thread):
    """Renames a random profile at psql every ~OPERATOR_INTERVAL."""

    def __init__(self, stop, run):
        super().__init__(daemon=True, name="operator")
        self.stop, self.state = stop, run
        self.failure = None

    def rename(self, id, new):
        """(old, new, version) or None; logged as a write of the run. `new` None: a pool name no
        one held nor had reserved as the statement began, spelled at random by PostgreSQL."""
        if new is None:
            pool = ",".join(f"'{h}'" for h in self.state.pool)
            new_sql = f"""SELECT (SELECT string_agg(CASE WHEN random() < 0.5 THEN upper(c) ELSE c END, '' ORDER BY k)
                    FROM regexp_split_to_table(q.h, '') WITH ORDINALITY AS t(c, k))
                FROM unnest(ARRAY[{pool}]::text[]) AS q(h)
                WHERE NOT EXISTS (SELECT FROM user_profiles WHERE profile_handle(username) = q.h)
                  AND NOT EXISTS (SELECT FROM username_reservations AS r WHERE r.handle = q.h AND r.reserved_until > now())
                ORDER BY random() LIMIT 1"""
        else:
            new_sql = f"SELECT '{new}'"
        t0 = time.monotonic()
        try:
            row = psql(f"UPDATE user_profiles AS p SET username = n.name FROM "
                       f"(SELECT id, username FROM user_profiles WHERE id = {id} FOR UPDATE) AS o, ({new_sql}) AS n(name) "
                       f"WHERE p.id = o.id RETURNING o.username, p.username, p.version", timeout=30)
        except PsqlError as error:
            kind = "reserved" if "username_reserved" in error.stderr or "is reserved" in error.stderr else \
                "taken" if "user_profiles_handle_key" in error.stderr or "duplicate key" in error.stderr else "other"
            self.state.counts[f"psql renames failed ({kind})"] += 1
            if kind == "other":
                self.state.operator_errors.append(error.stderr.strip()[:200])
            return None
        t1 = time.monotonic()
        if not row:
            self.state.counts["psql renames of nothing (deleted, or no free name)"] += 1
            return None
        old, new, version = row.split("|")
        self.state.log_rename(id, int(version), old, new, t0, t1, "operator")
        self.state.counts["psql renames"] += 1
        return old, new, int(version)

    def run(self):
        try:
            next_at = time.monotonic()
            while not self.stop.is_set():
                # Mostly a name free a moment ago (the rename then mostly succeeds), else any.
                new = None if random.random() < 0.7 else spell(random.choice(self.state.pool))
                self.rename(random.choice(self.state.ids), new)
                next_at = max(next_at + random.uniform(0.5, 1.5) * OPERATOR_INTERVAL, time.monotonic())
                self.stop.wait(next_at - time.monotonic())
        except Exception as error:
            self.failure = f"operator: {error!r}"


class Run:
    """What one run saw, shared by its threads (appends and Counter updates under the GIL)."""

    def __init__(self, ids, pool, seeded):
        self.ids, self.pool = ids, pool
        self.known = dict(seeded)  # id → (version, username), as the renamers last saw it
        self.writes = collections.defaultdict(list)  # id → [(version, old, new or None (deleted), t0, t1, who)]
        self.checks = []  # (kind, id, version, old, new, write reply, check reply)
        self.refused = []  # (id, handle, first rename's reply, refused rename back's reply)
        self.counts = collections.Counter()
        self.reader_statuses = collections.Counter()
        self.renamer_statuses = collections.Counter()
        self.wrong_person = []  # (asked, reply, thread)
        self.loops = []
        self.operator_errors = []

    def log_rename(self, id, version, old, new, t0, t1, who):
        self.writes[id].append((version, old, new, t0, t1, who))
        if who != "operator":
            self.counts["API renames" if old is not None else "API creations"] += 1

    def log_delete(self, id, version, old, t0, t1, who):
        self.writes[id].append((version + 1, old, None, t0, t1, who))  # after `version`: a later change

    def judge(self, asked, reply, thread):
        if reply.status == 200 and isinstance(reply.body, dict):
            if str(reply.body.get("username", "")).lower() != asked.lower():
                self.wrong_person.append((asked, reply, thread))
        elif reply.status == 308:
            target = reply.target()
            if target is None or target.lower() == asked.lower():
                self.loops.append((asked, reply, thread))

    def later(self, id, version, before):
        """The writes of `id` above `version` begun before `before` (monotonic)."""
        return [w for w in self.writes[id] if w[0] > version and w[3] < before]

    def missed(self):
        """The checks of the renamers' own writes that nothing explains: (kind, id, version, old, new, write, check, why)."""
        found = []
        for kind, id, version, old, new, write, check in self.checks:
            later = self.later(id, version, check.t1)
            later_handles = {w[2].lower() for w in later if w[2]}
            deleted_later = any(w[2] is None for w in later)
            body = check.body if isinstance(check.body, dict) else {}
            if kind in ("rename-new", "recreated"):
                if check.status == 200 and body.get("id") == id and body.get("version", 0) >= version:
                    continue
                if later and ((check.status == 308 and (check.target() or "").lower() in later_handles)
                              or (check.status == 200 and body.get("id") == id) or (check.status == 404 and deleted_later)):
                    continue
                found.append((kind, id, version, old, new, write, check, "expected 200 of the id at >= the acked version"))
            elif kind == "rename-old":
                if check.status == 308 and (check.target() or "").lower() == new.lower():
                    if check.target() != new:
                        self.counts["308 Location spelled otherwise than the username"] += 1
                    continue
                if later and ((check.status == 308 and (check.target() or "").lower() in later_handles)
                              or (check.status == 200 and body.get("id") == id and body.get("version", 0) > version)
                              or (check.status == 404 and deleted_later)):
                    continue
                if check.t1 > write.t0 + RESERVATION and check.status in (404, 200):
                    self.counts["old-handle checks after the reservation's end (not judged)"] += 1
                    continue
                found.append((kind, id, version, old, new, write, check, f"expected 308 to {PREFIX}{new}"))
            elif kind == "deleted":
                if check.status == 404:
                    continue
                found.append((kind, id, version, old, new, write, check, "expected 404 (owner deleted)"))
        return found


def expected_answers(pool):
    """handle → ('200', id) | ('308', handle of the reserving owner's username) | ('404',), from PostgreSQL now."""
    handles = ",".join(f"'{h}'" for h in pool)
    rows = psql(f"""
        SELECT q.h, coalesce(p.id::text, ''), coalesce(profile_handle(o.username), '')
        FROM unnest(ARRAY[{handles}]::text[]) AS q(h)
        LEFT JOIN user_profiles AS p ON profile_handle(p.username) = q.h
        LEFT JOIN username_reservations AS r ON r.handle = q.h AND r.reserved_until > now()
        LEFT JOIN user_profiles AS o ON o.id = r.profile_id""")
    expected = {}
    for line in rows.splitlines():
        handle, holder, owner_handle = line.split("|")
        expected[handle] = ("200", int(holder)) if holder else ("308", owner_handle) if owner_handle else ("404",)
    return expected


def answered(reply):
    if reply.status == 200 and isinstance(reply.body, dict):
        return ("200", reply.body.get("id"))
    if reply.status == 308:
        return ("308", (reply.target() or "?").lower())
    if reply.status == 404:
        return ("404",)
    return (f"status {reply.status}",)


def seed_run(tag):
    pool = [f"{tag}_{word}" for word in WORDS]
    base = int(time.time() * 1000) % 1_000_000_000 * 1000 + 6_000_000_000_000
    ids = [base + i for i in range(PROFILES)]
    names = [spell(pool[i]) for i in range(PROFILES)]
    values = ",".join(f"({id}, '{name}', 'Handle drill')" for id, name in zip(ids, names))
    psql(f"INSERT INTO user_profiles (id, username, display_name) VALUES {values}")
    return ids, pool, {id: (1, name) for id, name in zip(ids, names)}


def closing_writes(state, ports):
    """With the reservation back at 30 days: 2 renames through the API, 1 at psql and 1 deletion,
    so that the comparison after quiescence meets live redirects and a deleted owner's handle."""
    closer = Renamer("closer", ports, threading.Event(), state, state.ids)
    live = [id for id in state.ids if psql(f"SELECT count(*) FROM user_profiles WHERE id = {id}") == "1"]
    random.shuffle(live)
    done = []
    for id in live[:2]:
        version, name = psql(f"SELECT version, username FROM user_profiles WHERE id = {id}").split("|")
        state.known[id] = (int(version), name)
        for _ in range(12):
            outcome, _ = closer.rename(id, closer.pick_name([name]))
            if outcome == "ok":
                done.append(f"API {name} → {state.known[id][1]}")
                break
    operator = Operator(threading.Event(), state)
    if len(live) > 2:
        for candidate in [None] + random.sample(state.pool, len(state.pool)):
            renamed = operator.rename(live[2], candidate and spell(candidate))
            if renamed:
                done.append(f"psql {renamed[0]} → {renamed[1]}")
                break
    if len(live) > 3:
        name = psql(f"SELECT username FROM user_profiles WHERE id = {live[3]}")
        if psql(f"DELETE FROM user_profiles WHERE id = {live[3]} RETURNING id"):
            done.append(f"deleted the holder of {name}")
    for connection in closer.connections.values():
        connection.close()
    return done


def quiescence_check(state, ports):
    """(port, handle, answered, expected) that differ; a handle whose expectation changed while it
    was read (a reservation ending) is read again."""
    stale = []
    client = Worker("quiescence", ports, None, state)
    pending = list(state.pool)
    for attempt in range(3):
        before = expected_answers(pending)
        answers = {(port, h): client.request("GET", PREFIX + spell(h), port=port) for h in pending for port in ports}
        after = expected_answers(pending)
        moved = [h for h in pending if before[h] != after[h]]
        for (port, h), reply in answers.items():
            if h not in moved and answered(reply) != before[h]:
                stale.append((port, h, reply, before[h]))
        pending = moved
        if not pending:
            break
    for connection in client.connections.values():
        connection.close()
    return stale


def standby_url():
    """The standby scripts/deps.sh runs for these servers, if any."""
    url = os.environ.get("PROFILE_REPLICA_DATABASE_URLS", "").split(",")[0]
    if url:
        return url
    done = subprocess.run([os.path.join(ROOT, "scripts/deps.sh"), "env"], stdout=subprocess.PIPE, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("export PROFILE_REPLICA_DATABASE_URLS="):
            return line.split("=", 1)[1].strip("'").split(",")[0]
    return None


def run_once(number, args, serve_args):
    tag = "".join(random.choice(string.ascii_lowercase) for _ in range(2)) + "".join(random.choice(string.digits) for _ in range(2))
    ids, pool, seeded = seed_run(tag)
    state = Run(ids, pool, seeded)
    psql(f"UPDATE profile_handle_settings SET reservation = '{RESERVATION:g} second'")
    try:
        ports = [start_instance(serve_args) for _ in range(args.instances)]
        stop = threading.Event()
        shares = [ids[i::RENAMERS] for i in range(RENAMERS)]
        renamers = [Renamer(f"renamer{i}", ports, stop, state, share) for i, share in enumerate(shares)]
        readers = [Reader(f"reader{i}", ports, stop, state) for i in range(READERS)]
        operator = Operator(stop, state)
        flusher = Background(stop)
        threads = renamers + readers + [operator, flusher]
        elapsed = run_for(args.seconds, threads, stop)
        psql("UPDATE profile_handle_settings SET reservation = '30 days'")
        closing = closing_writes(state, ports)
        time.sleep(QUIESCENCE)
        stale = quiescence_check(state, ports)
        cache_errors = sum(cache_events(port, "error") for port in ports)
    finally:
        psql("UPDATE profile_handle_settings SET reservation = '30 days'")
        stop_instances()

    missed = state.missed()
    missed_kinds = collections.Counter(m[0] for m in missed)
    failures = [t.failure for t in renamers + readers + [operator] if t.failure]
    figures = {
        "run": number, "pool": f"{tag}_*", "instances": args.instances, "standby": bool(args.standby_url),
        "seconds": round(elapsed, 2),
        "reader_lookups_per_s": round(sum(state.reader_statuses.values()) / elapsed, 1),
        "reader_answers": {str(k): v for k, v in sorted(state.reader_statuses.items())},
        "renamer_check_answers": {str(k): v for k, v in sorted(state.renamer_statuses.items())},
        "counts": dict(sorted(state.counts.items())), "flushes": flusher.flushes,
        "flush_errors": flusher.flusher.errors, "memcached_errors": cache_errors,
        "wrong_person": len(state.wrong_person), "redirect_loop": len(state.loops),
        "missed_own_write": len(missed), "missed_by_kind": dict(missed_kinds),
        "own_reservation_refused": len(state.refused), "stale_after_quiescence": len(stale),
    }
    figures["violations"] = sum(figures[k] for k in ("wrong_person", "redirect_loop", "missed_own_write",
                                                     "own_reservation_refused", "stale_after_quiescence"))
    c = state.counts
    print(f"run {number} (pool {tag}_*, {args.instances} instances, standby {'on' if args.standby_url else 'off'}):"
          f" {figures['reader_lookups_per_s']:.0f} reader lookups/s; renames {c['API renames']} API + {c['psql renames']} psql,"
          f" {c['409 username-taken (API renames)']} username-taken, {c['swaps completed']} swaps,"
          f" {c['renames back']} renames back, {c['deletions']} deletions")
    print(f"  readers' answers {figure_text(state.reader_statuses)}; renamers' checks {figure_text(state.renamer_statuses)}")
    print(f"  wrong person {len(state.wrong_person)}, redirect loop {len(state.loops)}, missed own write {len(missed)}"
          f" {dict(missed_kinds) or ''}, own reservation refused {len(state.refused)}, stale after quiescence {len(stale)}")
    print(f"  closing writes: {'; '.join(closing) or 'none'}")
    for asked, reply, thread in state.wrong_person[:3]:
        print(f"  wrong person: {thread} asked {asked!r}: {reply.summary()}")
    for asked, reply, thread in state.loops[:3]:
        print(f"  redirect loop: {thread} asked {asked!r}: {reply.summary()}")
    for kind, id, version, old, new, write, check, why in missed[:5]:
        print(f"  missed own write ({kind}): id …{id % 1000} v{version} {old!r} → {new!r} acked {wall(write.wall)}"
              f" (+{1000 * (write.t1 - write.t0):.0f} ms); check {check.summary()}; {why}")
        for w in state.writes[id]:
            if abs(w[3] - check.t0) < 3:
                print(f"      write of id …{id % 1000}: v{w[0]} {w[1]!r} → {w[2]!r} by {w[5]},"
                      f" {1000 * (w[3] - check.t0):+.0f}..{1000 * (w[4] - check.t0):+.0f} ms from the check's start")
    for id, handle, first, back in state.refused[:3]:
        print(f"  own reservation refused: id …{id % 1000} left {handle!r} ({first.summary()}); rename back {back.summary()}")
    for port, handle, reply, expected in stale[:5]:
        print(f"  stale after quiescence: :{port} {handle}: {reply.summary()}; PostgreSQL: {' '.join(map(str, expected))}")
    for error in state.operator_errors[:3]:
        print(f"  psql error: {error}")
    for failure in failures:
        print(f"  thread failed: {failure}")
    print(json.dumps(figures))
    sys.stdout.flush()
    return figures


def figure_text(counter):
    return ", ".join(f"{k}: {v}" for k, v in sorted(counter.items())) or "none"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--standby", action=argparse.BooleanOptionalAction, default=None,
                        help="instances read misses from the standby of scripts/deps.sh (default: if one is up)")
    parser.add_argument("--serve-args", default="", help="more `serve` flags for every instance")
    args = parser.parse_args()

    serve_args = shlex.split(args.serve_args)
    args.standby_url = None
    if args.standby is not False:
        args.standby_url = standby_url()
        if args.standby and not args.standby_url:
            raise SystemExit("--standby: no standby is up; PROFILE_PG_STANDBY_DELAY_MS=300 scripts/deps.sh start-standby")
        if args.standby_url:
            serve_args += ["--replica-database-url", args.standby_url]
            delay = service_setting(args.standby_url, "recovery_min_apply_delay")
            print(f"standby {args.standby_url} (recovery_min_apply_delay {delay})")
    results = []
    try:
        for number in range(1, args.runs + 1):
            results.append(run_once(number, args, serve_args))
    finally:
        stop_instances()
    if len(results) > 1:
        keys = ["wrong_person", "redirect_loop", "missed_own_write", "own_reservation_refused", "stale_after_quiescence"]
        print("run " + " ".join(f"{k:>14.14}" for k in keys))
        for figures in results:
            print(f"{figures['run']:>3} " + " ".join(f"{figures[k]:>14}" for k in keys))
    sys.exit(1 if any(figures["violations"] for figures in results) else 0)


def service_setting(url, name):
    try:
        return service_helpers.psql(url, f"SHOW {name}", timeout=10)
    except (PsqlError, subprocess.TimeoutExpired):
        return "?"


if __name__ == "__main__":
    main()
