"""Live checks: the built binary (PROFILE_SERVICE_BIN, default .build/debug/profile-service) run
against the servers of scripts/deps.sh (PROFILE_DATABASE_URL, PROFILE_MEMCACHED from
`scripts/deps.sh env`, migrated), with nginx and psql on the PATH.

  - gateway_in_front_of_two_instances: deploy/nginx.conf, run for real in front of two local
    `profile-service serve` instances: 200 keep-alive GETs, both instances served, request ids
    passed on or minted, lookups by username and their redirects passed through, /metrics and
    unknown paths not proxied, one instance stopped → the other still answers;
  - service_answers_conform_to_openapi: one instance's answers to chosen requests, each with the
    status the request calls for, against openapi.yaml (see the check for what it adds to
    scripts/contract-test.sh), lookups by username, renames and their redirects included;
  - event_stream_through_the_gateway: event streams (GET /users/profile/{id}/events) through that
    gateway, one per instance: the first event, then a write's event through both (unbuffered),
    and a resumed stream that sends nothing older.
"""

import contextlib
import functools
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import jsonschema

import service_helpers  # scripts/, on sys.path as check-deploy.py's folder
from service_helpers import free_port, get, request

from .common import BIN, Checks, nginx_local_config, nginx_test, openapi

DB_URL = os.environ.get("PROFILE_DATABASE_URL", "postgres://postgres@127.0.0.1:55432/profiles")
MEMCACHED = os.environ.get("PROFILE_MEMCACHED", "127.0.0.1:21211,127.0.0.1:21212")
SERVE_ARGUMENTS = ["--auth", "none"]
psql = functools.partial(service_helpers.psql, DB_URL, timeout=30)  # raises PsqlError on failure

checks = Checks()


class Server:
    """A process serving HTTP on `self.port` of loopback, in a session of its own."""
    stop_signal, stop_seconds = signal.SIGTERM, 30  # graceful; SIGKILL after the seconds

    def start(self, command, stderr, ready_path, what):
        """Runs `command`; returns once `ready_path` answers 200 (fails if it exits first)."""
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        try:
            wait_for(lambda: get(self.port, ready_path)[0] == 200, f"{what} on :{self.port}", self.process)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        """Stops the process (idempotent); returns its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            try:
                return self.process.wait(timeout=self.stop_seconds)
            except subprocess.TimeoutExpired:
                self.process.kill()
                return self.process.wait()
        return self.process.returncode


class Instance(Server):
    """`profile-service serve` on a free port, its stderr (the access log) in `tmp`/NAME.log."""
    def __init__(self, tmp, name):
        self.port = free_port()
        self.log_path = os.path.join(tmp, f"{name}.log")
        self.log = open(self.log_path, "wb")
        self.start([BIN, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--database-url", DB_URL,
                    "--memcached", MEMCACHED, "--workers", "4"] + SERVE_ARGUMENTS, self.log, "/readyz", name)

    def stderr(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()


def wait_for(condition, what, process=None, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if condition():
                return
        except OSError:
            pass
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what} exited with status {process.returncode}")
        time.sleep(0.1)
    raise AssertionError(f"{what} did not come up in {seconds}s")


class Fixture:
    """Two profiles in PostgreSQL at ids nobody else uses, removed afterwards with the usernames
    their renames and deletions keep reserved."""
    def __init__(self):
        base = 8_000_000_000_000 + (uuid.uuid4().int % 1_000_000_000) * 10
        self.ids = [base + 1, base + 2]
        self.missing = base + 3
        self.created = base + 4
        tag = uuid.uuid4().hex[:8]
        psql("INSERT INTO user_profiles (id, username, display_name) VALUES "
             f"({self.ids[0]}, 'deploy_a_{tag}', 'Deploy A'), ({self.ids[1]}, 'deploy_b_{tag}', 'Deploy B')")
        self.tag = tag
        self.usernames = [f"deploy_a_{tag}", f"deploy_b_{tag}"]

    def close(self):
        psql(f"DELETE FROM user_profiles WHERE id BETWEEN {self.ids[0]} AND {self.created}; "
             f"DELETE FROM username_reservations WHERE profile_id BETWEEN {self.ids[0]} AND {self.created}")


class Gateway(Server):
    """deploy/nginx.conf, run for real (nginx_local_config) in front of `upstream_ports`."""
    stop_signal, stop_seconds = signal.SIGQUIT, 15  # nginx's graceful shutdown

    def __init__(self, tmp, upstream_ports):
        self.port = free_port()
        self.tmp = tmp
        conf = nginx_local_config(tmp, self.port, upstream_ports)
        nginx_test(tmp, conf)
        self.start(["nginx", "-p", tmp + "/", "-c", conf, "-g", "daemon off;"],
                   open(os.path.join(tmp, "logs/nginx.stderr"), "wb"), "/healthz", "nginx")

    def access_log(self):
        with open(os.path.join(self.tmp, "logs/access.log")) as f:
            return f.read().splitlines()


@contextlib.contextmanager
def deployment(instance_names, gateway=False):
    """A Fixture, one Instance per name and, with `gateway`, nginx in front of them; everything is
    stopped and the fixture removed at the end, in reverse order."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        os.chmod(tmp, 0o755)  # nginx's workers read the configuration and write the logs here
        fixture = Fixture()
        stack.callback(fixture.close)
        instances = []
        for name in instance_names:
            instances.append(Instance(tmp, name))
            stack.callback(instances[-1].stop)
        front = None
        if gateway:
            front = Gateway(tmp, [i.port for i in instances])
            stack.callback(front.stop)
        yield fixture, instances, front


