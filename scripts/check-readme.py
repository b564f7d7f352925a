#!/usr/bin/env python3
"""Runs README.md's "Read and write a profile" commands, as a newcomer pastes them, against a real
instance of the built binary on the servers of scripts/deps.sh (`eval "$(scripts/deps.sh env)"`
first), and checks what they answer: the read 200, the PUT 200 with the new version, the read
with the new version as its floor 200 with the new name.

The only edits to the commands are where they point: the instance's port instead of 8080, its
development secret instead of .state/dev-jwt-secret, the binary given instead of the release
build. Profile 1 is created when it is missing, as scripts/run.sh creates it (under a username
of its own, so that no test's "ada" stands in its way).

  scripts/check-readme.py --binary .build/debug/profile-service
"""
import argparse, os, re, socket, subprocess, sys, tempfile, time

from service_helpers import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def commands(readme):
    """The first shell block under the heading "Read and write a profile"."""
    section = readme.split("## Read and write a profile", 1)
    if len(section) < 2:
        sys.exit("check-readme: README.md has no section 'Read and write a profile'")
    block = re.search(r"```sh\n(.*?)```", section[1], re.S)
    if not block:
        sys.exit("check-readme: no ```sh block in 'Read and write a profile'")
    return block.group(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build/debug/profile-service"))
    binary = os.path.abspath(parser.parse_args().binary)
    database = os.environ.get("PROFILE_DATABASE_URL", "postgres://postgres@127.0.0.1:55432/profiles")
    subprocess.run(
        ["psql", "-X", "-q", database, "-c",
         "INSERT INTO user_profiles (id, username, display_name) VALUES (1, 'readme-check-ada', 'Ada Lovelace') "
         "ON CONFLICT DO NOTHING"],
        check=True)
    script = commands(open(os.path.join(ROOT, "README.md")).read())
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        secret = os.path.join(folder, "dev-jwt-secret")
        with open(secret, "w") as f:
            f.write("readme-check-" + os.urandom(24).hex())
        os.chmod(secret, 0o600)
        script = (script.replace("localhost:8080", f"localhost:{port}")
                  .replace(".state/dev-jwt-secret", secret)
                  .replace(".build/release/profile-service", binary))
        log = open(os.path.join(folder, "service.log"), "w")
        service = subprocess.Popen(
            [binary, "serve", "--port", str(port), "--jwt-secret-file", secret, "--no-access-log"],
            stdout=log, stderr=log)
        try:
            for _ in range(300):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, capture_output=True, text=True,
                                 timeout=60)
        finally:
            service.terminate()
            service.wait(timeout=15)
    out = run.stdout
    # curl -i prints no newline after a body: the next status line may follow it on its line.
    statuses = re.findall(r"HTTP/1\.1 (\d{3}) ", out)
    failures = []
    if run.returncode != 0:
        failures.append(f"the commands exited {run.returncode}: {run.stderr.strip()[-500:]}")
    if statuses != ["200", "200", "200"]:
        failures.append(f"expected the read, the PUT and the floored read to answer 200, got {statuses}")
    if out.count('"display_name":"Ada King"') < 2:
        failures.append("the PUT's answer and the floored read do not both show the new name")
    if failures:
        print("check-readme: FAIL\n  " + "\n  ".join(failures) + "\n--- output ---\n" + out[-2000:], file=sys.stderr)
        sys.exit(1)
    print(f"check-readme: the README's read, token, PUT and floored read work ({len(statuses)} answers, all 200)")


if __name__ == "__main__":
    main()
