"""What the scripts that start the service and talk to it share (check-*.py, deploy_checks/,
drills/, bench/): a free loopback port, one HTTP request to an instance on loopback or to a URL,
and one SQL statement through psql. Python's standard library only.

scripts/*.py (and deploy_checks/, imported by check-deploy.py) import it as it is: their folder is
on sys.path. A script in a subfolder of scripts/ puts scripts/ on sys.path first, by this line:

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # service_helpers

(drills/drill.py does so for the drills, and gives them free_port, get, request and psql.)
A script whose requests or statements wait longer than the defaults binds its own limit once, e.g.
`request = functools.partial(service_helpers.request, timeout=30)`.
"""
import collections
import http.client
import socket
import subprocess
import urllib.error
import urllib.request

JSON = {"Content-Type": "application/json"}


def free_port():
    """A TCP port of 127.0.0.1 nothing listens on (when asked)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Answer(collections.namedtuple("Answer", "status body headers")):
    """An HTTP answer: its status, its body (bytes) and its headers (a dict, names in lower case;
    a name sent more than once keeps its last value)."""
    __slots__ = ()

    @property
    def text(self):
        """The body decoded as UTF-8."""
        return self.body.decode()


def request(port, method, path, body=None, headers=None, timeout=10, connection=None):
    """`method path` to 127.0.0.1:`port`; the Answer. A str body is sent encoded as UTF-8.

    On `connection` (an http.client.HTTPConnection the caller keeps alive; its own port and
    timeout then apply), left open; otherwise on a connection of its own waiting up to `timeout`
    seconds, closed after. Raises what http.client raises: OSError (refused, reset, timed out),
    http.client.HTTPException."""
    own = connection is None
    if own:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body.encode() if isinstance(body, str) else body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        return Answer(response.status, data, {name.lower(): value for name, value in response.getheaders()})
    finally:
        if own:
            connection.close()


def get(port, path, headers=None, timeout=10, connection=None):
    """`GET path` to 127.0.0.1:`port` (see request); the Answer."""
    return request(port, "GET", path, headers=headers, timeout=timeout, connection=connection)


def request_url(url, method="GET", body=None, headers=None, timeout=10):
    """(status, body text) of one request to `url` through urllib.request (which honours the
    *_proxy variables and follows redirects); an HTTP error status is an answer too. A str body is
    sent encoded as UTF-8; the answer's body is decoded as UTF-8, bytes that are not UTF-8
    replaced."""
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


class PsqlError(subprocess.CalledProcessError):
    """psql exited non-zero: `psql failed: SQL: psql's message`."""

    def __init__(self, done, sql):
        super().__init__(done.returncode, done.args, done.stdout, done.stderr)
        self.sql = sql

    def __str__(self):
        return f"psql failed: {self.sql}: {self.stderr.strip()}"


def psql(url, sql, timeout=None):
    """`sql` (one -c: several statements run as one request) run by
    `psql -X -q -tA -v ON_ERROR_STOP=1 URL -c SQL`, in this process's environment (PGPASSWORD,
    PGSSLMODE… apply as to psql); what it printed, stripped: rows unaligned, fields separated by
    "|". Raises PsqlError if psql exits non-zero, subprocess.TimeoutExpired after `timeout`
    seconds (None: no limit)."""
    done = subprocess.run(["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise PsqlError(done, sql)
    return done.stdout.strip()
