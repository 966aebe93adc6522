"""What the apiserver decides for a request, as pure functions over API
dicts: a JSON merge patch, preconditions, label selectors, a budget's answer
to an eviction. `FakeKube` (tests/unit/fakes.py) answers with them, and the
contract suite (tests/client_contract.py) holds them to the real apiserver.
"""

from __future__ import annotations

import builtins
import copy
from collections.abc import Mapping
from typing import Any

from reconciler.client.errors import ApiError, EvictionRefused


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386: a mapping merges key by key, null removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def budgets_allow(pod: Mapping[str, Any], budgets: builtins.list[dict[str, Any]]) -> None:
    """The eviction API's answer: 429 when the one budget selecting the pod
    allows no disruption now, 500 when more than one selects it."""
    selecting = [b for b in budgets if matches(pod, _selector(b))]
    if len(selecting) > 1:
        raise EvictionRefused(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource"
            " does not support.",
        )
    if selecting and not (selecting[0].get("status") or {}).get("disruptionsAllowed"):
        raise EvictionRefused(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )


def _selector(budget: Mapping[str, Any]) -> str:
    wanted = ((budget.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in wanted.items())  # empty: every pod, as policy/v1


def preconditions(stored: Mapping[str, Any], uid: str | None, rv: str | None) -> None:
    """A uid or resourceVersion that is not the stored one: 409, as the apiserver answers."""
    meta = stored.get("metadata") or {}
    if uid is not None and meta.get("uid") not in (None, uid):
        raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}")
    if rv is not None and meta.get("resourceVersion") not in (None, rv):
        raise ApiError(409, "Conflict", "the object has been modified")


def in_namespace(obj: Any, namespace: str | None) -> bool:
    return namespace is None or (obj.get("metadata") or {}).get("namespace") == namespace


def _terms(selector: str) -> list[str]:
    """The selector's terms: split at the commas outside a set's parentheses."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    return [*terms, selector[start:]]


def _term_matches(labels: dict[str, str], term: str) -> bool:
    term = term.strip()
    if term.startswith("!"):
        return term[1:] not in labels
    if " notin (" in term:  # true also where the label is missing, as on the apiserver
        key, values = term.split(" notin (", 1)
        return labels.get(key.strip()) not in {v.strip() for v in values.rstrip(")").split(",")}
    if " in (" in term:
        key, values = term.split(" in (", 1)
        return labels.get(key.strip()) in {v.strip() for v in values.rstrip(")").split(",")}
    if "!=" in term:  # true also where the label is missing
        key, value = term.split("!=", 1)
        return labels.get(key.strip()) != value.strip()
    if "=" not in term:
        return term in labels  # a bare key: the label is there
    key, value = term.replace("==", "=").split("=", 1)
    return labels.get(key.strip()) == value.strip()


def matches(obj: Any, selector: str | None) -> bool:
    """Label selectors (``a=b``, ``k in (x,y)``, ``k notin (x,y)``, ``!k``, joined by commas), as
    the apiserver applies them."""
    if not selector:
        return True
    labels = ((obj.get("metadata") or {}).get("labels")) or {}
    return all(_term_matches(labels, t) for t in _terms(selector))