@checks("live")
def gateway_in_front_of_two_instances():
    with deployment(["a", "b"], gateway=True) as (fixture, instances, gateway):
        conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
        sent, by_status = {}, {}
        for n in range(200):
            profile_id = fixture.ids[n % 2] if n % 4 else fixture.missing
            rid = f"deploy-check-{fixture.tag}-{n}"
            status, body, headers = request(gateway.port, "GET", f"/users/profile/{profile_id}",
                                            headers={"X-Request-ID": rid}, connection=conn)
            expected = 404 if profile_id == fixture.missing else 200
            assert status == expected, f"request {n}: {status} for id {profile_id}: {body[:200]!r}"
            assert headers.get("x-request-id") == rid, f"request id not echoed: {headers.get('x-request-id')}"
            if status == 200:
                assert json.loads(body)["id"] == profile_id
            sent[rid] = status
            by_status[status] = by_status.get(status, 0) + 1
        conn.close()
        # nginx mints a request id when the client sends none.
        status, _, headers = get(gateway.port, f"/users/profile/{fixture.ids[0]}")
        assert status == 200 and re.fullmatch(r"[0-9a-f]{32}", headers.get("x-request-id", "")), headers
        # Lookups by username go through as the profile's reads do; a rename's 308 comes back
        # with the service's own (relative) Location.
        first, second = fixture.usernames
        status, body, headers = get(gateway.port, f"/users/by-username/{first.upper()}")
        assert status == 200 and json.loads(body)["id"] == fixture.ids[0], (status, body[:200])
        assert headers.get("content-location") == f"/users/profile/{fixture.ids[0]}", headers
        renamed = f"Deploy_G_{fixture.tag}"
        status, body, _ = request(gateway.port, "PATCH", f"/users/profile/{fixture.ids[1]}",
                                  body=json.dumps({"username": renamed}),
                                  headers={"Content-Type": "application/merge-patch+json"})
        assert status == 200 and json.loads(body)["username"] == renamed, (status, body[:200])
        status, _, headers = get(gateway.port, f"/users/by-username/{second}?min_version=2")
        assert status == 308 and headers.get("location") == f"/users/by-username/{renamed}?min_version=2", (status, headers)
        status, body, _ = get(gateway.port, f"/users/profiles?usernames={first},{second},{renamed.lower()}")
        assert status == 200, (status, body[:200])
        listed = json.loads(body)
        assert [p["id"] for p in listed["profiles"]] == fixture.ids and listed["renamed"] == {second: renamed}, listed
        # /metrics and unknown paths stop at the gateway.
        for path in ("/metrics", "/", "/users/profile/../../metrics", "/users/by-username/../../metrics"):
            status, _, _ = get(gateway.port, path)
            assert status == 404, f"{path} through the gateway: {status}"
        time.sleep(0.3)  # the access log is written after the response
        per_upstream = {}
        for line in gateway.access_log():
            m = re.search(r"upstream=(\S+) .*request_id=(deploy-check-\S+)$", line)
            if m and m.group(2) in sent:
                per_upstream[m.group(1)] = per_upstream.get(m.group(1), 0) + 1
        expected_upstreams = {f"127.0.0.1:{i.port}" for i in instances}
        assert set(per_upstream) == expected_upstreams and sum(per_upstream.values()) == 200, per_upstream
        assert min(per_upstream.values()) >= 50, f"round robin is lopsided: {per_upstream}"
        for line in gateway.access_log():
            if "/metrics" in line:
                assert "upstream=- " in line, f"/metrics reached an upstream: {line}"
        print(f"      200 GETs through nginx: {by_status}; per instance (nginx $upstream_addr): "
              + ", ".join(f"{k}={v}" for k, v in sorted(per_upstream.items())))
        # The instances' own view: each access log (stderr) names the request ids it served.
        logs = [i.stderr() for i in instances]
        seen = [sum(1 for rid in sent if re.search(rf"{re.escape(rid)}\b", log)) for log in logs]
        assert sum(seen) == 200 and min(seen) > 0, f"instances logged {seen} of 200 request ids"
        print(f"      per instance (their own access logs): {seen}")
        metrics = [get(i.port, "/metrics") for i in instances]
        for status, body, headers in metrics:
            assert status == 200, f"/metrics answered {status}"
            assert headers.get("content-type", "").startswith("text/plain"), headers
            assert re.search(rb"(?m)^# TYPE \S+ (counter|histogram|gauge)", body), body[:200]
        # One instance stops (SIGTERM, graceful): the gateway keeps answering from the other.
        assert instances[0].stop() == 0, f"instance a exited with {instances[0].process.returncode}"
        conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
        for n in range(40):
            status, body, _ = get(gateway.port, f"/users/profile/{fixture.ids[n % 2]}", connection=conn)
            assert status == 200, f"after stopping one instance, request {n}: {status} {body[:200]!r}"
        conn.close()


