#!/usr/bin/env python3
"""Rolling-upgrade drill: a release before declared profile fields beside this one.

Starts OLD_BINARY (a build of a revision before migrations/0005, e.g. the one
`scripts/bench-ab.sh f9f368b` leaves in .build-ab/build/release) and NEW_BINARY side by side with
`--auth none` on the servers of scripts/deps.sh (`eval "$(scripts/deps.sh env)"` first; the database
migrated by the new binary). For 5 new profiles, 30 rounds each: the old instance renames (it knows
no fields), the new one patches `bio`; after each round both are read with and without
`min_version`. Prints the problems found: an old answer carrying fields, a new one without them, a
floor not met, a bio lost to an old rename, a floorless reader of either going back.

  scripts/drills/rolling_fields.py OLD_BINARY [NEW_BINARY (.build/release/profile-service)]
"""
import json, random, subprocess, time, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drill import get, request  # noqa: E402
old_bin = sys.argv[1]
new_bin = sys.argv[2] if len(sys.argv) > 2 else ".build/release/profile-service"
procs = []
def start(binary, port):
    p = subprocess.Popen([binary, "serve", "--port", str(port), "--auth", "none", "--no-access-log"],
                         stdout=subprocess.DEVNULL, stderr=open(f"/tmp/rolling-{port}.log", "w"))
    procs.append(p)
    for _ in range(100):
        try:
            get(port, "/healthz", timeout=2); return
        except Exception: time.sleep(0.1)
    sys.exit(f"{binary} did not start")
def req(port, method, path, body=None, headers=None):  # JSON both ways
    status, data, _ = request(port, method, path, json.dumps(body) if body is not None else None,
                              {"Content-Type": "application/json", **(headers or {})}, timeout=5)
    return status, (json.loads(data) if data else None)
OLD, NEW = 18201, 18202
start(old_bin, OLD); start(new_bin, NEW)
problems = []; counts = {"old_hits_without_fields": 0, "new_with_fields": 0}
try:
    for trial in range(5):
        pid = random.randint(10**12, 9*10**12)
        st, _ = req(OLD, "PUT", f"/users/profile/{pid}", {"username": f"roll{pid % 10**8}", "display_name": "First"}, {"If-None-Match": "*"})
        assert st == 201, st
        version, last = 1, [0, 0]
        for r in range(30):
            st, b = req(OLD, "PUT", f"/users/profile/{pid}", {"display_name": f"Name {r}", "version": version})
            if st != 200: problems.append(f"old PUT {st} {b}"); break
            version += 1
            st, b = req(NEW, "PATCH", f"/users/profile/{pid}", {"bio": f"bio {r}"}, {"Content-Type": "application/merge-patch+json"})
            if st != 200 or b["display_name"] != f"Name {r}": problems.append(f"new PATCH {st} {b}"); break
            version += 1
            for i, port in enumerate((OLD, NEW)):
                for q in (f"?min_version={version}", ""):
                    st, b = req(port, "GET", f"/users/profile/{pid}{q}")
                    if st != 200: problems.append(f"GET {port}{q} {st}"); continue
                    has = "bio" in b
                    if i == 0 and has: problems.append(f"old served fields {b}")
                    if i == 1 and not has: problems.append(f"new served no fields {b}")
                    if i == 0: counts["old_hits_without_fields"] += 1
                    else: counts["new_with_fields"] += 1
                    if q and b["version"] < version: problems.append(f"floor not met on {port}")
                    if q and i == 1 and b["bio"] != f"bio {r}": problems.append("bio lost")
                    if not q:
                        if b["version"] < last[i]: problems.append(f"{port} went back to {b['version']}")
                        last[i] = max(last[i], b["version"])
finally:
    for p in procs: p.terminate()
print(json.dumps({"problems": problems[:10], "problem_count": len(problems), **counts}))
sys.exit(1 if problems else 0)
