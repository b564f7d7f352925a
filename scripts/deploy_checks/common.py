"""What both parts of the deployment checks use: the registry and runner of checks, the files of
the repository, the binary's own description of itself, openapi.yaml and the local nginx
configuration."""

import functools
import os
import re
import subprocess
import time
import traceback

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("PROFILE_SERVICE_BIN", os.path.join(ROOT, ".build/debug/profile-service"))


class Checks:
    """One part's checks, in the order they were registered with `@checks("group")`."""

    def __init__(self):
        self.entries = []

    def __call__(self, group):
        def register(function):
            self.entries.append((group, function))
            return function
        return register

    def run(self):
        """Runs every check, printing one line each; returns (passed, failed)."""
        passed = failed = 0
        for group, function in self.entries:
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
        return passed, failed


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def load_yaml(path):
    return yaml.safe_load(read(path))


def openapi():
    return load_yaml("openapi.yaml")


@functools.cache
def binary_help(subcommand):
    """`profile-service SUBCOMMAND --help`: the options, their defaults and variables."""
    out = subprocess.run([BIN, subcommand, "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"{BIN} {subcommand} --help exited {out.returncode}: {out.stderr}"
    return out.stdout


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