class OpenAPI:
    def __init__(self):
        self.doc = openapi()

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            target = self.doc
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            node = target
        return node

    @staticmethod
    def template(path):
        """The path of openapi.yaml a request's path belongs to."""
        bare = path.split("?")[0]
        if bare.startswith("/users/profile/"):
            return "/users/profile/{id}"
        if bare.startswith("/users/by-username/"):
            return "/users/by-username/{username}"
        return bare

    def operation(self, path, method):
        template = self.template(path)
        item = self.doc["paths"].get(template)
        if item is None:
            return None, template
        return item.get(method.lower()), template

    def responses_for(self, path, method):
        operation, template = self.operation(path, method)
        item = self.doc["paths"].get(template)
        if operation is not None:
            return operation["responses"]
        if item is not None:  # a method the path does not support
            return {"405": item["x-unsupported-methods"]["response"]}
        return {"404": {"$ref": "#/components/responses/NotFound"}}  # not a route at all

    def conform(self, path, method, status, headers, body):
        responses = self.responses_for(path, method)
        assert str(status) in responses, f"{method} {path}: {status} is not documented (documented: {sorted(responses)})"
        response = self.resolve(responses[str(status)])
        for name, header in (response.get("headers") or {}).items():
            header = self.resolve(header)
            if header.get("required"):
                assert name.lower() in headers, f"{method} {path} {status}: required header {name} missing"
            if name.lower() in headers and "schema" in header:
                value = headers[name.lower()]
                schema = header["schema"]
                if schema.get("type") == "integer":
                    value = int(value)
                self.validate(value, schema, f"{method} {path} {status} header {name}")
        content = response.get("content")
        if method == "HEAD" or status == 304:
            assert not body, f"{method} {path} {status} has a body"
            return
        if not content:
            return
        media = headers.get("content-type", "").split(";")[0].strip()
        assert media in content, f"{method} {path} {status}: Content-Type {media!r}, documented {sorted(content)}"
        schema = content[media].get("schema")
        if schema and media.endswith("json"):
            self.validate(json.loads(body), schema, f"{method} {path} {status} body")

    def validate(self, instance, schema, what):
        root = {"components": self.doc["components"], **schema}
        validator = jsonschema.Draft202012Validator(root, format_checker=jsonschema.FormatChecker())
        errors = sorted(validator.iter_errors(instance), key=lambda e: e.path)
        assert not errors, f"{what} does not match openapi.yaml: {errors[0].message} (instance {instance!r})"


