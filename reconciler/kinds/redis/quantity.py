"""Kubernetes quantities (``1Gi``, ``500M``, ``1e9``) as whole bytes, so that
a claim's size can be compared with what the spec asks: the API writes a
quantity back in its own canonical form (``1024Mi`` may come back ``1Gi``),
so the strings never compare.
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import ceil

# A quantity as the CRD's patterns say it (spec.storage.size, the exporter's
# resources; held equal by a unit test), as core types' schemas do. It takes
# an exponent with a fraction, which the apiserver's quantity() then refuses,
# and so does `to_bytes`.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_WRITTEN = re.compile(QUANTITY_PATTERN)
# A container's request or limit: no sign but '+' (the apiserver refuses a pod
# with a negative one). A pattern rather than a CEL rule: quantity() over a
# map of strings of no bound length exceeds the CRD's cost budget.
RESOURCE_PATTERN = QUANTITY_PATTERN.replace(r"^(\+|-)?", r"^\+?", 1)
_RESOURCE = re.compile(RESOURCE_PATTERN)
# The apiserver's grammar for a quantity (resource.Quantity).
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
EXPONENT_MAX = 30  # past 10^30 bytes a size is a typo, not a disk
SIZE_MAX = "1e30"  # the CRD's bound on spec.storage.size, said as a quantity


def to_bytes(text: str) -> int | None:
    """The quantity in bytes, rounded up as the API rounds storage; None if
    ``text`` is not a quantity (or absurdly large)."""
    found = _QUANTITY.match(text.strip())
    if found is None:
        return None
    number, suffix = Fraction(found["number"]), found["suffix"] or ""
    if suffix in _BINARY:
        return ceil(number * Fraction(1024) ** _BINARY[suffix])
    exponent = _DECIMAL.get(suffix)
    if exponent is None:
        exponent = int(suffix[1:])
    if exponent > EXPONENT_MAX:
        return None
    return ceil(number * Fraction(10) ** exponent)


def written(value: object) -> bool:
    """A quantity as the CRD takes one: a JSON integer, or a string of its
    pattern (no spaces around it, as the apiserver would refuse them in a pod
    or a claim), which the apiserver's quantity() can read."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return False
    text = str(value)
    return _WRITTEN.fullmatch(text) is not None and to_bytes(text) is not None


def resource(value: object) -> bool:
    """A request or limit as the CRD takes one (an integer not below zero;
    the CRD's pattern says it of strings alone)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return False
    if isinstance(value, int):
        return value >= 0
    return _RESOURCE.fullmatch(value) is not None and to_bytes(value) is not None
