#!/usr/bin/env python3
"""Reads wrk outputs of scripts/bench.sh and prints/writes the comparison table and chart.

usage: report.py RESULTS_DIR ROUNDS DURATION DROPPED_LOG_LINES SVC:RSS_KB:CPU_S...
  (SVC one of ps, psq, go, feed: profile-service with defaults, with --no-access-log, go-seed,
  and the unmeasured instance that consumes the change feed)
Writes docs/benchmark.md (the table) and docs/benchmark.svg (requests/s and p99 per workload).
"""
import datetime
import glob
import os
import platform
import re
import statistics
import sys

results, rounds, duration, dropped = sys.argv[1:5]
usage = {svc: (int(rss), cpu) for svc, rss, cpu in (arg.split(":") for arg in sys.argv[5:])}
WORKLOADS = [
    ("get_hit", "GET, cache hits"),
    ("get_db", "GET, memcached flushed every 2 ms (PostgreSQL path)"),
    ("mix_90_10", "90 % GET / 10 % PUT"),
    ("put_100", "100 % PUT"),
]
SERVICES = [("ps", "profile-service (defaults)"), ("psq", "profile-service --no-access-log"), ("go", "go-seed")]


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


table, rounds_of = {}, {}
for workload, _ in WORKLOADS:
    for svc, _ in SERVICES:
        paths = sorted(glob.glob(os.path.join(results, f"*-{workload}-{svc}.txt")), key=lambda p: int(os.path.basename(p).split("-")[0]))
        runs = [parse(p) for p in paths]
        if not runs:
            continue
        rounds_of[(workload, svc)] = runs
        for run in runs:  # CPU time of the server per request: less sensitive to a busy machine than req/s
            run["cpu_us"] = run["cpu"] * 1e6 / run["requests"] if run["requests"] else 0.0
        table[(workload, svc)] = {
            key: statistics.median(run[key] for run in runs) for key in ("rps", "p50", "p99", "cpu", "cpu_us")
        } | {"non2xx": sum(r["non2xx"] for r in runs), "requests": sum(r["requests"] for r in runs), "n": len(runs)}

def log_cost(workload, key):
    """The access log's cost: the median over rounds of each round's defaults against
    --no-access-log (run back to back), which the machine's drift between rounds disturbs less
    than a ratio of two medians."""
    pairs = zip(rounds_of[(workload, "ps")], rounds_of[(workload, "psq")])
    if key == "rps":
        return statistics.median(1 - ps["rps"] / psq["rps"] for ps, psq in pairs)
    return statistics.median((ps["cpu_us"] - psq["cpu_us"]) / ps["cpu_us"] for ps, psq in pairs)


cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
load = open("/proc/loadavg").read().split()[:3]
lines = [
    f"Measured {datetime.date.today()} on {os.cpu_count()} cores ({cpu_model}), {platform.system()} "
    f"{platform.release()}; wrk -t2 -c64 -d{duration}, {rounds} rounds, the order changing each round (the two profile-service instances back to back), medians shown; "
    "wrk, the services, PostgreSQL and memcached share the machine (load average at the end: "
    f"{' '.join(load)}). profile-service with its defaults (access log on, logfmt to a file"
    + (f"; extra arguments: {os.environ['BENCH_SERVE_ARGS']}" if os.environ.get("BENCH_SERVE_ARGS") else "")
    + ") "
    "and, beside it, with --no-access-log; go-seed logs no requests. A fourth instance (defaults, not "
    "measured) consumes the change feed, as one instance of a cluster does: its work for every PUT is "
    "on the same cores during every run; the measured instances stand by.",
    "",
    "| workload | profile-service req/s | p50 | p99 | --no-access-log req/s | p99 | go-seed req/s | p50 | p99 "
    "| ratio req/s (defaults) | ratio p99 (defaults) | ratio req/s (no log) | access log cost | non-2xx (ps / go) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
]
for workload, title in WORKLOADS:
    ps, psq, go = (table.get((workload, svc)) for svc in ("ps", "psq", "go"))
    if not ps or not go or not psq:
        continue
    cost = log_cost(workload, "rps")
    lines.append(
        f"| {title} | {ps['rps']:,.0f} | {ps['p50']:.2f} ms | {ps['p99']:.2f} ms | {psq['rps']:,.0f} | {psq['p99']:.2f} ms | "
        f"{go['rps']:,.0f} | {go['p50']:.2f} ms | {go['p99']:.2f} ms | **{ps['rps'] / go['rps']:.2f}×** | "
        f"{ps['p99'] / go['p99']:.2f} | {psq['rps'] / go['rps']:.2f}× | {cost * 100:+.1f} % | {ps['non2xx']} / {go['non2xx']} |"
    )
