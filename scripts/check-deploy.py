#!/usr/bin/env python3
"""Checks of the deployment files and the API document, run by scripts/test.sh after swift test.

    scripts/check-deploy.py            the static part, then the live part
    scripts/check-deploy.py --static   only the static part (deploy_checks/static_checks.py): the
                                       files checked without starting a server; the built binary
                                       describes itself to five of its checks (api-contract, --help)
    scripts/check-deploy.py --live     only the live part (deploy_checks/live_checks.py): nginx in
                                       front of two instances, event streams through it, and the
                                       service's answers against openapi.yaml; needs the binary and
                                       the servers of scripts/deps.sh

Environment: PROFILE_SERVICE_BIN (default .build/debug/profile-service), PROFILE_DATABASE_URL and
PROFILE_MEMCACHED (from `scripts/deps.sh env`; the live part only).
Prints one line per check and `deploy checks: N passed, M failed`; exit status 1 on any failure.
"""

import argparse
import sys

from deploy_checks import live_checks, static_checks


def main():
    parser = argparse.ArgumentParser(description="Checks of the deployment files and the API document.")
    part = parser.add_mutually_exclusive_group()
    part.add_argument("--static", action="store_true", help="only the static checks")
    part.add_argument("--live", action="store_true", help="only the live checks")
    arguments = parser.parse_args()
    parts = []
    if not arguments.live:
        parts.append(static_checks)
    if not arguments.static:
        parts.append(live_checks)
    passed = failed = 0
    for module in parts:
        p, f = module.checks.run()
        passed, failed = passed + p, failed + f
    print(f"deploy checks: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
