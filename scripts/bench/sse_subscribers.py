#!/usr/bin/env python3
"""Live-updates benchmark client (scripts/bench-sse.sh runs it): N concurrent event streams on
one instance, then writes, with the latency from each PUT's answer to each subscriber's event.

    profile_service_sse_subscribers.py --port P --subscribers 10000 --ids 5000 --writes 200 --rate 50 \
        --token T --ready-file F --hold-file H [--list-size K]

Opens the streams (ids 1..IDS, SUBSCRIBERS/IDS per id; with --list-size K each stream is a list's
stream, GET /users/profiles/events, of K random distinct ids of 1..IDS) and waits for each first
state; writes
READY to --ready-file; waits while --hold-file exists (the shell measures RSS and runs wrk
meanwhile); then PUTs --writes random watched ids at --rate per second over one keep-alive
connection and prints one JSON line: latencies (p50/p99/max, ms), events expected/received,
streams that failed.
"""

import argparse
import asyncio
import json
import os
import random
import resource
import sys
import time


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int((len(ordered) - 1) * fraction))] if ordered else float("nan")


class Subscriber:
    def __init__(self, ids, as_list):
        self.ids = ids
        self.path = ("/users/profiles/events?ids=" + ",".join(map(str, ids)) if as_list
                     else f"/users/profile/{ids[0]}/events")
        self.arrivals = {}  # (profile id, version) -> monotonic time
        self.versions = {}  # profile id -> the highest version received
        self.first = asyncio.get_running_loop().create_future()
        self.failed = None

    async def run(self, port):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {self.path} HTTP/1.1\r\nHost: b\r\nAccept: text/event-stream\r\n\r\n".encode())
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            if b" 200 " not in head.split(b"\r\n", 1)[0]:
                raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
            block = []
            while True:
                line = await reader.readline()
                if not line:
                    raise EOFError("closed")
                line = line.rstrip(b"\n")
                if line:
                    block.append(line)
                    continue
                for field in block:
                    if field.startswith(b"data: {\"id\":"):
                        # The profile's id and version from its JSON (a list's stream carries many ids).
                        profile = json.loads(field[6:])
                        if "version" not in profile:
                            continue  # a deleted member
                        key = (profile["id"], profile["version"])
                        self.arrivals.setdefault(key, time.monotonic())
                        self.versions[key[0]] = max(self.versions.get(key[0], 0), key[1])
                        if not self.first.done() and len(self.versions) == len(self.ids):
                            self.first.set_result(True)
                block = []
        except Exception as error:  # noqa: BLE001 - reported in the summary
            self.failed = repr(error)
            if not self.first.done():
                self.first.set_exception(error)


async def put(reader, writer, profile_id, version, token):
    body = json.dumps({"display_name": f"Bench {version}", "version": version}).encode()
    headers = f"PUT /users/profile/{profile_id} HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\n"
    if token:
        headers += f"Authorization: Bearer {token}\r\n"
    writer.write(headers.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    answered = time.monotonic()
    length = int(next(l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")))
    payload = await reader.readexactly(length)
    status = int(head.split(b" ")[1])
    return status, answered, json.loads(payload)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--subscribers", type=int, default=10000)
    parser.add_argument("--ids", type=int, default=5000)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--token", default="")
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--hold-file", required=True)
    parser.add_argument("--list-size", type=int, default=0, help="ids per stream: a list's stream (0: a profile's)")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    chooser = random.Random(20)
    subscribers = [
        Subscriber(chooser.sample(range(1, args.ids + 1), args.list_size), True) if args.list_size
        else Subscriber([1 + n % args.ids], False)
        for n in range(args.subscribers)]
    tasks = []
    started = time.monotonic()
    for index, subscriber in enumerate(subscribers):
        tasks.append(asyncio.create_task(subscriber.run(args.port)))
        if index % 200 == 199:
            await asyncio.sleep(0.01)  # do not overflow the listen backlog
    await asyncio.gather(*(s.first for s in subscribers), return_exceptions=True)
    connected = sum(1 for s in subscribers if s.failed is None)
    print(f"sse-bench: {connected} of {len(subscribers)} streams open in {time.monotonic() - started:.1f}s",
          file=sys.stderr)
    with open(args.ready_file, "w") as f:
        f.write("READY\n")
    while os.path.exists(args.hold_file):
        await asyncio.sleep(0.2)

    by_id = {}
    for subscriber in subscribers:
        for profile_id in subscriber.ids:
            by_id.setdefault(profile_id, []).append(subscriber)
    reader, writer = await asyncio.open_connection("127.0.0.1", args.port)
    versions = {}
    writes = []  # (profile id, version, answered)
    for n in range(args.writes):
        profile_id = random.choice(list(by_id))
        current = versions.get(profile_id) or max(
            (s.versions.get(profile_id, 1) for s in by_id[profile_id] if s.failed is None), default=1)
        status, answered, profile = await put(reader, writer, profile_id, current, args.token)
        if status == 200:
            versions[profile_id] = profile["version"]
            writes.append((profile_id, profile["version"], answered))
        else:
            versions[profile_id] = profile.get("current", {}).get("version", current)
        await asyncio.sleep(1 / args.rate)
    await asyncio.sleep(2)  # let the last events arrive
    latencies, expected, received = [], 0, 0
    for profile_id, version, answered in writes:
        for subscriber in by_id[profile_id]:
            if subscriber.failed is not None:
                continue
            expected += 1
            arrived = subscriber.arrivals.get((profile_id, version))
            # An event skipped in favour of a later version counts at that later version's arrival.
            if arrived is None:
                later = [t for (i, v), t in subscriber.arrivals.items() if i == profile_id and v > version]
                arrived = min(later) if later else None
            if arrived is not None:
                received += 1
                # The event can be read just before the answer (both race to this process): 0 then.
                latencies.append(max(0.0, (arrived - answered) * 1000))
    print(json.dumps({
        "subscribers": len(subscribers), "connected": connected, "writes": len(writes),
        "events_expected": expected, "events_received": received,
        "latency_ms": {"p50": round(percentile(latencies, 0.5), 2), "p99": round(percentile(latencies, 0.99), 2),
                       "max": round(max(latencies), 2) if latencies else None},
        "failed_streams": sum(1 for s in subscribers if s.failed is not None),
    }))
    for task in tasks:
        task.cancel()
    writer.close()


if __name__ == "__main__":
    asyncio.run(main())
