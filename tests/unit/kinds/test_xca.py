from reconciler.actions import PatchStatus
from reconciler.engine.plan import plan_pass
from reconciler.kinds import xca as xca_kind
from tests.unit.builders import CONFIG, NOW, plan_xca, snap, xca


def test_inactive_xca_is_activated_once_with_an_event():
    (action,) = plan_xca(xca(active=False), NOW)
    assert isinstance(action, PatchStatus)
    assert action.status == {"active": True, "last_update_time": "2026-11-22T12:00:00Z"}
    assert action.resource_version == "3"
    (event,) = action.events
    assert (event.type, event.reason, event.component) == ("Normal", "Activated", "xca-controller")


def test_xca_without_status_is_activated():
    assert len(plan_xca(xca(active=None), NOW)) == 1


def test_active_xca_costs_nothing():
    assert plan_xca(xca(active=True), NOW) == []


def test_deleting_xca_is_left_alone():
    assert plan_xca(xca(active=False, deleting=True), NOW) == []


def test_failed_xca_list_means_no_xca_writes():
    assert plan_pass(snap((), None, ()), CONFIG, NOW).actions == ()


def test_activation_event_in_full():
    from reconciler.actions import EventSpec, ObjRef

    x = xca(active=False)
    (action,) = plan_xca(x, NOW)
    ref = ObjRef("apps.xca.k8s.kb.cx/v1beta1", "Xca", "default", "x", x.uid)
    assert action.events == (
        EventSpec(ref, "Normal", "Activated", "Xca x activated", "xca-controller"),
    )


def test_health_once_its_actions_land():
    from reconciler.backoff import STATUS_FIELD, Failure, to_status
    from reconciler.health import READY, Health
    from reconciler.kinds import xca as xca_kind

    inactive, active = xca(active=False), xca(active=True)
    assert xca_kind.health(active, []) == Health(READY, "active")
    assert xca_kind.health(inactive, plan_xca(inactive, NOW)) == Health(READY, "active")
    activating = Health("Activating", "not active yet", progressing=True)
    assert xca_kind.health(inactive, []) == activating
    deleting = xca(active=False, deleting=True)
    assert xca_kind.health(deleting, []) == Health("Deleting", "being deleted", progressing=True)
    record = to_status(Failure(3, "403 Forbidden: no", "Forbidden", 0.0))
    failing = PatchStatus(inactive.key, "3", {STATUS_FIELD: record})
    assert xca_kind.health(inactive, [failing]) == Health(
        "Forbidden", "403 Forbidden: no", degraded=True
    )


def test_a_held_xcas_record_is_a_guarded_patch_that_names_its_fields_and_holder():
    """Backing off, an Xca writes only its failure record and, sharded, its
    holder: guarded by the version it was read at, and its log line names
    the fields it changes."""
    from reconciler.backoff import Failure, Gate
    from reconciler.kinds.base import PlanInput
    from reconciler.model import PodIndex

    fail = Failure(3, "boom", "ReconcileError", 2_000_000_000.0)
    x = xca(active=False)
    held = PlanInput(PodIndex(()), CONFIG, NOW, Gate(fail, True, False), holder="host-a")
    (patch,) = xca_kind.plan(x, held)
    assert patch.resource_version == x.resource_version
    assert set(patch.changed) == {"backoff", "shard"} and patch.status["shard"] == "host-a"
    assert patch.describe().endswith("status (backoff, shard)")
