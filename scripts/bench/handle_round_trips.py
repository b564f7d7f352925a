#!/usr/bin/env python3
"""Round trips of one lookup, by id and by handle, as latency across the delay proxy.

One keep-alive connection, one request at a time, against an instance whose PostgreSQL and
memcached are RTT ms away (scripts/delay.sh): each memcached or PostgreSQL round trip a request
waits on adds about RTT to its latency, so the median over the RTT is the number of round trips.

  scripts/bench/handle_round_trips.py PORT FIRST_ID COUNT USERNAME_PREFIX RTT_MS

reads ids FIRST_ID… and handles USERNAME_PREFIX1… (as scripts/bench-handles.sh seeds them): warm
by id, warm by handle (each read twice first), and cold by handle (memcached flushed before each
lookup: the handle's entry and the profile's both missing).
"""
import http.client, os, statistics, sys, time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import socket  # noqa: E402


def flush_all(nodes):
    for node in nodes:
        host, port = node.split(":")
        with socket.create_connection((host, int(port)), timeout=2) as connection:
            connection.sendall(b"flush_all\r\n")
            connection.recv(64)


def timed(connection, path):
    start = time.perf_counter()
    connection.request("GET", path)
    response = connection.getresponse()
    response.read()
    assert response.status == 200, (path, response.status)
    return (time.perf_counter() - start) * 1000


def main():
    port, first, count, prefix, rtt = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
    nodes = os.environ["PROFILE_MEMCACHED_DIRECT"].split(",")
    connection = http.client.HTTPConnection("127.0.0.1", port)
    ids = [first + i for i in range(count)]
    handles = [f"{prefix}{i + 1}".lower() for i in range(count)]
    for _ in range(2):
        for id, handle in zip(ids, handles):
            timed(connection, f"/users/profile/{id}")
            timed(connection, f"/users/by-username/{handle}")
    cases = {
        "by id, warm": [timed(connection, f"/users/profile/{id}") for id in ids],
        "by handle, warm": [timed(connection, f"/users/by-username/{handle}") for handle in handles],
    }
    cold = []
    for handle in handles[: min(50, count)]:
        flush_all(nodes)
        cold.append(timed(connection, f"/users/by-username/{handle}"))
    cases["by handle, cold"] = cold
    for name, samples in cases.items():
        median = statistics.median(samples)
        print(f"{name:18} p50 {median:6.2f} ms  = {median / rtt:4.1f} round trips of {rtt} ms  ({len(samples)} lookups)")


if __name__ == "__main__":
    main()
