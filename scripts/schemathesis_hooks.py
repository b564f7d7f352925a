"""Schemathesis hooks of scripts/contract-test.sh (loaded through SCHEMATHESIS_HOOKS).

`format: entity-tag` in openapi.yaml marks a header that holds one strong entity tag of a profile
version, `"N"`. schemathesis's coverage phase draws no header value from a pattern that needs
characters other than letters and digits (here the quotes), and then sends a wrong-type seed
(`0`) in cases it labels valid; this generator gives it valid values to send instead.
"""

import os
import re

import schemathesis
import yaml
from hypothesis import strategies as st

schemathesis.openapi.format("entity-tag", st.integers(1, 2**31 - 1).map(lambda version: f'"{version}"'))

# The two ways to name a list's members (`GET`/`HEAD /users/profiles`): openapi.yaml's parameters
# ProfileIDs and ProfileUsernames, with their patterns, and the example of the first.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "openapi.yaml"), encoding="utf-8") as _file:
    _PARAMETERS = yaml.safe_load(_file)["components"]["parameters"]
_LIST_SELECTORS = ("ids", "usernames")
_PATTERNS = {
    "ids": re.compile(_PARAMETERS["ProfileIDs"]["schema"]["pattern"]),
    "usernames": re.compile(_PARAMETERS["ProfileUsernames"]["schema"]["pattern"]),
}
_IDS_EXAMPLE = str(_PARAMETERS["ProfileIDs"]["example"])


def _valid(name, value):
    return isinstance(value, str) and _PATTERNS[name].search(value) is not None


@schemathesis.hook
def before_call(context, case, kwargs):
    """A `PUT` body's `id` must be the path's (422 otherwise: a client that sends one profile to
    another's path has a bug). OpenAPI cannot relate a body member to a path parameter, and `id`
    is otherwise unconstrained, so a generated `id` is made the path's: the run then checks that
    an `id` sent back as a GET answered it is accepted, whatever else the case tests.

    A list read names its members by exactly one of `ids` and `usernames` (400 for neither or
    both, which scripts/check-deploy.py's live checks request). OpenAPI cannot say that one of
    two optional parameters is required and the other then absent, so a generated case with both
    keeps one — the invalid one where one is invalid, so a case that tests an invalid value still
    sends it — and a case with neither gets the documented example of `ids`. An `ids` a link
    filled from a path's integer id is written as the text it is on the wire. schemathesis
    validates the query again after this hook, so each case is judged as what it sends."""
    method = case.method.upper()
    if method == "PUT" and isinstance(case.body, dict) and "id" in case.body:
        path_id = str((case.path_parameters or {}).get("id", ""))
        if path_id.isdigit() and not path_id.startswith("0"):
            case.body["id"] = int(path_id)
        return
    if method not in ("GET", "HEAD") or case.operation.path != "/users/profiles":
        return
    if case.query is None:
        case.query = {}
    for name in _LIST_SELECTORS:
        if isinstance(case.query.get(name), int) and not isinstance(case.query[name], bool):
            case.query[name] = str(case.query[name])
    present = [name for name in _LIST_SELECTORS if name in case.query]
    if not present:
        case.query["ids"] = _IDS_EXAMPLE
    elif len(present) == 2:
        invalid = [name for name in _LIST_SELECTORS if not _valid(name, case.query[name])]
        if len(invalid) == 1:
            keep = invalid[0]
        else:  # both valid or both invalid: either names the list; alternate between them
            keep = _LIST_SELECTORS[len(str(case.query["ids"]) + str(case.query["usernames"])) % 2]
        for name in _LIST_SELECTORS:
            if name != keep:
                del case.query[name]
