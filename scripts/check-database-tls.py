#!/usr/bin/env python3
"""PostgreSQL as production runs it: TLS with a certificate from a CA of its own, and a
SCRAM-SHA-256 password. Starts a PostgreSQL of its own (initdb in a temporary folder, as the
postgres user; TLS only, SCRAM only, on a free loopback port) and a memcached of its own, makes a
test CA and a server certificate with openssl, and runs the built binary against them:

  1. `sslmode=verify-full` with the right CA and the password from --database-password-file:
     migrate, serve, a PUT and its read, a psql UPDATE served new within 2 s (the change feed over
     TLS and SCRAM too), and the password in none of argv, the environment, the log, /metrics or
     /readyz;
  2. the wrong CA: `serve` exits non-zero at start, naming "certificate verify failed";
  3. a wrong password: `serve` exits non-zero at start, naming "password authentication failed";
     `migrate` too;
  4. PostgreSQL not running: `serve` starts (cached reads go on), and /readyz answers 503 with
     libpq's reason in `database_error`.

Needs openssl, PostgreSQL's server binaries and memcached (scripts/deps.sh installs them).

  scripts/check-database-tls.py --binary .build/debug/profile-service
"""
import argparse, glob, json, os, shutil, subprocess, sys, tempfile, time

from checklist import check, failures
from service_helpers import JSON, free_port, request_url

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASSWORD = "scram-" + os.urandom(12).hex()
def run(arguments, **options):
    done = subprocess.run(arguments, capture_output=True, text=True, **options)
    if done.returncode != 0:
        sys.exit(f"check-database-tls: {' '.join(arguments)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def as_postgres(arguments, **options):
    return run(["runuser", "-u", "postgres", "--"] + arguments, **options)


def pg_bin(name):
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        sys.exit(f"check-database-tls: no {name} under /usr/lib/postgresql (run scripts/deps.sh start)")
    return found[-1]


def make_certificates(folder):
    """A CA, a server certificate it signs for 127.0.0.1 and localhost, and an unrelated CA."""
    def openssl(*arguments):
        run(["openssl"] + list(arguments), cwd=folder)
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=profile-service test {ca}",
                "-keyout", f"{ca}.key", "-out", f"{ca}.crt")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr")
    with open(os.path.join(folder, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", "san.ext", "-out", "server.crt")


def start_postgres(folder, port):
    data = os.path.join(folder, "data")
    as_postgres([pg_bin("initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8"])
    for name in ("server.crt", "server.key"):
        shutil.copy(os.path.join(folder, name), os.path.join(data, name))
        shutil.chown(os.path.join(data, name), "postgres", "postgres")
    os.chmod(os.path.join(data, "server.key"), 0o600)
    with open(os.path.join(data, "postgresql.conf"), "a") as f:
        f.write(f"listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{folder}'\n"
                "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
                "password_encryption = 'scram-sha-256'\nwal_level = logical\nfsync = off\n")
    with open(os.path.join(data, "pg_hba.conf"), "w") as f:
        # The socket for this script's own setup; over TCP only TLS with a SCRAM password.
        f.write("local all postgres trust\n"
                "hostssl all app 127.0.0.1/32 scram-sha-256\n"
                "hostssl replication app 127.0.0.1/32 scram-sha-256\n"
                "host all all 127.0.0.1/32 reject\n")
    as_postgres([pg_bin("pg_ctl"), "-D", data, "-l", os.path.join(folder, "postgres.log"), "-w", "-t", "60", "start"])
    psql = ["psql", "-X", "-q", "-h", folder, "-p", str(port), "-U", "postgres"]
    run(psql + ["-d", "postgres", "-c", f"CREATE ROLE app LOGIN REPLICATION PASSWORD '{PASSWORD}'",
                "-c", "CREATE DATABASE profiles OWNER app"])
    return data, psql + ["-d", "profiles"]


def wait_ready(url, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            status, body = request_url(url + "/readyz")
            if status in (200, 503):
                return status, body
        except OSError:
            pass
        time.sleep(0.1)
    return None, ""


class Service:
    def __init__(self, binary, folder, name, database_url, password_file, memcached, extra=()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(folder, f"{name}.log")
        arguments = [binary, "serve", "--port", str(self.port), "--auth", "none", "--memcached", memcached,
                     "--database-url", database_url, "--database-password-file", password_file] + list(extra)
        self.process = subprocess.Popen(arguments, stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)

    def exit_status(self, seconds=15):
        try:
            return self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def log(self):
        return open(self.log_path).read()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build/debug/profile-service"))
    binary = os.path.abspath(parser.parse_args().binary)
    folder = tempfile.mkdtemp(prefix="profile-tls-")
    os.chmod(folder, 0o755)
    shutil.chown(folder, "postgres", "postgres")  # initdb makes the data folder, the server its socket
    data = None
    memcached = None
    services = []
    try:
        make_certificates(folder)
        pg_port = free_port()
        data, psql = start_postgres(folder, pg_port)
        mc_port = free_port()
        memcached = subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p", str(mc_port), "-U", "0", "-u", "nobody"])
        nodes = f"127.0.0.1:{mc_port}"
        password_file = os.path.join(folder, "password")
        with open(password_file, "w") as f:
            f.write(PASSWORD + "\n")
        os.chmod(password_file, 0o600)
        wrong_password_file = os.path.join(folder, "wrong-password")
        with open(wrong_password_file, "w") as f:
            f.write("not-" + PASSWORD + "\n")

        def url(ca):
            return (f"postgres://app@127.0.0.1:{pg_port}/profiles?sslmode=verify-full"
                    f"&sslrootcert={os.path.join(folder, ca)}")

        # 1. The right CA and the password from a file.
        migrate = subprocess.run([binary, "migrate", "--database-url", url("ca.crt"), "--database-password-file",
                                  password_file, "--migrations-directory", os.path.join(ROOT, "migrations")],
                                 capture_output=True, text=True)
        check(migrate.returncode == 0, f"migrate over verify-full with a SCRAM password from a file (exit {migrate.returncode}: {migrate.stderr.strip()[-300:]})")
        service = Service(binary, folder, "verified", url("ca.crt"), password_file, nodes)
        services.append(service)
        status, body = wait_ready(service.url)
        check(status == 200, f"serve over verify-full answers /readyz 200 ({status} {body[:200]})")
        put = request_url(f"{service.url}/users/profile/4242", "PUT",
                          '{"username":"tls4242","display_name":"Over TLS"}', JSON)
        check(put[0] in (200, 201), f"a PUT over TLS: {put[0]}")
        read = request_url(f"{service.url}/users/profile/4242")
        check(read[0] == 200 and "Over TLS" in read[1], f"its read: {read[0]}")
        deadline = time.time() + 20
        while time.time() < deadline and '"state":"active"' not in request_url(service.url + "/readyz")[1]:
            time.sleep(0.2)
        run(psql + ["-c", "UPDATE user_profiles SET display_name = 'Changed in psql' WHERE id = 4242"])
        changed_at = time.time()
        seen = None
        while time.time() < changed_at + 2:
            if "Changed in psql" in request_url(f"{service.url}/users/profile/4242")[1]:
                seen = time.time() - changed_at
                break
            time.sleep(0.05)
        check(seen is not None, f"a psql UPDATE is served new within 2 s through the change feed over TLS ({seen and f'{seen * 1000:.0f} ms'})")
        pid = service.process.pid
        argv = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        environ = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
        metrics = request_url(service.url + "/metrics")[1]
        readiness = request_url(service.url + "/readyz")[1]
        for where, text in (("argv", argv), ("the environment", environ), ("/metrics", metrics),
                            ("/readyz", readiness), ("the log", service.log())):
            check(PASSWORD not in text, f"the password is not in {where}")
        service.stop()

        # 2. The wrong CA; 3. a wrong password: exit at start, naming the cause.
        for name, database_url, password, cause in (
                ("wrong-ca", url("other-ca.crt"), password_file, "certificate verify failed"),
                ("wrong-password", url("ca.crt"), wrong_password_file, "password authentication failed")):
            service = Service(binary, folder, name, database_url, password, nodes)
            services.append(service)
            code = service.exit_status()
            log = service.log()
            check(code not in (None, 0) and cause in log,
                  f"{name}: serve exits at start ({code}) naming \"{cause}\": {log.strip().splitlines()[-1:] if log else ''}")
            check(PASSWORD not in log, f"{name}: the password is not in the log")
        migrate = subprocess.run([binary, "migrate", "--database-url", url("ca.crt"), "--database-password-file",
                                  wrong_password_file, "--migrations-directory", os.path.join(ROOT, "migrations")],
                                 capture_output=True, text=True)
        check(migrate.returncode != 0 and "password authentication failed" in migrate.stderr,
              f"migrate with a wrong password exits {migrate.returncode} naming the cause: {migrate.stderr.strip()[-200:]}")

        # 4. PostgreSQL stopped: a failure retrying can fix; serve starts and /readyz says why.
        as_postgres([pg_bin("pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"])
        service = Service(binary, folder, "postgres-down", url("ca.crt"), password_file, nodes)
        services.append(service)
        status, body = wait_ready(service.url)
        try:
            reason = json.loads(body).get("database_error", "") if body else ""
        except ValueError:
            reason = ""
        check(status == 503 and "refused" in reason.lower(),
              f"PostgreSQL down at start: serve runs, /readyz 503 with database_error \"{reason}\"")
        check(service.process.poll() is None, "PostgreSQL down at start: serve keeps running")
    finally:
        for service in services:
            service.stop()
        if memcached:
            memcached.terminate()
        if data and os.path.exists(os.path.join(data, "postmaster.pid")):
            subprocess.run(["runuser", "-u", "postgres", "--", pg_bin("pg_ctl"), "-D", data, "-m", "immediate", "stop"],
                           capture_output=True)
        if failures:
            print(f"check-database-tls: kept {folder} for a look", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    if failures:
        sys.exit(f"check-database-tls: {len(failures)} failed")
    print("check-database-tls: all passed")


if __name__ == "__main__":
    main()
