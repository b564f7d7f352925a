"""Schemathesis hooks of scripts/contract-test.sh (loaded through SCHEMATHESIS_HOOKS).

`format: entity-tag` in openapi.yaml marks a header that holds one strong entity tag of a profile
version, `"N"`. schemathesis's coverage phase draws no header value from a pattern that needs
characters other than letters and digits (here the quotes), and then sends a wrong-type seed
(`0`) in cases it labels valid; this generator gives it valid values to send instead.
"""

import schemathesis
from hypothesis import strategies as st

schemathesis.openapi.format("entity-tag", st.integers(1, 2**31 - 1).map(lambda version: f'"{version}"'))