lines += ["", "Rounds (requests/s; defaults / --no-access-log / go-seed):"]
for workload, title in WORKLOADS:
    if all((workload, svc) in rounds_of for svc, _ in SERVICES):
        per_round = zip(*(rounds_of[(workload, svc)] for svc, _ in SERVICES))
        lines.append(f"- {title}: " + "; ".join(
            f"{a['rps']:,.0f} / {b['rps']:,.0f} / {c['rps']:,.0f}" for a, b, c in per_round))
ALL = SERVICES + [("feed", "the change feed's instance")]
rss_text = ", ".join(f"{name} {usage[svc][0] / 1024:.1f} MiB" for svc, name in ALL if svc in usage)
cpu_text = ", ".join(f"{name} {usage[svc][1]}" for svc, name in ALL if svc in usage)
lines += [
    "",
    f"Peak RSS (VmHWM) over the whole run: {rss_text}. CPU seconds over the whole run: {cpu_text}. "
    f"Access-log lines dropped (profile_service_log_lines_dropped_total): {dropped}.",
]
cpu_rows = [
    f"{title}: " + " / ".join(f"{table[(w, svc)]['cpu']:.1f} s" for svc, _ in SERVICES)
    for w, title in WORKLOADS if all((w, svc) in table for svc, _ in SERVICES)
]
lines.append("CPU seconds per run (median; defaults / --no-access-log / go-seed): " + "; ".join(cpu_rows) + ".")
lines += [
    "",
    "Server CPU time per request (median of the rounds; with other work on the machine this moves less than req/s):",
    "",
    "| workload | profile-service (defaults) | --no-access-log | go-seed | defaults / go-seed | access log |",
    "| --- | ---: | ---: | ---: | ---: | ---: |",
]
for workload, title in WORKLOADS:
    if all((workload, svc) in table for svc, _ in SERVICES):
        ps, psq, go = (table[(workload, svc)]["cpu_us"] for svc in ("ps", "psq", "go"))
        lines.append(
            f"| {title} | {ps:.0f} µs | {psq:.0f} µs | {go:.0f} µs | {ps / go:.2f} | {log_cost(workload, 'cpu') * 100:+.1f} % |")
report = "\n".join(lines)
print(report)
os.makedirs("docs", exist_ok=True)
open("docs/benchmark.md", "w").write(report + "\n")

# SVG: two panels (requests/s, p99), grouped bars per workload.
pad, panel_w, height = 60, 460, 360
width = 2 * panel_w + 3 * pad
colors = {"ps": "#e4572e", "psq": "#f3a712", "go": "#4c78a8"}
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
    bar_w = (group_w - 24) / len(SERVICES)
    for i, (workload, _) in enumerate(WORKLOADS):
        for j, (svc, _) in enumerate(SERVICES):
            value = table.get((workload, svc), {}).get(metric)
            if value is None:
                continue
            bar_h = (bottom - top) * value / peak
            bx = x0 + i * group_w + 12 + j * bar_w
            svg.append(f'<rect x="{bx:.1f}" y="{bottom - bar_h:.1f}" width="{bar_w - 2:.1f}" height="{bar_h:.1f}" fill="{colors[svc]}"/>')
            text = f"{value / 1000:.0f}k" if metric == "rps" else f"{value:.1f}"
            svg.append(f'<text x="{bx + bar_w / 2:.1f}" y="{bottom - bar_h - 3:.1f}" text-anchor="middle" font-size="9">{text}</text>')
        svg.append(f'<text x="{x0 + i * group_w + group_w / 2:.1f}" y="{bottom + 15}" text-anchor="middle">{short[workload]}</text>')
for j, (svc, name) in enumerate(SERVICES):
    svg.append(f'<rect x="{pad + j * 230}" y="{height - 22}" width="12" height="12" fill="{colors[svc]}"/>')
    svg.append(f'<text x="{pad + j * 230 + 16}" y="{height - 12}">{name}</text>')
svg.append("</svg>")
open("docs/benchmark.svg", "w").write("\n".join(svg) + "\n")
