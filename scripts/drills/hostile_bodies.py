"""Hostile write bodies beside a hit load, black box against `serve` with its defaults: what a
60 KB body of thousands of distinct members costs, against a valid profile of the longest
encoding, and what either does to the hits answered meanwhile. Run `eval "$(scripts/deps.sh env)"`
and build first:

    python3 scripts/drills/hostile_bodies.py [--seconds 10] [--burst 8] [--every-ms 200]

PROFILE_SERVICE_BIN picks the binary (default .build/debug/profile-service; measure a release
build); BASELINE_BIN, when set, runs the same rounds against a second binary (an earlier
revision) after the first, so both are printed side by side. Needs wrk."""
import argparse, functools, json, os, re, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import drill  # noqa: E402
from drill import BIN, serve  # noqa: E402

SECRET = os.path.join(tempfile.mkdtemp(), "jwt-secret")
with open(SECRET, "w") as f:
    f.write("hostile-bodies-drill-secret-" + "x" * 40)


def token(binary, subject):
    return subprocess.run([binary, "token", "--sub", str(subject), "--ttl", "3600", "--jwt-secret-file", SECRET],
                          check=True, capture_output=True, text=True).stdout.strip()


request = functools.partial(drill.request, timeout=60)  # this drill's requests wait up to 60 s


def start(binary):
    return serve(binary, ["--jwt-secret-file", SECRET, "--no-access-log"], "hostile")


def hostile_body():
    """~60 KB: 7,696 distinct two- and three-letter members, none of them a field."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    names = [a + b for a in letters for b in letters] + [a + b + c for a in letters for b in letters for c in letters]
    names = [n for n in names if n not in ("bio", "id")][:7696]
    return ("{" + ",".join(f'"{n}":1' for n in names) + "}").encode()


def longest_valid_body():
    """The longest valid patch of the standard fields, the longest way JSON allows: every
    character a \\u escape, every emoji its two surrogates (Python's json.dumps writes them so)."""
    bio = "\U0001F600" * 500
    location = "\U0001F600" * 100
    url = "https://example.com/" + "a" * 2028
    def escaped(text):
        return "".join(f"\\u{unit:04x}" for unit in memoryview(text.encode("utf-16-le")).cast("H"))
    members = {"display_name": "\U0001F600" * 64, "bio": bio, "location": location, "avatar_url": url, "website": url}
    return ("{" + ",".join(f'"{escaped(k)}":"{escaped(v)}"' for k, v in members.items()) + "}").encode()


def wrk(port, path, seconds):
    out = subprocess.run(["wrk", "-t1", "-c16", f"-d{seconds}s", "--latency", f"http://127.0.0.1:{port}{path}"],
                         check=True, capture_output=True, text=True).stdout

    def millis(label):
        match = re.search(rf"^\s+{label}%\s+([0-9.]+)(us|ms|s)\s*$", out, re.M)
        value, unit = float(match.group(1)), match.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    return rps, millis("50"), millis("99")


def bursts(port, path, headers, body, burst, every, stop, costs, statuses):
    """Every `every` seconds, `burst` writes at once, each on its own connection."""
    def one():
        started = time.perf_counter()
        status = request(port, "PATCH", path, body, headers).status
        costs.append((time.perf_counter() - started) * 1000)
        statuses[status] = statuses.get(status, 0) + 1
    while not stop.is_set():
        threads = [threading.Thread(target=one) for _ in range(burst)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.wait(every)


def rounds(binary, arguments):
    process, port = start(binary)
    try:
        base = 9_600_000_000_000_000 + int(time.time() * 1000) % 1_000_000_000 * 10
        reader, writer = base, base + 1
        for id in (reader, writer):
            status, body, _ = request(port, "PUT", f"/users/profile/{id}", headers={
                "Authorization": f"Bearer {token(binary, id)}", "If-None-Match": "*", "Content-Type": "application/json"},
                body=json.dumps({"username": f"hb{id % 100_000_000}", "display_name": "Hostile bodies"}).encode())
            assert status == 201, (status, body)
        request(port, "GET", f"/users/profile/{reader}")  # cached: every read below is a hit
        headers = {"Authorization": f"Bearer {token(binary, writer)}", "Content-Type": "application/merge-patch+json"}
        rows = [("hits alone", *wrk(port, f"/users/profile/{reader}", arguments.seconds), None, None)]
        for name, body in [("hostile (60 KB, 7,696 members)", hostile_body()), ("longest valid (escaped)", longest_valid_body())]:
            stop, costs, statuses = threading.Event(), [], {}
            writers = threading.Thread(target=bursts, args=(
                port, f"/users/profile/{writer}", headers, body, arguments.burst, arguments.every_ms / 1000, stop, costs, statuses))
            writers.start()
            rps, p50, p99 = wrk(port, f"/users/profile/{reader}", arguments.seconds)
            stop.set()
            writers.join()
            costs.sort()
            rows.append((f"hits beside {arguments.burst} × {name} every {arguments.every_ms} ms", rps, p50, p99,
                         f"{len(body):,} B: {statuses}; each {costs[len(costs) // 2]:.1f} ms median, "
                         f"{costs[int(len(costs) * 0.99)]:.1f} ms p99, {costs[-1]:.1f} ms max", None))
        return rows
    finally:
        process.terminate()
        process.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--burst", type=int, default=8)
    parser.add_argument("--every-ms", type=int, default=200)
    arguments = parser.parse_args()
    binaries = [("this build", BIN)] + ([("baseline", os.environ["BASELINE_BIN"])] if os.environ.get("BASELINE_BIN") else [])
    for label, binary in binaries:
        print(f"## {label}: {binary}")
        print(f"{'round':<70} | {'hits/s':>8} | {'p50 ms':>7} | {'p99 ms':>7} | writes")
        for what, rps, p50, p99, writes, _ in rounds(binary, arguments):
            print(f"{what:<70} | {rps:>8.0f} | {p50:>7.2f} | {p99:>7.2f} | {writes or ''}")


if __name__ == "__main__":
    main()
