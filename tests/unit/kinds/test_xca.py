from reconciler.actions import PatchStatus
from reconciler.engine.plan import plan_pass
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
