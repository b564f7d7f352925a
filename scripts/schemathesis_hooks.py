"""Schemathesis hooks of scripts/contract-test.sh (loaded through SCHEMATHESIS_HOOKS).

`format: entity-tag` in openapi.yaml marks a header that holds one strong entity tag of a profile
version, `"N"`. schemathesis's coverage phase draws no header value from a pattern that needs
characters other than letters and digits (here the quotes), and then sends a wrong-type seed
(`0`) in cases it labels valid; this generator gives it valid values to send instead.
"""

import schemathesis
from hypothesis import strategies as st

schemathesis.openapi.format("entity-tag", st.integers(1, 2**31 - 1).map(lambda version: f'"{version}"'))


@schemathesis.hook
def before_call(context, case, kwargs):
    """A `PUT` body's `id` must be the path's (422 otherwise: a client that sends one profile to
    another's path has a bug). OpenAPI cannot relate a body member to a path parameter, and `id`
    is otherwise unconstrained, so a generated `id` is made the path's: the run then checks that
    an `id` sent back as a GET answered it is accepted, whatever else the case tests."""
    if case.method.upper() != "PUT" or not isinstance(case.body, dict) or "id" not in case.body:
        return
    path_id = str((case.path_parameters or {}).get("id", ""))
    if path_id.isdigit() and not path_id.startswith("0"):
        case.body["id"] = int(path_id)