@checks("live")
def service_answers_conform_to_openapi():
    """Chosen requests, each with the status it must get, and every answer against openapi.yaml.

    scripts/contract-test.sh (schemathesis, every check and phase) already validates the answers to
    the requests it generates for the documented operations: status documented, content type, body
    schema, required headers. The plain 200s below (health, readiness, metrics, a profile) overlap
    it. What it does not prove, and this check does:
      - the status each request calls for, not just a documented one: 304 for a matching
        If-None-Match, 412 for a disagreeing If-Match, 428 for an update naming no version, 413
        for an oversized body, 415, 409 for a stale version (with the current version in its body)
        and for a second create, 201 with its Location, 204 for a deletion and 404 for a second;
      - the documents of those answers, which generated requests meet by chance if at all;
      - paths openapi.yaml does not list (schemathesis only calls documented paths): a 404 that
        conforms to components.responses.NotFound;
      - the Allow header of a 405 equal to the path's `x-unsupported-methods.allowed`;
      - HEAD and 304 answers without a body;
      - handles: a lookup by username in any case with `Content-Location`, a rename by PATCH whose
        old username answers 308 to the new one (the query kept) and stays its owner's (409 for
        another profile, taken back by a rename back), a deleted profile's username 404 and
        reserved, lists by username with `missing` and `renamed`, and 400 for a list named by
        both `ids` and `usernames` or by neither (schemathesis_hooks.py gives schemathesis
        exactly one) — sequences that generated requests meet by chance if at all.
    """
    spec = OpenAPI()
    with deployment(["conformance"]) as (fixture, (instance,), _):
        port = instance.port
        one, two, missing, new = fixture.ids[0], fixture.ids[1], fixture.missing, fixture.created
        json_headers = {"Content-Type": "application/json"}
        cases = [
            ("GET", f"/users/profile/{one}", None, {}, 200),
            ("HEAD", f"/users/profile/{one}", None, {}, 200),
            ("GET", f"/users/profile/{one}", None, {"If-None-Match": '"1"'}, 304),
            ("GET", f"/users/profile/{one}?min_version=1", None, {}, 200),
            ("GET", f"/users/profile/{missing}", None, {}, 404),
            ("GET", "/users/profile/abc", None, {}, 400),
            ("GET", "/users/profile/007", None, {}, 400),
            ("GET", f"/users/profile/{one}?min_version=0", None, {}, 400),
            ("POST", f"/users/profile/{one}", None, {}, 405),
            ("POST", "/healthz", None, {}, 405),
            ("GET", "/no/such/route", None, {}, 404),
            ("PUT", f"/users/profile/{one}", b'{"display_name":"","version":1}', json_headers, 422),
            ("PUT", f"/users/profile/{one}", b'{"display_name":"x"}', json_headers, 428),
            ("PUT", f"/users/profile/{one}", b'{"display_name":"x","version":1}', {**json_headers, "If-Match": '"2"'}, 412),
            ("PUT", f"/users/profile/{one}", b'{"display_name":"x","version":1', json_headers, 400),
            ("PUT", f"/users/profile/{one}", b'{"display_name":1,"version":1}', json_headers, 400),
            ("PUT", f"/users/profile/{one}", b'{"display_name":"x","version":1}', {"Content-Type": "text/plain"}, 415),
            ("PUT", f"/users/profile/{one}", b'{"display_name":"' + b"x" * 70000 + b'","version":1}', json_headers, 413),
            ("PUT", f"/users/profile/{one}", b'{"display_name":"Deploy A2","version":1}', json_headers, 200),
            ("PUT", f"/users/profile/{one}", b'{"display_name":"Deploy A3","version":1}', json_headers, 409),
            ("PUT", f"/users/profile/{new}", json.dumps({"username": f"deploy_c_{fixture.tag}",
                                                         "display_name": "Deploy C"}).encode(),
             {**json_headers, "If-None-Match": "*"}, 201),
            ("PUT", f"/users/profile/{new}", json.dumps({"username": f"deploy_d_{fixture.tag}",
                                                         "display_name": "Deploy D"}).encode(),
             {**json_headers, "If-None-Match": "*"}, 409),
            ("PATCH", f"/users/profile/{new}", b'{"display_name":"Deploy P"}', {"Content-Type": "application/merge-patch+json"}, 200),
            ("PATCH", f"/users/profile/{new}", b'{"bio":"x","website":null}', {"Content-Type": "application/merge-patch+json"}, 200),
            ("PATCH", f"/users/profile/{new}", b'{"pronouns":"x"}', {"Content-Type": "application/merge-patch+json"}, 422),
            ("PATCH", f"/users/profile/{new}", b'{"avatar_url":"http://example.com/a.png"}',
             {"Content-Type": "application/merge-patch+json"}, 422),
            ("PATCH", f"/users/profile/{new}", b'{"display_name":"Deploy Q"}',
             {"Content-Type": "application/merge-patch+json", "If-Match": '"1"'}, 409),
            ("DELETE", f"/users/profile/{new}", None, {"If-Match": '"7"'}, 409),
            ("DELETE", f"/users/profile/{new}", None, {"If-Match": "7"}, 400),
            ("DELETE", f"/users/profile/{new}", None, {}, 204),
            ("DELETE", f"/users/profile/{new}", None, {}, 404),
        ]
        first, second = fixture.usernames
        renamed, deleted, nobody = f"Deploy_R_{fixture.tag}", f"deploy_c_{fixture.tag}", f"nobody_{fixture.tag}"
        by_name = "/users/by-username/"
        patch = {"Content-Type": "application/merge-patch+json"}
        rename = lambda name: json.dumps({"username": name}).encode()
        # `one` is at version 2 (its PUT above), `two` at 1 until its renames; `new` is deleted.
        cases += [
            ("GET", by_name + first, None, {}, 200),
            ("GET", by_name + first.upper(), None, {}, 200),
            ("HEAD", by_name + first, None, {}, 200),
            ("GET", by_name + first, None, {"If-None-Match": '"2"'}, 304),
            ("GET", by_name + first + "?min_version=2", None, {}, 200),
            ("GET", by_name + first + "?min_version=0", None, {}, 400),
            ("GET", by_name + "ab", None, {}, 400),
            ("GET", by_name + "a-b-c", None, {}, 400),
            ("GET", by_name + nobody, None, {}, 404),
            ("HEAD", by_name + nobody, None, {}, 404),
            ("GET", by_name + deleted, None, {}, 404),
            ("POST", by_name + first, None, {}, 405),
            ("PATCH", f"/users/profile/{two}", rename(renamed), patch, 200),
            ("GET", by_name + renamed.lower(), None, {}, 200),
            ("GET", by_name + second + "?min_version=2", None, {}, 308),
            ("HEAD", by_name + second, None, {}, 308),
            ("PATCH", f"/users/profile/{one}", rename(second.upper()), patch, 409),
            ("PATCH", f"/users/profile/{one}", rename(renamed.upper()), patch, 409),
            ("PATCH", f"/users/profile/{one}", rename(deleted), patch, 409),
            ("PUT", f"/users/profile/{missing}", json.dumps({"username": second, "display_name": "Deploy X"}).encode(),
             json_headers, 409),
            ("PATCH", f"/users/profile/{two}", rename("x"), patch, 422),
            ("GET", f"/users/profiles?usernames={first},{second},{nobody},{renamed.lower()}", None, {}, 200),
            ("HEAD", f"/users/profiles?usernames={first},{second}", None, {}, 200),
            ("GET", "/users/profiles?usernames=ab", None, {}, 400),
            ("GET", "/users/profiles?usernames=", None, {}, 400),
            ("GET", f"/users/profiles?ids={one}&usernames={first}", None, {}, 400),
            ("GET", "/users/profiles", None, {}, 400),
            ("PATCH", f"/users/profile/{two}", rename(second), patch, 200),
            ("GET", by_name + second, None, {}, 200),
            ("GET", by_name + renamed, None, {}, 308),
        ]
        # What some answers must say beyond their status and schema.
        expect = {
            (by_name + first, "GET", 200): lambda h, b: h["content-location"] == f"/users/profile/{one}",
            (by_name + second + "?min_version=2", "GET", 308):
                lambda h, b: h["location"] == f"{by_name}{renamed}?min_version=2",
            (by_name + second, "HEAD", 308): lambda h, b: h["location"] == by_name + renamed,
            (by_name + renamed, "GET", 308): lambda h, b: h["location"] == by_name + second,
            (by_name + renamed.lower(), "GET", 200): lambda h, b: json.loads(b)["id"] == two,
            (f"/users/profiles?usernames={first},{second},{nobody},{renamed.lower()}", "GET", 200):
                lambda h, b: json.loads(b)["missing"] == [nobody] and json.loads(b)["renamed"] == {second: renamed}
                and [p["id"] for p in json.loads(b)["profiles"]] == [one, two],
        }
        cases += [
            ("GET", "/healthz", None, {}, 200),
            ("HEAD", "/healthz", None, {}, 200),
            ("GET", "/readyz", None, {}, 200),
            ("GET", "/metrics", None, {}, 200),
            ("HEAD", "/metrics", None, {}, 200),
        ]
        for method, path, body, headers, expected in cases:
            status, data, response_headers = request(port, method, path, body, headers)
            assert status == expected, f"{method} {path}: expected {expected}, got {status}: {data[:300]!r}"
            spec.conform(path, method, status, response_headers, data)
            check = expect.get((path, method, status))
            assert check is None or check(response_headers, data), f"{method} {path} {status}: {response_headers} {data[:300]!r}"
            if status == 405:
                allowed = spec.doc["paths"][spec.template(path)]["x-unsupported-methods"]["allowed"]
                assert [a.strip() for a in response_headers["allow"].split(",")] == allowed, response_headers["allow"]
            if status == 409 and b"version-conflict" in data:
                # `one` was updated to 2 above; `new` to 3 by its two patches (name, then fields).
                assert json.loads(data)["current"]["version"] == (3 if path.endswith(f"/{new}") else 2), data
            if status == 201:
                assert response_headers["location"] == f"/users/profile/{new}"
        print(f"      {len(cases)} requests: statuses, headers and bodies match openapi.yaml")


