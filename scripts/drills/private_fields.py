#!/usr/bin/env python3
"""Black-box drill of a field only its owner reads: an `email` declared owner-only, read by 50 other
users singly, in lists, by username, by revalidation and on event streams, through two instances
and the nginx gateway with its shared cache on, while the owners change their emails and memcached
keeps being emptied.

Each run makes a database of its own (`profiles_private_<tag>` on the PostgreSQL of
scripts/deps.sh), migrates it, and declares the field with the migration an operator writes:

  ALTER TABLE user_profiles ADD COLUMN email text;
  INSERT INTO profile_fields (name, kind, max_length, position, read_by) VALUES ('email', 'email', 254, 5, 'owner');

It starts --instances instances (2) of the built binary with their defaults and JWT authentication
(`serve --no-access-log --jwt-secret-file F`) on that database and the memcached of scripts/deps.sh,
and deploy/nginx.conf in front of them with deploy/nginx-cache.conf included (the gateway's shared
cache). It seeds --owners profiles (20), each of which sets its email by PATCH with its own token,
and mints tokens for 50 other users, each owning a profile of its own (also with an email), plus one
administrator. For --seconds (20):

  - 4 owner threads PATCH {"email": "u<id>.<n>@drill.example"} on their profiles with the owner's token,
    then read their profile back at the version answered (`?min_version`) through a random instance
    or the gateway: the answer must carry the email just written (read-your-writes);
  - 4 reader threads, each request as one of the 50 users (or with no token, one in 5), to a random
    instance or the gateway: a profile by id, a list of 10 ids (the reader's own among them, one in 4),
    a profile by username, a revalidation with an ETag it was given earlier;
  - 12 event streams of other users (single and list streams, half through the gateway) and one
    stream per owner of the first 4 profiles, with the owner's token;
  - 1 flusher sends `flush_all` to every memcached node every 5 ms.

Counted as violations (exit status 1 if any run counts one):
  leaked           an answer to a user (or to no token) that carries an email other than that user's own:
                   any `"email"` member of a profile not the reader's, in any body, list or event
  missed own write an owner's read at the version its PATCH answered without the email it wrote
  stale after load 2 s after the load, an owner's read (each instance, the gateway) or an owner's
                   stream whose last email is not the one PostgreSQL holds

Also reported: answers by route and status, the gateway's cache statuses, events read, and examples.

  eval "$(scripts/deps.sh env)"; scripts/drills/private_fields.py [--instances N] [--seconds S] [--owners N]
      [--runs K]    (PROFILE_SERVICE_BIN: the binary, default .build/debug/profile-service)
"""
import argparse, collections, http.client, json, os, random, re, subprocess, sys, tempfile, threading, time

from drill import BIN, DB_URL, MEMCACHED, ROOT, STATE, KeepAliveThread, parsed_json, run_for, start_instance, stop_instances
import service_helpers
from strict_consistency import Background

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # deploy_checks
from deploy_checks.common import nginx_local_config, nginx_test  # noqa: E402

EMAIL_MIGRATION = ("ALTER TABLE user_profiles ADD COLUMN email text; "
                   "INSERT INTO profile_fields (name, kind, max_length, position, read_by) "
                   "VALUES ('email', 'email', 254, 5, 'owner')")
EMAIL = re.compile(rb'"email":(?:"u(\d+)\.\d+@drill\.example"|null)')
READERS = 50


def email(id, n):
    return f"u{id}.{n}@drill.example"


