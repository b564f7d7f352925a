"""What the scripts that check a real instance share: a list of findings printed as they are
made ("ok" / "FAIL"). (A free port, HTTP and psql: service_helpers.py.)"""

failures = []


def check(condition, what):
    """Prints `what` as passed or failed; a failure is kept in `failures`."""
    print(("ok    " if condition else "FAIL  ") + what, flush=True)
    if not condition:
        failures.append(what)
