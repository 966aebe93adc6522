"""Why a write failed, in the words a user acts on: the Degraded reason and
the Warning event's reason for each refusal, and the executor's own
failures (a write failed, throttled, or an eviction a budget refused).
"""

from __future__ import annotations

from reconciler.actions import (
    Action,
    CreateChild,
    DeleteChild,
    PatchChild,
    Verb,
)
from reconciler.backoff import DEFAULT_REASON
from reconciler.client.errors import (
    ApiError,
    Forbidden,
    Invalid,
)
from reconciler.model import ResourceType

FAILURE_REASONS = {
    Verb.CREATE: "FailedCreatePod",
    Verb.DELETE: "FailedDeletePod",
    Verb.PATCH_FINALIZERS: "FailedUpdateFinalizers",
    Verb.PATCH_STATUS: "FailedUpdateStatus",
    Verb.PATCH_METADATA: "FailedUpdatePod",
    Verb.PATCH_LABELS: "FailedUpdateLabels",
    Verb.EVICT: "FailedEvictPod",
}


# The same for a child object, by verb: the kind follows ("FailedCreateService").
CHILD_FAILURE_REASONS = {
    Verb.CREATE: "FailedCreate",
    Verb.PATCH: "FailedUpdate",
    Verb.DELETE: "FailedDelete",
}


INVALID_OBJECT = "InvalidObject"


QUOTA_EXCEEDED = "QuotaExceeded"


FORBIDDEN = "Forbidden"


# A failure no status can record, nor any retry of this release mend.
NO_STATUS_SUBRESOURCE = "NoStatusSubresource"


def reason_of(exc: Exception) -> str:
    return exc.reason if isinstance(exc, WriteFailed) else DEFAULT_REASON


def failure_reason(exc: ApiError) -> str:
    """The Degraded reason for a refused write: what a user must act on."""
    if isinstance(exc, Invalid):
        return INVALID_OBJECT
    if isinstance(exc, Forbidden):
        return QUOTA_EXCEEDED if "exceeded quota" in exc.message else FORBIDDEN
    return DEFAULT_REASON


def failure_event_reason(action: Action) -> str:
    """The reason of the Warning event that says a write failed."""
    if isinstance(action, CreateChild | PatchChild | DeleteChild):
        return CHILD_FAILURE_REASONS[action.verb] + action.kind
    return FAILURE_REASONS[action.verb]


def conflict_reason(kind: str) -> str:
    """The Degraded reason while another's object holds a name we want."""
    return f"{kind}Conflict"


class WriteFailed(Exception):
    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class WriteThrottled(Exception):
    """The apiserver kept answering 429: this object's work waits for the next pass."""


class WriteRefused(Exception):
    """A disruption budget does not allow this eviction now."""


def no_status_subresource(res: ResourceType) -> str:
    """What a status write to a CRD installed without its status subresource says."""
    return (
        f"the installed CRD {res.crd_name} has no status subresource: "
        "apply the CRDs of this release"
    )


def pruned_field(res: ResourceType, name: str) -> str:
    """What a status field dropped by an older installed CRD says."""
    return (
        f"status.{name} is pruned by the installed CRD {res.crd_name}: "
        "apply the CRDs of this release"
    )
