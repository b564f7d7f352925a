#!/usr/bin/env python3
"""Measures the round trip a delay proxy (scripts/bench/delay_proxy.c) really adds.

usage: measure_rtt.py [--configured-ms X] [--memcached DIRECT PROXIED]... [--postgres DIRECT_URL PROXIED_URL]...
  DIRECT / PROXIED: host:port of a memcached node and of the proxy's route to it.

memcached: `version` request/answer over one TCP connection each, 300 times, the direct and the
proxied connection taking turns (so both see the same moments of a busy machine).
PostgreSQL: `SELECT 1` in one psql session each (\\timing on, 100 queries piped to psql -X -q, the
two sessions taking turns too), timed by psql itself. The first few answers of each are left out
(connection warm-up).
Prints one line per server and, last, one line of JSON. Standard library only.
"""
import argparse
import json
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

MC_COUNT, PG_COUNT, WARM_UP = 300, 100, 5


def summary(samples_ms):
    ordered = sorted(samples_ms)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"median_ms": round(statistics.median(ordered), 4), "p99_ms": round(p99, 4)}


def connect(address):
    host, port = address.rsplit(":", 1)
    conn = socket.create_connection((host, int(port)), timeout=10)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def version_round_trip(conn):
    start = time.perf_counter_ns()
    conn.sendall(b"version\r\n")
    answer = b""
    while not answer.endswith(b"\r\n"):
        part = conn.recv(256)
        if not part:
            raise ConnectionError("memcached closed the connection")
        answer += part
    elapsed = time.perf_counter_ns() - start
    if not answer.startswith(b"VERSION"):
        raise ConnectionError(f"unexpected answer {answer!r}")
    return elapsed / 1e6


def measure_memcached(direct, proxied):
    conns = {"direct": connect(direct), "proxy": connect(proxied)}
    samples = {"direct": [], "proxy": []}
    try:
        for i in range(MC_COUNT + WARM_UP):
            for name, conn in conns.items():
                elapsed = version_round_trip(conn)
                if i >= WARM_UP:
                    samples[name].append(elapsed)
    finally:
        for conn in conns.values():
            conn.close()
    return {f"{name}_ms": summary(values) for name, values in samples.items()}


def psql_session(url):
    session = subprocess.Popen(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", url], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    session.stdin.write("\\timing on\n")
    return session


def timed_select_one(session, url):
    """psql's own timing of one SELECT 1 (it answers each query as it comes, even through a pipe)."""
    session.stdin.write("SELECT 1;\n")
    session.stdin.flush()
    for line in session.stdout:
        timing = re.match(r"Time: ([\d.]+) ms", line)
        if timing:
            return float(timing.group(1))
    raise ConnectionError(f"psql {url}: {session.stderr.read().strip() or 'no answer'}")


def measure_postgres(direct, proxied):
    sessions = {"direct": (psql_session(direct), direct), "proxy": (psql_session(proxied), proxied)}
    samples = {"direct": [], "proxy": []}
    try:
        for i in range(PG_COUNT + WARM_UP):
            for name, (session, url) in sessions.items():
                elapsed = timed_select_one(session, url)
                if i >= WARM_UP:
                    samples[name].append(elapsed)
    finally:
        for session, _ in sessions.values():
            session.stdin.close()
            session.wait(timeout=10)
    return {f"{name}_ms": summary(values) for name, values in samples.items()}


def added(result):
    for key in ("median_ms", "p99_ms"):
        result[f"added_{key}"] = round(result["proxy_ms"][key] - result["direct_ms"][key], 4)
    return result


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configured-ms", type=float, help="the round trip the proxy was given")
    parser.add_argument("--memcached", nargs=2, action="append", default=[], metavar=("DIRECT", "PROXIED"))
    parser.add_argument("--postgres", nargs=2, action="append", default=[], metavar=("DIRECT_URL", "PROXIED_URL"))
    args = parser.parse_args()
    if not args.memcached and not args.postgres:
        parser.error("nothing to measure: give --memcached and/or --postgres")

    servers, failed = [], False
    runs = [("memcached", pair, measure_memcached, f"version ×{MC_COUNT}") for pair in args.memcached]
    runs += [("postgres", pair, measure_postgres, f"SELECT 1 ×{PG_COUNT}") for pair in args.postgres]
    for kind, (direct, proxied), measure, what in runs:
        try:
            result = added(measure(direct, proxied))
        except (OSError, subprocess.SubprocessError) as error:
            print(f"{kind}: cannot measure ({error})")
            servers.append({"server": kind, "direct": direct, "proxied": proxied, "error": str(error)})
            failed = True
            continue
        d, p = result["direct_ms"], result["proxy_ms"]
        shown = proxied.split("@")[-1].split("/")[0]  # host:port of a URL
        print(f"{kind} ({what}): direct {d['median_ms']:.3f} ms (p99 {d['p99_ms']:.3f}), via {shown} "
              f"{p['median_ms']:.3f} ms (p99 {p['p99_ms']:.3f}): added {result['added_median_ms']:.3f} ms "
              f"(median), {result['added_p99_ms']:.3f} ms (p99)")
        servers.append({"server": kind, "direct": direct, "proxied": proxied} | result)

    first = {kind: next((s for s in servers if s["server"] == kind and "error" not in s), None)
             for kind in ("memcached", "postgres")}
    print(json.dumps({
        "configured_rtt_ms": args.configured_ms,
        "memcached_added_ms": first["memcached"] and first["memcached"]["added_median_ms"],
        "postgres_added_ms": first["postgres"] and first["postgres"]["added_median_ms"],
        "servers": servers,
    }))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
