"""What the scripts that check a real instance share: a list of findings printed as they are
made ("ok" / "FAIL"), and a free loopback port for a server they start."""
import socket

failures = []


def check(condition, what):
    """Prints `what` as passed or failed; a failure is kept in `failures`."""
    print(("ok    " if condition else "FAIL  ") + what, flush=True)
    if not condition:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
