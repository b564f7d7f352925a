#!/usr/bin/env python3
"""Checks of the alert rules that promtool does not make (run by scripts/check-alerts.sh):

- every alert has a `severity` label of `page` or `ticket`, a `summary` and a `runbook_url`
  pointing into docs/runbook.md whose anchor is a heading of docs/runbook.md (GitHub's anchors);
- every alert is tested by the promtool unit tests in deploy/prometheus/tests/ at least once
  firing (a case with expected alerts) and once silent (a case expecting none);
- every rule file is loaded by the tests, and every alert name is unique.

Exits 1 naming every finding.

  scripts/prometheus/rules_check.py [--root DIR]
"""
import argparse, glob, os, re, sys

try:
    import yaml
except ImportError:  # scripts/check-alerts.sh installs python3-yaml
    sys.exit("rules_check: needs PyYAML (apt-get install python3-yaml)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNBOOK_URL = re.compile(r"^https://github\.com/[^/]+/[^/]+/blob/[^/]+/docs/runbook\.md#([^#]+)$")


def github_anchors(markdown):
    """The anchors GitHub gives the headings of `markdown`: lower case, punctuation other than
    `-` and `_` dropped, spaces turned into `-`, a repeated anchor suffixed -1, -2, ..."""
    anchors, seen, fenced = set(), {}, False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"`([^`]*)`", r"\1", m.group(1))
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=ROOT)
    root = parser.parse_args().root
    rules_dir = os.path.join(root, "deploy/prometheus")
    rule_files = sorted(glob.glob(os.path.join(rules_dir, "*.rules.yml")))
    test_files = sorted(glob.glob(os.path.join(rules_dir, "tests/*.test.yml")))
    anchors = github_anchors(open(os.path.join(root, "docs/runbook.md")).read())
    findings, alerts = [], {}
    if not rule_files:
        findings.append(f"no rule files (*.rules.yml) in {rules_dir}")
    if not test_files:
        findings.append(f"no rule tests (tests/*.test.yml) in {rules_dir}")

    for path in rule_files:
        name = os.path.relpath(path, root)
        for group in (yaml.safe_load(open(path)) or {}).get("groups", []):
            for rule in group.get("rules", []):
                alert = rule.get("alert")
                if not alert:
                    continue
                if alert in alerts:
                    findings.append(f"{alert}: defined twice ({alerts[alert]} and {name})")
                alerts[alert] = name
                labels, annotations = rule.get("labels") or {}, rule.get("annotations") or {}
                if labels.get("severity") not in ("page", "ticket"):
                    findings.append(f"{alert}: severity must be page or ticket, not {labels.get('severity')!r}")
                if not annotations.get("summary"):
                    findings.append(f"{alert}: no summary annotation")
                url = annotations.get("runbook_url")
                m = RUNBOOK_URL.match(url or "")
                if not m:
                    findings.append(f"{alert}: runbook_url {url!r} does not point into docs/runbook.md")
                elif m.group(1) not in anchors:
                    findings.append(f"{alert}: runbook_url's anchor #{m.group(1)} is no heading of docs/runbook.md")

    firing, silent, loaded = set(), set(), set()
    for path in test_files:
        doc = yaml.safe_load(open(path)) or {}
        for rf in doc.get("rule_files", []):
            loaded.add(os.path.normpath(os.path.join(os.path.dirname(path), rf)))
        for test in doc.get("tests", []):
            for case in test.get("alert_rule_test", []) or []:
                alert = case.get("alertname")
                if alert not in alerts:
                    findings.append(f"{os.path.relpath(path, root)}: a case tests {alert!r}, which no rule file defines")
                (firing if case.get("exp_alerts") else silent).add(alert)
    for path in rule_files:
        if os.path.normpath(path) not in loaded:
            findings.append(f"{os.path.relpath(path, root)} is loaded by no rule test")
    for alert in sorted(alerts):
        if alert not in firing:
            findings.append(f"{alert}: no test case where it fires")
        if alert not in silent:
            findings.append(f"{alert}: no test case where it stays silent")

    if findings:
        print("check-alerts: FAIL\n  " + "\n  ".join(findings), file=sys.stderr)
        sys.exit(1)
    print(f"check-alerts: {len(alerts)} alerts, each with a severity, a runbook entry in docs/runbook.md, "
          f"and test cases firing and silent ({len(test_files)} test files)")


if __name__ == "__main__":
    main()
