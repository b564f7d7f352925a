"""What one client can take across requests (issue 23; docs/design.md §5.5), black box against
`serve` with its defaults (JWT auth, the change feed on): each row of the issue's table sent again,
with the figures it gives. Run `eval "$(scripts/deps.sh env)"` and build first:

    python3 scripts/drills/abuse.py

PROFILE_SERVICE_BIN picks the binary (default .build/debug/profile-service)."""
import functools, http.client, os, re, socket, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import drill  # noqa: E402
from drill import BIN, serve  # noqa: E402

STARTED = []
SECRET = os.path.join(tempfile.mkdtemp(), "jwt-secret")
with open(SECRET, "w") as f:
    f.write("abuse-drill-secret-" + "x" * 40)


def token(subject, ttl=3600):
    return subprocess.run([BIN, "token", "--sub", str(subject), "--ttl", str(ttl), "--jwt-secret-file", SECRET],
                          check=True, capture_output=True, text=True).stdout.strip()


def start(*extra):
    process, port = serve(BIN, ["--jwt-secret-file", SECRET, *extra], "abuse")
    STARTED.append(process)
    return process, port


request = functools.partial(drill.request, timeout=30)  # this drill's requests wait up to 30 s


def rss_mib(process):
    for line in open(f"/proc/{process.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024


def metric(port, name, labels=""):
    text = request(port, "GET", "/metrics")[1].decode()
    pattern = re.escape(name) + (r"\{[^}]*" + re.escape(labels) + r"[^}]*\}" if labels else r"(\{[^}]*\})?") + r" ([0-9.e+]+)"
    return sum(float(m.group(m.lastindex)) for m in re.finditer(pattern, text))


def raw(port, text, read=True):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(text.encode())
    if not read:
        return s
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    return s, data


def status_of(head):
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def get_from_threads(port, count, paths_of):
    """GETs `paths_of(worker)` over one keep-alive connection per thread, `count` threads at
    once; returns how many answers had each status."""
    codes, lock = {}, threading.Lock()

    def run(worker):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for path in paths_of(worker):
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            with lock:
                codes[response.status] = codes.get(response.status, 0) + 1
        connection.close()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def main():
    rows = []
    process, port = start()
    base_rss = rss_mib(process)
    owner = 9_300_000_000_000_000 + int(time.time() * 1000) % 1_000_000_000
    status = request(port, "PUT", f"/users/profile/{owner}", headers={
        "Authorization": f"Bearer {token(owner)}", "If-None-Match": "*", "Content-Type": "application/json"},
        body=f'{{"username":"abuse{owner % 100000000}","display_name":"Abuse drill"}}').status
    assert status == 201, status

    # 1. Made-up methods.
    before = len(request(port, "GET", "/metrics")[1])
    s = socket.create_connection(("127.0.0.1", port))
    for i in range(2000):
        s.sendall(f"X{'Y' * 4000}{i} /users/profile/1 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    s.settimeout(5)
    received = b""
    try:
        while received.count(b"HTTP/1.1 405") < 2000:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            received += chunk
    except socket.timeout:
        pass
    s.close()
    started = time.time()
    after = len(request(port, "GET", "/metrics")[1])
    render_ms = (time.time() - started) * 1000
    rows.append(("2,000 made-up methods (4 KiB each)",
                 f"{received.count(b'HTTP/1.1 405')} × 405; /metrics {before:,} → {after:,} bytes, rendered in {render_ms:.0f} ms; RSS {base_rss:.1f} → {rss_mib(process):.1f} MiB"))

    # 2. One client opens streams until refused; everyone else is still answered.
    streams, refused, statuses = [], {}, {}
    for i in range(10_000):
        st, head = raw(port, f"GET /users/profile/{owner}/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        code = status_of(head)
        if code == 200:
            streams.append(st)
        else:
            refused[code] = refused.get(code, 0) + 1
            st.close()
            if refused[code] >= 100:
                break
    times = []
    for method, path, headers, body in [("GET", "/healthz", {}, None), ("GET", f"/users/profile/{owner}", {}, None),
                                        ("PUT", f"/users/profile/{owner}", {"Authorization": f"Bearer {token(owner)}", "Content-Type": "application/json"},
                                         '{"display_name":"Still answered","version":1}')]:
        t0 = time.time()
        code = request(port, method, path, body, headers).status
        times.append(f"{method} {path.split('/')[1] or path} {code} in {(time.time() - t0) * 1000:.0f} ms")
        statuses[method + path] = code
    rows.append(("one client opens streams until refused",
                 f"{len(streams)} open, then {refused}; others: {', '.join(times)}; RSS {rss_mib(process):.1f} MiB"))
    for st in streams:
        st.close()

    # 3. Unreachable floors from 32 connections.
    reads_before = metric(port, "profile_service_cache_events_total", 'event="database_read"')
    codes = get_from_threads(port, 32, lambda worker: [f"/users/profile/{owner}?min_version=2147483647"] * 50)
    reads = metric(port, "profile_service_cache_events_total", 'event="database_read"') - reads_before
    rows.append(("GET ?min_version=2147483647 × 1,600 from 32 connections", f"{codes}; {reads:.0f} PostgreSQL reads"))

    # 3b. The same floors in lists: 160 lists of 20 cached ids, each at @2147483647, from 16 connections.
    members = [owner] + [9_500_000_000_000_000 + owner % 1_000_000 * 100 + i for i in range(19)]
    for member in members[1:]:
        status = request(port, "PUT", f"/users/profile/{member}", headers={
            "Authorization": f"Bearer {token(member)}", "If-None-Match": "*", "Content-Type": "application/json"},
            body=f'{{"username":"abl{member % 100000000}","display_name":"Abuse list"}}').status
        assert status == 201, status
    listed = "/users/profiles?ids=" + ",".join(f"{member}@2147483647" for member in members)
    reads_before = metric(port, "profile_service_cache_events_total", 'event="database_read"')
    codes = get_from_threads(port, 16, lambda worker: [listed] * 10)
    reads = metric(port, "profile_service_cache_events_total", 'event="database_read"') - reads_before
    rows.append(("160 lists of 20 ids @2147483647 from 16 connections", f"{codes}; {reads:.0f} PostgreSQL row reads (3,200 members)"))

    # 4. Absent ids.
    reads_before = metric(port, "profile_service_cache_events_total", 'event="database_read"')
    absent = [9_400_000_000_000_000 + owner % 1_000_000 * 1000 + i for i in range(100)]
    codes = get_from_threads(
        port, 16, lambda worker: [f"/users/profile/{absent[i % 100]}" for i in range(worker, 2000, 16)])
    reads = metric(port, "profile_service_cache_events_total", 'event="database_read"') - reads_before
    rows.append(("2,000 GETs of 100 absent ids", f"{codes}; {reads:.0f} PostgreSQL reads"))

    # 5. Expect: 100-continue without credentials, 3,000 connections held.
    rss_before = rss_mib(process)
    held, answers = [], {}
    for i in range(3000):
        st, head = raw(port, f"PUT /users/profile/{owner} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             f"Expect: 100-continue\r\nContent-Length: 4000\r\n\r\n")
        code = status_of(head)
        answers[code] = answers.get(code, 0) + 1
        held.append(st)
    time.sleep(0.5)
    rows.append(("PUT + Expect: 100-continue, no token, 3,000 connections",
                 f"first answers {answers}; RSS {rss_before:.1f} → {rss_mib(process):.1f} MiB"))
    for st in held:
        st.close()

    # 6. Long tokens, names, two Authorization fields.
    forever = subprocess.run([sys.executable, "-c", f"""
import base64, hashlib, hmac, json
key = open({SECRET!r}).read().encode()
b = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=")
msg = b({{"alg": "HS256", "typ": "JWT"}}) + b"." + b({{"sub": "{owner}", "exp": 1e300}})
print((msg + b"." + base64.urlsafe_b64encode(hmac.new(key, msg, hashlib.sha256).digest()).rstrip(b"=")).decode())
"""], check=True, capture_output=True, text=True).stdout.strip()
    code = request(port, "PUT", f"/users/profile/{owner}", headers={"Authorization": f"Bearer {forever}", "Content-Type": "application/json"},
                   body='{"display_name":"Forever","version":2}').status
    rows.append(("a token with exp: 1e300", f"{code}"))
    code = request(port, "PUT", f"/users/profile/{owner}", headers={"Authorization": f"Bearer {token(owner)}", "Content-Type": "application/json"},
                   body='{"display_name":"' + "\uFB2C" * 64 + '","version":2}').status
    rows.append(("display_name of 64 × U+FB2C", f"{code}"))
    _, head = raw(port, f"GET /users/profile/{owner} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token(owner)}\r\n"
                        f"Authorization: Bearer bad.to.ken\r\n\r\n")
    rows.append(("two Authorization fields", f"{status_of(head)}"))
    process.terminate()
    process.wait()

    # 7. A stream opened with a token that expires 3 s later.
    process, port = start("--require-auth-for-reads")
    st, head = raw(port, f"GET /users/profile/{owner}/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                         f"Authorization: Bearer {token(1, ttl=3)}\r\n\r\n")
    opened = time.time()
    st.settimeout(120)
    try:
        while st.recv(65536):
            pass
    except OSError:
        pass
    rows.append(("a stream opened with a token that expires 3 s later (--require-auth-for-reads)",
                 f"{status_of(head)}, closed after {time.time() - opened:.1f} s (leeway 30 s)"))
    process.terminate()
    process.wait()

    width = max(len(r[0]) for r in rows)
    for what, result in rows:
        print(f"{what.ljust(width)} | {result}")


if __name__ == "__main__":
    try:
        main()
    finally:
        # A failed row must not leave a service behind holding the change feed's slot.
        for process in STARTED:
            if process.poll() is None:
                process.terminate()
