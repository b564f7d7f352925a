#!/usr/bin/env bash
# Checks profile-service's Prometheus rules (deploy/prometheus/) without any running server:
#
#   1. promtool check rules on every rule file, and promtool check config on the example
#      configuration that loads them;
#   2. promtool test rules on the unit tests in deploy/prometheus/tests/;
#   3. scripts/prometheus/rules_check.py: every alert has a severity (page or ticket) and a
#      runbook_url whose anchor is a heading of docs/runbook.md, and is tested both firing and
#      silent.
#
# Installs Debian's prometheus package (for promtool) and python3-yaml when they are missing; the
# package's own service is stopped and disabled, so nothing is left listening on 9090.
# Exits non-zero on any failure.
#
#   scripts/check-alerts.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rules=$here/deploy/prometheus

log() { printf 'check-alerts: %s\n' "$*" >&2; }

install_missing() {
    local missing=()
    command -v promtool >/dev/null || missing+=(prometheus)
    python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [[ " ${missing[*]} " == *" prometheus "* ]]; then
        # Only promtool (and the binary, for scripts/check-prometheus.py) is wanted: not a server on 9090.
        if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
            systemctl disable --now prometheus >/dev/null 2>&1 || true
        elif [ -x /etc/init.d/prometheus ]; then
            /etc/init.d/prometheus stop >/dev/null 2>&1 || true
            update-rc.d prometheus disable >/dev/null 2>&1 || true
        fi
    fi
}

install_missing

status=0
log "promtool check rules"
promtool check rules "$rules"/*.rules.yml || status=1
log "promtool check config (the example configuration)"
promtool check config "$rules/prometheus.example.yml" || status=1
log "promtool test rules"
(cd "$rules/tests" && promtool test rules ./*.test.yml) || status=1
python3 "$here/scripts/prometheus/rules_check.py" --root "$here" || status=1

if [ $status -ne 0 ]; then
    log "FAIL"
    exit 1
fi
log "ok"
