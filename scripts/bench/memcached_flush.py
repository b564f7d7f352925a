#!/usr/bin/env python3
"""Sends flush_all to memcached nodes: once, or every INTERVAL seconds for DURATION seconds.

Keeps one connection per node, so flushing every 2 ms costs no process or connection setup.
usage: memcached_flush.py host:port[,host:port] [interval_s duration_s]
"""
import socket
import sys
import time

nodes = [n.split(":") for n in sys.argv[1].split(",")]
conns = [socket.create_connection((h, int(p)), timeout=2) for h, p in nodes]
interval = float(sys.argv[2]) if len(sys.argv) > 2 else None
deadline = time.monotonic() + (float(sys.argv[3]) if len(sys.argv) > 3 else 0)
flushes = 0
while True:
    for c in conns:
        c.sendall(b"flush_all\r\n")
        if c.recv(64) != b"OK\r\n":
            sys.exit("unexpected answer to flush_all")
    flushes += 1
    if interval is None or time.monotonic() >= deadline:
        break
    time.sleep(interval)
print(f"flushes: {flushes}", file=sys.stderr)