class Database:
    """A database of the drill's own on the server of scripts/deps.sh, migrated, with the email field."""

    def __init__(self, tag):
        self.name = f"profiles_private_{tag}"
        self.admin_url = DB_URL.rsplit("/", 1)[0] + "/postgres"
        self.url = DB_URL.rsplit("/", 1)[0] + "/" + self.name
        service_helpers.psql(self.admin_url, f"CREATE DATABASE {self.name}")
        subprocess.run([BIN, "migrate", "--database-url", self.url, "--migrations-directory", os.path.join(ROOT, "migrations")],
                       check=True, capture_output=True)
        self.psql(EMAIL_MIGRATION)

    def psql(self, sql):
        return service_helpers.psql(self.url, sql)

    def drop(self):
        service_helpers.psql(self.admin_url, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                                             f"WHERE database = '{self.name}' AND NOT active")
        service_helpers.psql(self.admin_url, f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


class Gateway:
    """deploy/nginx.conf with deploy/nginx-cache.conf included, in front of `ports`."""

    def __init__(self, ports):
        self.tmp = tempfile.mkdtemp(prefix="private-gateway-")
        os.chmod(self.tmp, 0o755)
        self.port = service_helpers.free_port()
        conf = nginx_local_config(self.tmp, self.port, ports)
        with open(os.path.join(ROOT, "deploy/nginx-cache.conf")) as f:
            cache = f.read().replace("/var/cache/nginx/profile-gateway", os.path.join(self.tmp, "cache"))
        with open(os.path.join(self.tmp, "nginx-cache.conf"), "w") as f:
            f.write(cache)
        with open(conf) as f:
            text = f.read()
        assert "# include nginx-cache.conf;" in text, "deploy/nginx.conf lost its include line"
        with open(conf, "w") as f:
            f.write(text.replace("# include nginx-cache.conf;", "include nginx-cache.conf;"))
        nginx_test(self.tmp, conf)
        self.process = subprocess.Popen(["nginx", "-p", self.tmp + "/", "-c", conf, "-g", "daemon off;"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                service_helpers.get(self.port, "/healthz")
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("nginx did not start")

    def access_log(self):
        with open(os.path.join(self.tmp, "logs/access.log")) as f:
            return f.read().splitlines()

    def stop(self):
        self.process.terminate()
        self.process.wait(10)


class Run:
    def __init__(self, args, ports, gateway, db, owners, readers, tokens):
        self.args, self.ports, self.gateway, self.db = args, ports, gateway, db
        self.owners, self.readers, self.tokens = owners, readers, tokens
        self.targets = ports + [gateway.port]
        self.lock = threading.Lock()
        self.violations = collections.Counter()
        self.examples = collections.defaultdict(list)
        self.answers = collections.Counter()
        self.latest = {id: 1 for id in owners}  # the last email number each owner's PATCH was answered
        self.usernames = {}
        self.events = collections.Counter()

    def violation(self, kind, example):
        with self.lock:
            self.violations[kind] += 1
            if len(self.examples[kind]) < 5:
                self.examples[kind].append(example)

    def count(self, key):
        with self.lock:
            self.answers[key] += 1

    def check_body(self, raw, reader, where):
        """Every email member in `raw` must be `reader`'s own (the profile it owns); `reader` None: none."""
        for match in EMAIL.finditer(raw or b""):
            owner = int(match.group(1)) if match.group(1) else None
            if reader is None or owner != reader:
                self.violation("leaked", f"{where}: {match.group(0).decode()} to {reader or 'no token'}")

    def bearer(self, subject):
        return {"Authorization": f"Bearer {self.tokens[subject]}"}


class Owner(KeepAliveThread):
    def __init__(self, run, ids, stop):
        super().__init__(f"owner-{ids[0]}")
        self.run_, self.ids, self.stop = run, ids, stop

    def work(self):
        run = self.run_
        while not self.stop.is_set():
            id = random.choice(self.ids)
            n = run.latest[id] + 1
            answer = self.exchange(random.choice(run.targets), "PATCH", f"/users/profile/{id}",
                                   headers={**run.bearer(id), "Content-Type": "application/merge-patch+json"},
                                   body={"email": email(id, n)})
            if answer is None:
                continue
            response, raw, _, _ = answer
            run.count(f"owner PATCH {response.status}")
            if response.status != 200:
                continue
            written = parsed_json(raw)
            with run.lock:
                run.latest[id] = max(run.latest[id], n)
            target = random.choice(run.targets)
            answer = self.exchange(target, "GET", f"/users/profile/{id}?min_version={written['version']}", headers=run.bearer(id))
            if answer is None:
                continue
            response, raw, _, _ = answer
            run.count(f"owner GET {response.status}")
            body = parsed_json(raw) or {}
            if response.status != 200 or (body.get("version") == written["version"] and body.get("email") != email(id, n)):
                run.violation("missed own write", f"{id} wrote {email(id, n)} at v{written['version']}, read "
                                                  f"{response.status} v{body.get('version')} {body.get('email')} via {target}")


class Reader(KeepAliveThread):
    def __init__(self, run, stop):
        super().__init__("reader")
        self.run_, self.stop, self.tags = run, stop, {}

    def work(self):
        run = self.run_
        while not self.stop.is_set():
            reader = None if random.random() < 0.2 else random.choice(run.readers)
            headers = run.bearer(reader) if reader else {}
            target = random.choice(run.targets)
            kind = random.choice(["id", "list", "username", "revalidate"])
            id = random.choice(run.owners)
            if kind == "id":
                path = f"/users/profile/{id}"
            elif kind == "list":
                ids = random.sample(run.owners, 9) + [reader if reader and random.random() < 0.25 else random.choice(run.owners)]
                path = "/users/profiles?ids=" + ",".join(map(str, ids))
            elif kind == "username":
                path = f"/users/by-username/{run.usernames[id]}"
            else:
                path = f"/users/profile/{id}"
                tag = self.tags.get((id, reader))
                if tag:
                    headers = dict(headers, **{"If-None-Match": tag})
            answer = self.exchange(target, "GET", path, headers=headers)
            if answer is None:
                continue
            response, raw, _, _ = answer
            run.count(f"reader {kind} {response.status}")
            run.check_body(raw, reader, f"{kind} {path} via {target} ({response.status}, X-Cache {response.getheader('X-Cache')})")
            if kind in ("id", "revalidate") and response.status == 200:
                self.tags[(id, reader)] = response.getheader("ETag")


class Stream(threading.Thread):
    """One event stream as `subject` (its token); every event's data checked, the last email kept."""

    def __init__(self, run, port, path, subject, stop):
        super().__init__(daemon=True, name=f"stream-{path}")
        self.run_, self.port, self.path, self.subject, self.stop = run, port, path, subject, stop
        self.last_email, self.failure, self.opened = None, None, threading.Event()

    def run(self):
        run = self.run_
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            connection.request("GET", self.path, headers=run.bearer(self.subject))
            response = connection.getresponse()
            self.opened.set()
            if response.status != 200:
                self.failure = f"{self.path} via {self.port}: {response.status}"
                return
            for line in response:
                if self.stop.is_set():
                    break
                if line.startswith(b"data:"):
                    with run.lock:
                        run.events["event"] += 1
                    run.check_body(line, self.subject, f"stream {self.path} via {self.port}")
                    found = re.search(rb'"email":"([^"]+)"', line)
                    if found:
                        self.last_email = found.group(1).decode()
            connection.close()
        except (OSError, http.client.HTTPException) as error:
            if not self.stop.is_set():
                self.failure = f"{self.path} via {self.port}: {error!r}"
        finally:
            self.opened.set()


def mint(secret, subject, scope=None):
    command = [BIN, "token", "--sub", str(subject), "--ttl", "7200", "--jwt-secret-file", secret]
    return subprocess.run(command + (["--scope", scope] if scope else []), check=True, capture_output=True, text=True).stdout.strip()


def one_run(args, index):
    tag = f"{int(time.time()) % 100000}{index}"
    db = Database(tag)
    secret = os.path.join(tempfile.mkdtemp(prefix="private-drill-"), "jwt-secret")
    with open(secret, "w") as f:
        f.write("private-fields-drill-" + "s" * 40)
    gateway = None
    try:
        ports = [start_instance(database_url=db.url, log_prefix="private", auth=("--jwt-secret-file", secret))
                 for _ in range(args.instances)]
        gateway = Gateway(ports)
        base = 7_000_000_000_000 + int(time.time()) % 1_000_000 * 1000
        owners = [base + i for i in range(args.owners)]
        readers = [base + 500 + i for i in range(READERS)]
        tokens = {subject: mint(secret, subject) for subject in owners + readers}
        run = Run(args, ports, gateway, db, owners, readers, tokens)
        # Every profile has an email, set by its owner through the API.
        for id in owners + readers:
            run.usernames[id] = f"p{tag}_{id % 100000}"
            status, body, _ = service_helpers.request(
                ports[0], "PUT", f"/users/profile/{id}", body=json.dumps({"username": run.usernames[id], "display_name": "Drill"}),
                headers={**run.bearer(id), "Content-Type": "application/json", "If-None-Match": "*"})
            assert status == 201, (status, body[:200])
            status, body, _ = service_helpers.request(
                ports[0], "PATCH", f"/users/profile/{id}", body=json.dumps({"email": email(id, 1)}),
                headers={**run.bearer(id), "Content-Type": "application/merge-patch+json"})
            assert status == 200 and json.loads(body)["email"] == email(id, 1), (status, body[:200])

        stop = threading.Event()
        streams = []
        for n in range(12):
            subject = random.choice(readers)
            port = gateway.port if n % 2 else random.choice(ports)
            ids = random.sample(owners, 5)
            path = f"/users/profile/{ids[0]}/events" if n % 3 else "/users/profiles/events?ids=" + ",".join(map(str, ids))
            streams.append(Stream(run, port, path, subject, stop))
        owner_streams = [Stream(run, random.choice(run.targets), f"/users/profile/{id}/events", id, stop) for id in owners[:4]]
        for stream in streams + owner_streams:
            stream.start()
            stream.opened.wait(10)
        chunks = [owners[i::4] for i in range(4)]
        threads = [Owner(run, chunk, stop) for chunk in chunks] + [Reader(run, stop) for _ in range(4)] + [Background(stop)]
        ran = run_for(args.seconds, threads, stop)
        failures = [t.failure for t in threads if getattr(t, "failure", None)] + [s.failure for s in streams + owner_streams if s.failure]

        # Quiescence: every owner reads its last email everywhere; its stream heard it last.
        time.sleep(2)
        held = dict(line.split("|") for line in db.psql(
            f"SELECT id, email FROM user_profiles WHERE id IN ({','.join(map(str, owners))})").splitlines())
        for id in owners:
            for target in run.targets:
                status, body, _ = service_helpers.get(target, f"/users/profile/{id}", headers=run.bearer(id))
                found = json.loads(body).get("email") if status == 200 else None
                if found != held[str(id)]:
                    run.violation("stale after load", f"{id} via {target}: {found}, PostgreSQL {held[str(id)]}")
        for stream in owner_streams:
            owner = stream.subject
            if stream.last_email != held[str(owner)]:
                run.violation("stale after load", f"stream of {owner}: last {stream.last_email}, PostgreSQL {held[str(owner)]}")
        stop.set()

        # The gateway never answered an owner from its cache; count what it did answer from it.
        statuses = collections.Counter()
        for line in gateway.access_log():
            found = re.search(r"cache=(\S+)", line)
            statuses[found.group(1) if found else "?"] += 1
        print(f"run {index + 1}: {ran:.1f} s, {args.instances} instances + gateway, {len(owners)} owners, {READERS} other users")
        for key in sorted(run.answers):
            print(f"  {key:28} {run.answers[key]}")
        print(f"  events read on streams    {run.events['event']}")
        print(f"  gateway cache statuses    {dict(statuses)}")
        for flusher in threads:
            if isinstance(flusher, Background):
                print(f"  flush_all sent            {flusher.flushes}")
        for kind in ("leaked", "missed own write", "stale after load"):
            print(f"  {kind:28} {run.violations[kind]}")
            for example in run.examples[kind]:
                print(f"      e.g. {example}")
        for failure in failures:
            print(f"  thread failure: {failure}")
        return sum(run.violations.values()) + len(failures)
    finally:
        stop_instances()
        if gateway:
            gateway.stop()
        db.drop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--owners", type=int, default=20)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    os.makedirs(STATE, exist_ok=True)
    bad = sum(one_run(args, index) for index in range(args.runs))
    print("private fields drill: " + ("PASS" if bad == 0 else f"FAIL ({bad})"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
