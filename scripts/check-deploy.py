#!/usr/bin/env python3
"""Checks of the deployment files and the API document, run by scripts/test.sh after swift test.

Static checks: docker-compose.yml, Dockerfile and .dockerignore, the nginx configurations
(`nginx -t` for real), the systemd unit, openapi.yaml (openapi-spec-validator) and openapi.yaml
against the routes and problem kinds in Sources/.

Live checks (need the built binary and the servers of scripts/deps.sh):
  - the local nginx configuration (deploy/nginx.conf), run for real in front of two local
    `profile-service serve` instances: 200 keep-alive GETs, both instances served, request ids
    passed through, /metrics not exposed, one instance stopped → the other still answers;
  - an event stream (GET /users/profile/{id}/events) through that gateway, one per instance:
    the first event, then a write's event through both (unbuffered);
  - the running service's answers conform to openapi.yaml (status documented for the operation,
    content type documented, body valid against the documented schema, required headers present).

Environment: PROFILE_SERVICE_BIN (default .build/debug/profile-service), PROFILE_DATABASE_URL and
PROFILE_MEMCACHED (from `scripts/deps.sh env`). `--static` runs only the static checks.
Prints one line per check and `deploy checks: N passed, M failed`; exit status 1 on any failure.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

import jsonschema
import yaml
from openapi_spec_validator import validate as validate_openapi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("PROFILE_SERVICE_BIN", os.path.join(ROOT, ".build/debug/profile-service"))
DB_URL = os.environ.get("PROFILE_DATABASE_URL", "postgres://postgres@127.0.0.1:55432/profiles")
MEMCACHED = os.environ.get("PROFILE_MEMCACHED", "127.0.0.1:21211,127.0.0.1:21212")

CHECKS = []
NOTES = []


def check(group):
    def register(function):
        CHECKS.append((group, function))
        return function
    return register


def note(text):
    NOTES.append(text)
    print(f"      note: {text}")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def load_yaml(path):
    return yaml.safe_load(read(path))


# MARK: docker-compose.yml

def compose():
    return load_yaml("docker-compose.yml")


def replicas(services):
    return sorted(name for name, s in services.items() if "serve" in (s.get("command") or []))


def help_variables():
    """PROFILE_* variables the binary documents in `serve --help` and `migrate --help`."""
    names = set()
    for sub in ("serve", "migrate"):
        out = subprocess.run([BIN, sub, "--help"], capture_output=True, text=True, timeout=30)
        names |= set(re.findall(r"\b(PROFILE_[A-Z0-9_]+)\b", out.stdout + out.stderr))
    return names




@check("compose")
def compose_services_and_ports():
    services = compose()["services"]
    expected = {"postgres", "memcached-1", "memcached-2", "migrate", "profile-1", "profile-2", "gateway"}
    assert expected <= set(services), f"missing services: {expected - set(services)}"
    assert re.match(r"^postgres:15(\.|-|$)", services["postgres"]["image"]), services["postgres"]["image"]
    memcached = [n for n, s in services.items() if str(s.get("image", "")).startswith("memcached:")]
    assert len(memcached) == 2, f"memcached nodes: {memcached}"
    reps = replicas(services)
    assert reps == ["profile-1", "profile-2"], f"replicas: {reps}"
    for name in reps:
        command = services[name]["command"]
        assert command[:1] == ["serve"] and "--host" in command and command[command.index("--host") + 1] == "0.0.0.0", command
        assert "ports" not in services[name], f"{name} must be reached through the gateway only"
    gateway = services["gateway"]
    assert str(gateway["image"]).startswith("nginx:"), gateway["image"]
    assert any(str(p).split(":")[-2:] == ["8080", "8080"] or str(p) == "8080:8080" for p in gateway["ports"]), gateway["ports"]
    published = [n for n, s in services.items() if s.get("ports")]
    assert published == ["gateway"], f"only the gateway publishes ports, got {published}"
    migrate = services["migrate"]
    assert migrate["command"][0] == "migrate", migrate["command"]
    assert migrate.get("restart", "no") == "no", "migrate is one-shot: restart must be \"no\""
    assert "healthcheck" not in migrate


@check("compose")
def compose_health_checks():
    services = compose()["services"]
    def test_of(name):
        hc = services[name].get("healthcheck")
        assert hc and hc.get("test"), f"{name} has no health check"
        test = hc["test"]
        return " ".join(test) if isinstance(test, list) else test
    assert "pg_isready" in test_of("postgres")
    for name in ("memcached-1", "memcached-2"):
        assert "11211" in test_of(name), test_of(name)
    for name in replicas(services):
        assert "/readyz" in test_of(name), test_of(name)
    assert "/healthz" in test_of("gateway") or "/readyz" in test_of("gateway")


@check("compose")
def compose_dependencies_gated_on_health():
    services = compose()["services"]
    def deps(name):
        d = services[name].get("depends_on") or {}
        assert isinstance(d, dict), f"{name}: depends_on must use conditions"
        return {k: v.get("condition") for k, v in d.items()}
    assert deps("migrate") == {"postgres": "service_healthy"}, deps("migrate")
    for name in replicas(services):
        assert deps(name) == {
            "migrate": "service_completed_successfully",
            "memcached-1": "service_healthy",
            "memcached-2": "service_healthy",
        }, deps(name)
    assert deps("gateway") == {r: "service_healthy" for r in replicas(services)}, deps("gateway")
    for name in services:
        for target, condition in deps(name).items():
            assert target in services, f"{name} depends on unknown {target}"
            assert condition in ("service_healthy", "service_completed_successfully"), f"{name} → {target}: {condition}"
            if condition == "service_healthy":
                assert services[target].get("healthcheck"), f"{name} waits for {target}'s health, which has no check"


@check("compose")
def compose_postgres_feeds_the_change_feed():
    """The change feed needs logical decoding, and its slot must not be able to fill the disk."""
    command = compose()["services"]["postgres"].get("command") or []
    settings = dict(arg.split("=", 1) for arg in command if "=" in str(arg))
    assert settings.get("wal_level") == "logical", f"postgres runs without wal_level=logical: {command}"
    assert int(settings.get("max_replication_slots", 0)) >= 1, command
    assert int(settings.get("max_wal_senders", 0)) >= 1, command
    assert settings.get("max_slot_wal_keep_size", "-1") not in ("-1", ""), "max_slot_wal_keep_size must cap the slot"
    for name in replicas(compose()["services"]):
        env = compose()["services"][name]["environment"]
        assert str(env.get("PROFILE_CHANGE_FEED", "true")).lower() == "true", f"{name} turns the change feed off"
    unit = read("deploy/profile-service.service")
    assert "wal_level=logical" in unit and "max_slot_wal_keep_size" in unit, "the systemd unit must name the settings"


@check("compose")
def compose_configuration_and_secret():
    doc = compose()
    services = doc["services"]
    known = help_variables()
    assert "PROFILE_DATABASE_URL" in known and "PROFILE_PORT" in known, f"--help lists {sorted(known)}"
    for name in replicas(services) + ["migrate"]:
        env = services[name]["environment"]
        for key in env:
            assert key.startswith("PROFILE_"), f"{name}: {key}"
            assert key in known, f"{name}: {key} is not a documented variable of profile-service"
        url = env["PROFILE_DATABASE_URL"]
        assert "@postgres:5432/" in url, url
    for name in replicas(services):
        env = services[name]["environment"]
        nodes = env["PROFILE_MEMCACHED"].split(",")
        assert sorted(n.split(":")[0] for n in nodes) == ["memcached-1", "memcached-2"], nodes
        secret_file = env["PROFILE_JWT_SECRET_FILE"]
        assert secret_file.startswith("/run/secrets/"), secret_file
        secret = secret_file.rsplit("/", 1)[1]
        assert secret in (services[name].get("secrets") or []), f"{name} does not mount secret {secret}"
        assert secret in doc["secrets"], f"no top-level secret {secret}"
        grace = int(str(services[name]["stop_grace_period"]).rstrip("s"))
        assert grace > int(env["PROFILE_SHUTDOWN_DELAY_S"]) + int(env["PROFILE_DRAIN_TIMEOUT_S"]), "stop_grace_period too short"
    secret_path = doc["secrets"]["jwt_secret"]["file"]
    text = read(secret_path)
    assert "FAKE" in text.upper() and "do-not-use" in text, f"{secret_path} must be an obviously fake value"
    mounts = services["gateway"]["volumes"]
    conf = [m for m in mounts if m.endswith(":/etc/nginx/nginx.conf:ro")]
    assert conf, mounts
    assert os.path.exists(os.path.join(ROOT, conf[0].split(":")[0])), conf[0]


# MARK: Dockerfile

def dockerfile_instructions():
    text = re.sub(r"\\\n", " ", read("Dockerfile"))
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    return [(l.split(None, 1)[0].upper(), l.split(None, 1)[1] if " " in l else "") for l in lines]


@check("docker")
def dockerfile_multi_stage_build():
    ins = dockerfile_instructions()
    froms = [a for i, a in ins if i == "FROM"]
    assert len(froms) >= 2, froms
    assert re.match(r"^swift:(\$\{SWIFT_VERSION\}|6[.\d]*)-bookworm AS build$", froms[0], re.I), froms[0]
    assert any(i == "ARG" and re.match(r"SWIFT_VERSION=6(\.\d+)*$", a) for i, a in ins)
    assert re.match(r"^debian:bookworm-slim\b", froms[-1]), froms[-1]
    build = ins[: [k for k, (i, _) in enumerate(ins) if i == "FROM"][1]]
    runs = " ".join(a for i, a in build if i == "RUN")
    for pkg in ("libpq-dev", "libmemcached-dev"):
        assert pkg in runs, f"build stage does not install {pkg}"
    assert re.search(r"swift build -c release --product profile-service --static-swift-stdlib", runs), runs


@check("docker")
def dockerfile_runtime_stage():
    ins = dockerfile_instructions()
    last_from = max(k for k, (i, _) in enumerate(ins) if i == "FROM")
    runtime = ins[last_from:]
    runs = " ".join(a for i, a in runtime if i == "RUN")
    for pkg in ("libpq5", "libmemcached11", "ca-certificates"):
        assert re.search(rf"\b{re.escape(pkg)}\b", runs), f"runtime does not install {pkg}"
    for pkg in ("libpq-dev", "libmemcached-dev", "swift"):
        assert not re.search(rf"install[^&]*\b{re.escape(pkg)}\b", runs), f"runtime installs {pkg}"
    users = [a for i, a in runtime if i == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), f"runtime USER: {users}"
    copies = [a for i, a in runtime if i == "COPY"]
    assert any("--from=build" in c and "profile-service" in c for c in copies), copies
    assert any(c.split()[0].rstrip("/") == "migrations" for c in copies), copies
    assert ("EXPOSE", "8080") in runtime
    assert ("ENTRYPOINT", '["profile-service"]') in runtime
    assert ("CMD", '["serve", "--host", "0.0.0.0"]') in runtime
    ignored = read(".dockerignore").split()
    for entry in (".build", ".build-*", ".state", ".git"):
        assert entry in ignored, f".dockerignore lacks {entry}"
    for needed in ("Sources", "Package.swift", "migrations"):
        assert needed not in ignored, f".dockerignore excludes {needed}"


# MARK: nginx

def nginx_local_config(tmp, listen, upstream_ports):
    """deploy/nginx.conf with its ports and paths moved into `tmp` (nginx -p tmp)."""
    text = read("deploy/nginx.conf")
    for sub in ("logs", "temp"):
        os.makedirs(os.path.join(tmp, sub), exist_ok=True)
    text = re.sub(r"(?m)^pid .*;", "pid logs/nginx.pid;", text)
    text = re.sub(r"(?m)^error_log \S+", "error_log logs/error.log", text)
    text = re.sub(r"access_log \S+ ", "access_log logs/access.log ", text)
    text = re.sub(r"(?m)^(\s*)listen 8080;", rf"\1listen 127.0.0.1:{listen};", text)
    ports = iter(upstream_ports)
    text = re.sub(r"server 127\.0\.0\.1:\d+ ", lambda m: f"server 127.0.0.1:{next(ports)} ", text)
    temps = "".join(f"    {d}_temp_path temp/{d};\n" for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    text = text.replace("http {\n", "http {\n" + temps, 1)
    path = os.path.join(tmp, "nginx.conf")
    with open(path, "w") as f:
        f.write(text)
    return path


def nginx_test(tmp, conf):
    result = subprocess.run(["nginx", "-t", "-p", tmp + "/", "-c", conf], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stderr


@check("nginx")
def nginx_local_config_passes_nginx_t():
    with tempfile.TemporaryDirectory() as tmp:
        out = nginx_test(tmp, nginx_local_config(tmp, 18080, [18081, 18082]))
        assert "syntax is ok" in out and "test is successful" in out, out


def directives(path):
    text = re.sub(r"#[^\n]*", "", read(path))
    return [" ".join(d.split()) for d in re.split(r"[;{}]", text) if d.strip()]


@check("nginx")
def nginx_gateway_directives():
    ds = directives("deploy/nginx.conf")
    servers = [d for d in ds if re.match(r"server 127\.0\.0\.1:\d+", d)]
    assert [s.split()[1] for s in servers] == ["127.0.0.1:8081", "127.0.0.1:8082"], servers
    for needed in ("upstream profile_service", "keepalive 64", "keepalive_timeout 60s", "proxy_http_version 1.1",
                   'proxy_set_header Connection ""', "proxy_set_header X-Request-ID $profile_request_id",
                   "listen 8080", "location /users/profile/", "location = /healthz", "location = /readyz"):
        assert needed in ds, f"deploy/nginx.conf lacks `{needed}`"
    assert "default $http_x_request_id" in ds and '"" $request_id' in ds, "X-Request-ID must default to $request_id"
    # nginx must close idle upstream connections before the service does.
    idle = int(re.search(r"--idle-timeout-s\b.*?default: (\d+)", subprocess.run(
        [BIN, "serve", "--help"], capture_output=True, text=True).stdout, re.S).group(1))
    assert 60 < idle, f"service idle timeout {idle}s must exceed nginx's 60s"
    # /metrics is never proxied.
    text = re.sub(r"#[^\n]*", "", read("deploy/nginx.conf"))
    metrics = re.search(r"location = /metrics \{([^}]*)\}", text)
    assert metrics and "proxy_pass" not in metrics.group(1) and "return 404" in metrics.group(1)
    assert re.search(r"location / \{\s*return 404;\s*\}", text), "unknown paths must not be proxied"


@check("nginx")
def nginx_compose_config_in_step_with_local():
    def normalized(path, upstreams):
        ds = directives(path)
        out = []
        for d in ds:
            if d.startswith(("pid ", "error_log ", "access_log ")):
                out.append(d.split()[0])
                continue
            for k, host in enumerate(upstreams):
                d = d.replace(f"server {host} ", f"server UPSTREAM{k} ")
            out.append(d)
        return out
    services = compose()["services"]
    local = normalized("deploy/nginx.conf", ["127.0.0.1:8081", "127.0.0.1:8082"])
    composed = normalized("deploy/nginx.compose.conf", [f"{r}:8080" for r in replicas(services)])
    assert local == composed, "deploy/nginx.compose.conf drifted from deploy/nginx.conf: " + \
        str([(a, b) for a, b in zip(local, composed) if a != b][:3] or (len(local), len(composed)))


# MARK: systemd

def unit():
    sections, current = {}, None
    for line in read("deploy/profile-service.service").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, value = line.split("=", 1)
        current.setdefault(key, []).append(value)
    return sections


@check("systemd")
def systemd_unit_hardened_and_graceful():
    service = unit()["Service"]
    one = lambda k: service[k][-1]
    assert one("DynamicUser") == "yes" or "User" in service
    assert one("EnvironmentFile").lstrip("-") == "/etc/profile-service/env"
    assert any(v.endswith("profile-service migrate") for v in service["ExecStartPre"])
    assert one("ExecStart").endswith("profile-service serve")
    assert one("Restart") == "on-failure" and one("KillSignal") == "SIGTERM"
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "LimitNOFILE": "65536",
                       "PrivateTmp": "yes", "ProtectHome": "yes", "CapabilityBoundingSet": ""}.items():
        assert one(key) == value, f"{key}={one(key)}"
    env = dict(l.split("=", 1) for l in read("deploy/profile-service.env.example").splitlines()
               if l.strip() and not l.startswith("#"))
    stop = int(one("TimeoutStopSec").rstrip("s"))
    drain = int(env["PROFILE_SHUTDOWN_DELAY_S"]) + int(env["PROFILE_DRAIN_TIMEOUT_S"])
    assert stop > drain, f"TimeoutStopSec {stop} must exceed shutdown delay + drain {drain}"
    assert "PROFILE_JWT_SECRET_FILE=%d/jwt-secret" in service["Environment"]
    known = help_variables()
    unknown = sorted(set(env) - known)
    assert not unknown, f"env example sets unknown variables: {unknown}"
    if shutil.which("systemd-analyze"):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "profile-service.service")
            with open(path, "w") as f:  # the binary is not installed here: verify the unit itself
                f.write(read("deploy/profile-service.service").replace("/usr/local/bin/profile-service", "/bin/true"))
            r = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and not r.stderr.strip(), r.stderr


# MARK: openapi.yaml

def openapi():
    return load_yaml("openapi.yaml")


@check("openapi")
def openapi_document_is_valid():
    validate_openapi(openapi())


@check("openapi")
def openapi_matches_routes_and_problem_kinds():
    """openapi.yaml against the contract the binary states (`profile-service api-contract`):
    every route with exactly its methods, every problem kind described and its status documented."""
    doc = openapi()
    out = subprocess.run([BIN, "api-contract"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    contract = json.loads(out.stdout)
    routes, kinds = contract["routes"], contract["problem_kinds"]
    paths = doc["paths"]
    for route, methods in routes.items():
        assert route in paths, f"route {route} is not documented"
        documented = sorted(m.upper() for m in paths[route] if m in ("get", "head", "put", "post", "delete", "patch"))
        assert documented == sorted(methods), f"{route}: documented {documented}, answered {methods}"
        assert paths[route]["x-unsupported-methods"]["allowed"] == methods, route
    for path in paths:
        assert path in routes, f"documented path {path} is not a route"
    described = doc["components"]["schemas"]["Problem"]["properties"]["type"]["description"]
    missing = sorted(k for k in kinds if not re.search(rf"\b{re.escape(k)}\b", described))
    assert not missing, f"problem kinds missing from openapi.yaml: {missing}"
    profile = paths["/users/profile/{id}"]
    for kind, status in kinds.items():
        code = str(status)
        assert code == "405" or code in profile["put"]["responses"] or code in profile["get"]["responses"], \
            f"status {code} ({kind}) is answered by the service but not documented on /users/profile/{{id}}"


# MARK: live servers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_arguments():
    help_text = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True, timeout=30).stdout
    return ["--auth", "none"] if "--auth" in help_text else []


class Instance:
    def __init__(self, tmp, name):
        self.port = free_port()
        self.log_path = os.path.join(tmp, f"{name}.log")
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [BIN, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--database-url", DB_URL,
             "--memcached", MEMCACHED, "--workers", "4"] + serve_arguments(),
            stdout=subprocess.DEVNULL, stderr=self.log, start_new_session=True)
        try:
            wait_for(lambda: get(self.port, "/readyz")[0] == 200, f"{name} on :{self.port}", self.process)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                return self.process.wait()
        return self.process.returncode

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


def request(conn_or_port, method, path, body=None, headers=None):
    conn = conn_or_port if isinstance(conn_or_port, http.client.HTTPConnection) else \
        http.client.HTTPConnection("127.0.0.1", conn_or_port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    finally:
        if conn is not conn_or_port:
            conn.close()


def get(port, path):
    return request(port, "GET", path)


def psql(sql):
    r = subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", DB_URL, "-c", sql], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


class Fixture:
    """Two profiles in PostgreSQL at ids nobody else uses, removed afterwards."""
    def __init__(self):
        base = 8_000_000_000_000 + (uuid.uuid4().int % 1_000_000_000) * 10
        self.ids = [base + 1, base + 2]
        self.missing = base + 3
        self.created = base + 4
        tag = uuid.uuid4().hex[:8]
        psql("INSERT INTO user_profiles (id, username, display_name) VALUES "
             f"({self.ids[0]}, 'deploy_a_{tag}', 'Deploy A'), ({self.ids[1]}, 'deploy_b_{tag}', 'Deploy B')")
        self.tag = tag

    def close(self):
        psql(f"DELETE FROM user_profiles WHERE id BETWEEN {self.ids[0]} AND {self.created}")


class Gateway:
    def __init__(self, tmp, upstream_ports):
        self.port = free_port()
        self.tmp = tmp
        conf = nginx_local_config(tmp, self.port, upstream_ports)
        nginx_test(tmp, conf)
        self.process = subprocess.Popen(
            ["nginx", "-p", tmp + "/", "-c", conf, "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "logs/nginx.stderr"), "wb"), start_new_session=True)
        try:
            wait_for(lambda: get(self.port, "/healthz")[0] == 200, f"nginx on :{self.port}", self.process)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def access_log(self):
        with open(os.path.join(self.tmp, "logs/access.log")) as f:
            return f.read().splitlines()


@check("live")
def gateway_in_front_of_two_instances():
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        fixture = Fixture()
        instances, gateway = [], None
        try:
            instances.append(Instance(tmp, "a"))
            instances.append(Instance(tmp, "b"))
            gateway = Gateway(tmp, [i.port for i in instances])
            conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
            sent, by_status = {}, {}
            for n in range(200):
                profile_id = fixture.ids[n % 2] if n % 4 else fixture.missing
                rid = f"deploy-check-{fixture.tag}-{n}"
                status, headers, body = request(conn, "GET", f"/users/profile/{profile_id}", headers={"X-Request-ID": rid})
                expected = 404 if profile_id == fixture.missing else 200
                assert status == expected, f"request {n}: {status} for id {profile_id}: {body[:200]!r}"
                assert headers.get("x-request-id") == rid, f"request id not echoed: {headers.get('x-request-id')}"
                if status == 200:
                    assert json.loads(body)["id"] == profile_id
                sent[rid] = status
                by_status[status] = by_status.get(status, 0) + 1
            conn.close()
            # nginx mints a request id when the client sends none.
            status, headers, _ = get(gateway.port, f"/users/profile/{fixture.ids[0]}")
            assert status == 200 and re.fullmatch(r"[0-9a-f]{32}", headers.get("x-request-id", "")), headers
            # /metrics and unknown paths stop at the gateway.
            for path in ("/metrics", "/", "/users/profile/../../metrics"):
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
            # The instances' own view, where they already log request ids (access log being added).
            seen = [sum(1 for rid in sent if rid + '"' in i.stderr() or re.search(rf"{re.escape(rid)}\b", i.stderr()))
                    for i in instances]
            assert sum(seen) == 200 and min(seen) > 0, f"instances logged {seen} of 200 request ids"
            print(f"      per instance (their own access logs): {seen}")
            metrics = [get(i.port, "/metrics") for i in instances]
            for status, headers, body in metrics:
                assert status == 200, f"/metrics answered {status}"
                assert headers.get("content-type", "").startswith("text/plain"), headers
                assert re.search(rb"(?m)^# TYPE \S+ (counter|histogram|gauge)", body), body[:200]
            # One instance stops (SIGTERM, graceful): the gateway keeps answering from the other.
            assert instances[0].stop() == 0, f"instance a exited with {instances[0].process.returncode}"
            conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
            for n in range(40):
                status, _, body = request(conn, "GET", f"/users/profile/{fixture.ids[n % 2]}")
                assert status == 200, f"after stopping one instance, request {n}: {status} {body[:200]!r}"
            conn.close()
        finally:
            if gateway:
                gateway.stop()
            for i in instances:
                i.stop()
            fixture.close()


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

    def operation(self, path, method):
        template = "/users/profile/{id}" if path.startswith("/users/profile/") else path.split("?")[0]
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


@check("live")
def service_answers_conform_to_openapi():
    spec = OpenAPI()
    with tempfile.TemporaryDirectory() as tmp:
        fixture = Fixture()
        instance = None
        try:
            instance = Instance(tmp, "conformance")
            port = instance.port
            one, missing, new = fixture.ids[0], fixture.missing, fixture.created
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
                ("DELETE", f"/users/profile/{one}", None, {}, 405),
                ("POST", "/healthz", None, {}, 405),
                ("GET", "/no/such/route", None, {}, 404),
                ("PUT", f"/users/profile/{one}", b'{"display_name":"","version":1}', json_headers, 422),
                ("PUT", f"/users/profile/{one}", b'{"display_name":"x"}', json_headers, 428),
                ("PUT", f"/users/profile/{one}", b'{"display_name":"x","version":1}', {**json_headers, "If-Match": '"2"'}, 412),
                ("PUT", f"/users/profile/{one}", b'{"display_name":"x","version":1', json_headers, 400),
                ("PUT", f"/users/profile/{one}", b'{"display_name":1,"version":1}', json_headers, 400),
                ("PUT", f"/users/profile/{one}", b'{"display_name":"x","version":1}', {"Content-Type": "text/plain"}, 415),
                ("PUT", f"/users/profile/{one}", b'{"display_name":"' + b"x" * 5000 + b'","version":1}', json_headers, 413),
                ("PUT", f"/users/profile/{one}", b'{"display_name":"Deploy A2","version":1}', json_headers, 200),
                ("PUT", f"/users/profile/{one}", b'{"display_name":"Deploy A3","version":1}', json_headers, 409),
                ("PUT", f"/users/profile/{new}", json.dumps({"username": f"deploy_c_{fixture.tag}",
                                                             "display_name": "Deploy C"}).encode(),
                 {**json_headers, "If-None-Match": "*"}, 201),
                ("PUT", f"/users/profile/{new}", json.dumps({"username": f"deploy_d_{fixture.tag}",
                                                             "display_name": "Deploy D"}).encode(),
                 {**json_headers, "If-None-Match": "*"}, 409),
                ("GET", "/healthz", None, {}, 200),
                ("HEAD", "/healthz", None, {}, 200),
                ("GET", "/readyz", None, {}, 200),
                ("HEAD", "/metrics", None, {}, 200),
            ]
            for method, path, body, headers, expected in cases:
                status, response_headers, data = request(port, method, path, body, headers)
                assert status == expected, f"{method} {path}: expected {expected}, got {status}: {data[:300]!r}"
                spec.conform(path, method, status, response_headers, data)
                if status == 405:
                    allowed = spec.doc["paths"]["/users/profile/{id}" if "profile" in path else path]["x-unsupported-methods"]["allowed"]
                    assert [a.strip() for a in response_headers["allow"].split(",")] == allowed, response_headers["allow"]
                if status == 409 and b"version-conflict" in data:
                    assert json.loads(data)["current"]["version"] == 2
                if status == 201:
                    assert response_headers["location"] == f"/users/profile/{new}"
            status, headers, data = get(port, "/metrics")
            if status == 200:
                spec.conform("/metrics", "GET", status, headers, data)
            else:
                note(f"GET /metrics answered {status}; its conformance is checked once it is routed")
            print(f"      {len(cases)} requests: statuses, headers and bodies match openapi.yaml")
        finally:
            if instance:
                instance.stop()
            fixture.close()


# MARK: live updates (Server-Sent Events) through the gateway

@check("nginx")
def nginx_event_streams_unbuffered():
    help_text = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True).stdout
    heartbeat = int(re.search(r"--sse-heartbeat-s\b.*?default: (\d+)", help_text, re.S).group(1))
    for path in ("deploy/nginx.conf", "deploy/nginx.compose.conf"):
        text = re.sub(r"#[^\n]*", "", read(path))
        block = re.search(r"location ~ \^/users/profile/\[\^/\]\+/events\$ \{([^}]*)\}", text)
        assert block, f"{path}: no location for /users/profile/{{id}}/events"
        body = " ".join(block.group(1).split())
        assert "proxy_pass http://profile_service" in body and "proxy_buffering off" in body, body
        timeout = int(re.search(r"proxy_read_timeout (\d+)s", body).group(1))
        assert timeout > 2 * heartbeat, f"{path}: read timeout {timeout}s must exceed twice the {heartbeat}s heartbeat"


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


@check("live")
def event_stream_through_the_gateway():
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        fixture = Fixture()
        instances, gateway, streams = [], None, []
        try:
            instances.append(Instance(tmp, "a"))
            instances.append(Instance(tmp, "b"))
            gateway = Gateway(tmp, [i.port for i in instances])
            profile_id = fixture.ids[0]
            # Two streams through nginx: round robin puts them on both instances.
            for _ in range(2):
                stream = EventStream(gateway.port, f"/users/profile/{profile_id}/events")
                streams.append(stream)
                assert stream.status == 200, stream.status
                assert stream.headers.get("content-type") == "text/event-stream", stream.headers
                first = stream.next_event(5)
                assert first and first["id"] == "1", first
                assert json.loads(first["data"])["display_name"] == "Deploy A"
            # A write through the gateway lands on one instance; the other hears of it from the
            # change feed (running in one of them): commit stream -> memcached -> NOTIFY -> LISTEN.
            wait_for(lambda: any(b'"state":"active"' in get(i.port, "/readyz")[2] for i in instances),
                     "an active change-feed consumer")
            status, _, body = request(
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
            resumed = EventStream(gateway.port, f"/users/profile/{profile_id}/events", {"Last-Event-ID": "2"})
            streams.append(resumed)
            assert resumed.status == 200 and resumed.next_event(0.5) is None
        finally:
            for stream in streams:
                stream.close()
            if gateway:
                gateway.stop()
            for i in instances:
                i.stop()
            fixture.close()


def main():
    static_only = "--static" in sys.argv[1:]
    passed = failed = 0
    for group, function in CHECKS:
        if static_only and group == "live":
            continue
        name = f"{group}: {function.__name__}"
        started = time.time()
        try:
            function()
        except Exception as error:  # report every check, then fail the run
            failed += 1
            print(f"FAIL  {name}: {error}")
            if not isinstance(error, AssertionError):
                traceback.print_exc()
        else:
            passed += 1
            print(f"ok    {name} ({time.time() - started:.1f}s)")
    print(f"deploy checks: {passed} passed, {failed} failed" + (f" ({len(NOTES)} notes)" if NOTES else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
