#!/usr/bin/env python3
"""Reads wrk outputs of scripts/bench.sh and prints/writes the comparison table and chart.

usage: report.py RESULTS_DIR PS_RSS_KB GO_RSS_KB PS_CPU_S GO_CPU_S ROUNDS DURATION
Writes docs/benchmark.md (the table) and docs/benchmark.svg (requests/s and p99 per workload).
"""
import datetime
import glob
import os
import platform
import re
import statistics
import sys

results, ps_rss, go_rss, ps_cpu, go_cpu, rounds, duration = sys.argv[1:8]
WORKLOADS = [
    ("get_hit", "GET, cache hits"),
    ("get_db", "GET, memcached flushed every 2 ms (PostgreSQL path)"),
    ("mix_90_10", "90 % GET / 10 % PUT"),
    ("put_100", "100 % PUT"),
]
SERVICES = [("ps", "profile-service"), ("go", "go-seed")]


def millis(text):
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def parse(path):
    text = open(path).read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    p50 = millis(re.search(r"\s50%\s+(\S+)", text).group(1))
    p99 = millis(re.search(r"\s99%\s+(\S+)", text).group(1))
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    cpu = re.search(r"cpu_seconds: ([\d.]+)", text)
    return {
        "rps": rps, "p50": p50, "p99": p99, "requests": requests,
        "non2xx": int(non2xx.group(1)) if non2xx else 0, "cpu": float(cpu.group(1)) if cpu else 0.0,
    }


table = {}
for workload, _ in WORKLOADS:
    for svc, _ in SERVICES:
        runs = [parse(p) for p in sorted(glob.glob(os.path.join(results, f"*-{workload}-{svc}.txt")))]
        if not runs:
            continue
        table[(workload, svc)] = {
            key: statistics.median(run[key] for run in runs) for key in ("rps", "p50", "p99", "cpu")
        } | {"non2xx": sum(r["non2xx"] for r in runs), "requests": sum(r["requests"] for r in runs), "n": len(runs)}

cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
lines = [
    f"Measured {datetime.date.today()} on {os.cpu_count()} cores ({cpu_model}), {platform.system()} "
    f"{platform.release()}; wrk -t2 -c64 -d{duration}, {rounds} rounds alternating, medians shown; "
    "wrk, both services, PostgreSQL and memcached share the machine; profile-service with its defaults "
    "(16 workers) but --no-access-log, as go-seed logs no requests.",
    "",
    "| workload | profile-service req/s | p50 | p99 | go-seed req/s | p50 | p99 | ratio req/s | ratio p99 | non-2xx (ps / go) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
]
for workload, title in WORKLOADS:
    ps, go = table.get((workload, "ps")), table.get((workload, "go"))
    if not ps or not go:
        continue
    lines.append(
        f"| {title} | {ps['rps']:,.0f} | {ps['p50']:.2f} ms | {ps['p99']:.2f} ms | {go['rps']:,.0f} | "
        f"{go['p50']:.2f} ms | {go['p99']:.2f} ms | **{ps['rps'] / go['rps']:.2f}×** | {ps['p99'] / go['p99']:.2f} | "
        f"{ps['non2xx']} / {go['non2xx']} |"
    )
lines += [
    "",
    f"Peak RSS (VmHWM) over the whole run: profile-service {int(ps_rss) / 1024:.1f} MiB, go-seed {int(go_rss) / 1024:.1f} MiB. "
    f"CPU seconds over the whole run: profile-service {ps_cpu}, go-seed {go_cpu}.",
]
cpu_rows = [
    f"{title}: {table[(w, 'ps')]['cpu']:.1f} s vs {table[(w, 'go')]['cpu']:.1f} s"
    for w, title in WORKLOADS if (w, "ps") in table and (w, "go") in table
]
lines.append("CPU seconds per run (median; profile-service vs go-seed): " + "; ".join(cpu_rows) + ".")
report = "\n".join(lines)
print(report)
os.makedirs("docs", exist_ok=True)
open("docs/benchmark.md", "w").write(report + "\n")

# SVG: two panels (requests/s, p99), grouped bars per workload.
pad, panel_w, height = 60, 400, 360
width = 2 * panel_w + 3 * pad
colors = {"ps": "#e4572e", "go": "#4c78a8"}
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
       f'<rect width="{width}" height="{height}" fill="white"/>']
short = {"get_hit": "GET hit", "get_db": "GET PostgreSQL", "mix_90_10": "90/10 mix", "put_100": "100% PUT"}
for panel, (metric, label) in enumerate([("rps", "requests/s (higher is better)"), ("p99", "p99 latency, ms (lower is better)")]):
    x0 = pad + panel * (panel_w + pad)
    top, bottom = 40, height - 50
    peak = max((v[metric] for v in table.values()), default=1) * 1.1
    svg.append(f'<text x="{x0 + panel_w / 2}" y="20" text-anchor="middle" font-size="13">{label}</text>')
    svg.append(f'<line x1="{x0}" y1="{bottom}" x2="{x0 + panel_w}" y2="{bottom}" stroke="#333"/>')
    group_w = panel_w / len(WORKLOADS)
    for i, (workload, _) in enumerate(WORKLOADS):
        for j, (svc, _) in enumerate(SERVICES):
            value = table.get((workload, svc), {}).get(metric)
            if value is None:
                continue
            bar_h = (bottom - top) * value / peak
            bx = x0 + i * group_w + 12 + j * (group_w - 24) / 2
            bw = (group_w - 24) / 2 - 2
            svg.append(f'<rect x="{bx:.1f}" y="{bottom - bar_h:.1f}" width="{bw:.1f}" height="{bar_h:.1f}" fill="{colors[svc]}"/>')
            text = f"{value / 1000:.1f}k" if metric == "rps" else f"{value:.1f}"
            svg.append(f'<text x="{bx + bw / 2:.1f}" y="{bottom - bar_h - 3:.1f}" text-anchor="middle">{text}</text>')
        svg.append(f'<text x="{x0 + i * group_w + group_w / 2:.1f}" y="{bottom + 15}" text-anchor="middle">{short[workload]}</text>')
for j, (svc, name) in enumerate(SERVICES):
    svg.append(f'<rect x="{pad + j * 150}" y="{height - 22}" width="12" height="12" fill="{colors[svc]}"/>')
    svg.append(f'<text x="{pad + j * 150 + 16}" y="{height - 12}">{name}</text>')
svg.append("</svg>")
open("docs/benchmark.svg", "w").write("\n".join(svg) + "\n")
