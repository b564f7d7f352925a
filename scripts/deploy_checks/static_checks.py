"""Static checks of the deployment files and the API document: no server is started.

docker-compose.yml (services, health checks, start order, the change feed's PostgreSQL settings,
configuration and secret), the Dockerfile and .dockerignore, deploy/nginx.conf (`nginx -t` on a
local copy, its directives, in step with deploy/nginx.compose.conf, event streams unbuffered), the
systemd unit (`systemd-analyze verify` where it is installed), openapi.yaml (openapi-spec-validator)
and openapi.yaml against the service's routes and problem kinds.

No server runs, but the built binary (PROFILE_SERVICE_BIN, default .build/debug/profile-service)
is asked to describe itself, and these checks fail without it:
  - openapi_matches_routes_and_problem_kinds: `profile-service api-contract` (routes, methods,
    problem kinds and their statuses);
  - compose_configuration_and_secret, systemd_unit_hardened_and_graceful: the PROFILE_* variables
    `serve --help` and `migrate --help` document;
  - nginx_gateway_directives, nginx_event_streams_unbuffered: the defaults of `serve --help`
    (idle timeout, event-stream heartbeat) that nginx's timeouts must fit.
Every other check reads only the files.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile

from openapi_spec_validator import validate as validate_openapi

from .common import BIN, ROOT, Checks, binary_help, load_yaml, nginx_local_config, nginx_test, openapi, read

checks = Checks()


# MARK: docker-compose.yml

def compose():
    return load_yaml("docker-compose.yml")


def replicas(services):
    return sorted(name for name, s in services.items() if "serve" in (s.get("command") or []))


def help_variables():
    """PROFILE_* variables the binary documents in `serve --help` and `migrate --help`."""
    return set(re.findall(r"\b(PROFILE_[A-Z0-9_]+)\b", binary_help("serve") + binary_help("migrate")))


def serve_default(option):
    """The default `serve --help` states for a numeric option."""
    return int(re.search(rf"{re.escape(option)}\b.*?default: (\d+)", binary_help("serve"), re.S).group(1))




@checks("compose")
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
    # The streaming standby (issue 22): the primary's image, copied from it by pg_basebackup -R on
    # its first start, a hot standby, reachable on the compose network only.
    standby = services.get("postgres-standby")
    assert standby, "missing service postgres-standby"
    assert standby["image"] == services["postgres"]["image"], (standby["image"], services["postgres"]["image"])
    script = " ".join(str(part) for part in (standby.get("entrypoint") or []) + (standby.get("command") or []))
    assert re.search(r"pg_basebackup\b[^\n]*(\\\n[^\n]*)*\s-R\b", script), "postgres-standby is not made by pg_basebackup -R"
    assert "host=postgres " in script or "-h postgres " in script, "pg_basebackup must copy the postgres service"
    assert "hot_standby=on" in script, "postgres-standby must run with hot_standby=on"
    hba = [m for m in services["postgres"].get("volumes") or [] if m.endswith(":/etc/postgresql/pg_hba.conf:ro")]
    assert hba and "hba_file=/etc/postgresql/pg_hba.conf" in (services["postgres"].get("command") or []), hba
    rules = [l.split() for l in read(hba[0].split(":")[0]).splitlines() if l.strip() and not l.startswith("#")]
    assert any(r[:2] == ["host", "replication"] and r[3] == "all" for r in rules), "postgres refuses replication from the network"
    # The replicas read misses from it, and do not wait for it: without it they read postgres.
    for name in reps:
        urls = str((services[name].get("environment") or {}).get("PROFILE_REPLICA_DATABASE_URLS", ""))
        assert "@postgres-standby:5432/" in urls, f"{name} does not read the standby: {urls!r}"
        assert "postgres-standby" not in (services[name].get("depends_on") or {}), f"{name} must start without the standby"


@checks("compose")
def compose_health_checks():
    services = compose()["services"]
    def test_of(name):
        hc = services[name].get("healthcheck")
        assert hc and hc.get("test"), f"{name} has no health check"
        test = hc["test"]
        return " ".join(test) if isinstance(test, list) else test
    assert "pg_isready" in test_of("postgres")
    assert "pg_isready" in test_of("postgres-standby")
    assert "pg_isready" in test_of("pgbouncer") and "6432" in test_of("pgbouncer"), test_of("pgbouncer")
    for name in ("memcached-1", "memcached-2"):
        assert "11211" in test_of(name), test_of(name)
    for name in replicas(services):
        assert "/readyz" in test_of(name), test_of(name)
    assert "/healthz" in test_of("gateway") or "/readyz" in test_of("gateway")


@checks("compose")
def compose_dependencies_gated_on_health():
    services = compose()["services"]
    def deps(name):
        d = services[name].get("depends_on") or {}
        assert isinstance(d, dict), f"{name}: depends_on must use conditions"
        return {k: v.get("condition") for k, v in d.items()}
    assert deps("migrate") == {"postgres": "service_healthy"}, deps("migrate")
    assert deps("postgres-standby") == {"postgres": "service_healthy"}, deps("postgres-standby")
    assert deps("pgbouncer") == {"postgres": "service_healthy"}, deps("pgbouncer")
    for name in replicas(services):
        assert deps(name) == {
            "migrate": "service_completed_successfully",
            "pgbouncer": "service_healthy",
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


@checks("compose")
def compose_pgbouncer_pools_as_production_does():
    """Transaction pooling, 20 server connections, the compose PostgreSQL behind it, and none of the
    workarounds (ignore_startup_parameters) the service does not need."""
    pgbouncer = compose()["services"]["pgbouncer"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in pgbouncer["volumes"]}
    ini = read(mounts["/etc/pgbouncer/pgbouncer.ini"])
    settings = dict(re.findall(r"^[ \t]*(\w+)[ \t]*=[ \t]*(.*?)[ \t]*$", ini, re.M))
    assert settings.get("pool_mode") == "transaction", settings.get("pool_mode")
    assert int(settings.get("default_pool_size", 0)) >= 18, "16 pooled connections and 2 fetchers per instance"
    assert "ignore_startup_parameters" not in settings, "the service sends no startup parameters to ignore"
    assert settings.get("listen_port") == "6432" and "host=postgres port=5432" in settings.get("profiles", ""), settings
    assert "scram-sha-256" == settings.get("auth_type"), settings.get("auth_type")
    assert '"profiles"' in read(mounts["/etc/pgbouncer/userlist.txt"])
    assert "pgbouncer" in pgbouncer["build"]["dockerfile_inline"], "the pooler is Debian's pgbouncer package"


@checks("compose")
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


@checks("compose")
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
        if name == "migrate":
            assert "@postgres:5432/" in url, f"migrate must reach PostgreSQL itself: {url}"
        else:
            # Requests through the pooler; replication and LISTEN straight to PostgreSQL.
            assert "@pgbouncer:6432/" in url, f"{name}: {url}"
            assert "@postgres:5432/" in env.get("PROFILE_DATABASE_DIRECT_URL", ""), f"{name} has no direct line"
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


@checks("docker")
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


@checks("docker")
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

@checks("nginx")
def nginx_local_config_passes_nginx_t():
    with tempfile.TemporaryDirectory() as tmp:
        out = nginx_test(tmp, nginx_local_config(tmp, 18080, [18081, 18082]))
        assert "syntax is ok" in out and "test is successful" in out, out


def uncommented(path):
    return re.sub(r"#[^\n]*", "", read(path))


def directives(path):
    text = uncommented(path)
    return [" ".join(d.split()) for d in re.split(r"[;{}]", text) if d.strip()]


@checks("nginx")
def nginx_gateway_directives():
    ds = directives("deploy/nginx.conf")
    servers = [d for d in ds if re.match(r"server 127\.0\.0\.1:\d+", d)]
    assert [s.split()[1] for s in servers] == ["127.0.0.1:8081", "127.0.0.1:8082"], servers
    for needed in ("upstream profile_service", "keepalive 64", "keepalive_timeout 60s", "proxy_http_version 1.1",
                   'proxy_set_header Connection ""', "proxy_set_header X-Request-ID $profile_request_id",
                   "listen 8080", "location /users/profile/", "location /users/by-username/", "location = /users/profiles",
                   "location = /healthz", "location = /readyz"):
        assert needed in ds, f"deploy/nginx.conf lacks `{needed}`"
    assert "default $http_x_request_id" in ds and '"" $request_id' in ds, "X-Request-ID must default to $request_id"
    # nginx must close idle upstream connections before the service does.
    idle = serve_default("--idle-timeout-s")
    assert 60 < idle, f"service idle timeout {idle}s must exceed nginx's 60s"
    # /metrics is never proxied.
    text = uncommented("deploy/nginx.conf")
    metrics = re.search(r"location = /metrics \{([^}]*)\}", text)
    assert metrics and "proxy_pass" not in metrics.group(1) and "return 404" in metrics.group(1)
    assert re.search(r"location / \{\s*return 404;\s*\}", text), "unknown paths must not be proxied"


@checks("nginx")
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


@checks("nginx")
def nginx_event_streams_unbuffered():
    heartbeat = serve_default("--sse-heartbeat-s")
    for path in ("deploy/nginx.conf", "deploy/nginx.compose.conf"):
        text = uncommented(path)
        for route, pattern in (
            ("/users/profile/{id}/events", r"location ~ \^/users/profile/\[\^/\]\+/events\$ \{([^}]*)\}"),
            ("/users/profiles/events", r"location = /users/profiles/events \{([^}]*)\}"),
        ):
            block = re.search(pattern, text)
            assert block, f"{path}: no location for {route}"
            body = " ".join(block.group(1).split())
            assert "proxy_pass http://profile_service" in body and "proxy_buffering off" in body, body
            timeout = int(re.search(r"proxy_read_timeout (\d+)s", body).group(1))
            assert timeout > 2 * heartbeat, f"{path}: read timeout {timeout}s must exceed twice the {heartbeat}s heartbeat"


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


@checks("systemd")
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

@checks("openapi")
def openapi_document_is_valid():
    validate_openapi(openapi())


@checks("openapi")
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
