#!/usr/bin/env python3
"""Medians of wrk runs by mode: requests/s, p50, p99, the instance's CPU per request and the answers
other than 2xx/3xx, then each mode's ratios to the first.

usage: wrk_table.py TITLE DIR MODE...
  DIR holds wrk-<mode>-<round>.txt: wrk's --latency output, to which the bench appended a line
  `cpu_us_per_request: X` (the instance's user + system time over the requests wrk made).
"""
import glob, os, re, statistics, sys


def millis(text):
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def parse(path):
    text = open(path).read()
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)),
        "p50": millis(re.search(r"\s50%\s+(\S+)", text).group(1)),
        "p99": millis(re.search(r"\s99%\s+(\S+)", text).group(1)),
        "cpu": float(re.search(r"cpu_us_per_request: ([\d.]+)", text).group(1)),
        "non2xx": int(non2xx.group(1)) if non2xx else 0,
    }


title, directory, modes = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {mode: [parse(p) for p in sorted(glob.glob(os.path.join(directory, f"wrk-{mode}-*.txt")))] for mode in modes}
median = {mode: {key: statistics.median(run[key] for run in runs[mode]) for key in ("rps", "p50", "p99", "cpu")} for mode in modes}
print(f"\n{title}, medians of {len(runs[modes[0]])} round(s):")
print(f"{'reader':<10} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'CPU µs/req':>11} {'non-2xx':>8}")
for mode in modes:
    m = median[mode]
    print(f"{mode:<10} {m['rps']:>10.0f} {m['p50']:>8.2f} {m['p99']:>8.2f} {m['cpu']:>11.1f} {sum(r['non2xx'] for r in runs[mode]):>8}")
first = median[modes[0]]
for mode in modes[1:]:
    print(f"{mode} / {modes[0]}: {median[mode]['rps'] / first['rps']:.2f} of the requests/s, "
          f"CPU per request x{median[mode]['cpu'] / first['cpu']:.2f}")