class EventStream:
    """A raw `GET …/events` reader: the head, then SSE events as they arrive."""
    def __init__(self, port, path, headers=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Accept: text/event-stream"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self._receive(time.time() + 10)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        head_lines = head.decode().split("\r\n")
        self.status = int(head_lines[0].split()[1])
        self.headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in head_lines[1:])}
        self.chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
        self.returned = 0

    def _receive(self, deadline):
        self.sock.settimeout(max(0.01, deadline - time.time()))
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("stream closed")
        self.buffer += data

    def _body_text(self):
        if not self.chunked:
            return self.buffer
        # nginx re-frames the close-delimited upstream body as chunked for the HTTP/1.1 client.
        out, rest = b"", self.buffer
        while b"\r\n" in rest:
            size_line, after = rest.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if len(after) < size + 2:
                break
            out, rest = out + after[:size], after[size + 2:]
        return out

    def next_event(self, seconds):
        """The next `profile` event as a dict of fields, or None after `seconds`."""
        deadline = time.time() + seconds
        while True:
            blocks = self._body_text().split(b"\n\n")[:-1]  # complete events only
            events = []
            for block in blocks:
                fields = dict(line.split(": ", 1) for line in block.decode().split("\n")
                              if ": " in line and not line.startswith(":"))
                if fields.get("event") == "profile":
                    events.append(fields)
            if len(events) > self.returned:
                self.returned += 1
                return events[self.returned - 1]
            if time.time() >= deadline:
                return None
            try:
                self._receive(deadline)
            except socket.timeout:
                return None

    def close(self):
        self.sock.close()


@checks("live")
def event_stream_through_the_gateway():
    with deployment(["a", "b"], gateway=True) as (fixture, instances, gateway), contextlib.ExitStack() as opened:
        profile_id = fixture.ids[0]

        def open_stream(headers=None):
            return opened.enter_context(contextlib.closing(
                EventStream(gateway.port, f"/users/profile/{profile_id}/events", headers)))
        # Two streams through nginx: round robin puts them on both instances.
        streams = [open_stream(), open_stream()]
        for stream in streams:
            assert stream.status == 200, stream.status
            assert stream.headers.get("content-type") == "text/event-stream", stream.headers
            first = stream.next_event(5)
            assert first and first["id"] == "1", first
            assert json.loads(first["data"])["display_name"] == "Deploy A"
        # A write through the gateway lands on one instance; the other hears of it from the
        # change feed (running in one of them): commit stream -> memcached -> NOTIFY -> LISTEN.
        wait_for(lambda: any(b'"state":"active"' in get(i.port, "/readyz").body for i in instances),
                 "an active change-feed consumer")
        status, body, _ = request(
            gateway.port, "PUT", f"/users/profile/{profile_id}",
            body=json.dumps({"display_name": "Streamed", "version": 1}),
            headers={"Content-Type": "application/json"})
        assert status == 200, (status, body[:200])
        written = time.time()
        for stream in streams:
            event = stream.next_event(3)
            assert event and event["id"] == "2", event
            assert json.loads(event["data"])["display_name"] == "Streamed"
        print(f"      2 streams through nginx (round robin over both instances) had version 2 "
              f"{(time.time() - written) * 1000:.0f} ms after the PUT's answer was read")
        # A stream resumed at the current version sends nothing older.
        resumed = open_stream({"Last-Event-ID": "2"})
        assert resumed.status == 200 and resumed.next_event(0.5) is None
