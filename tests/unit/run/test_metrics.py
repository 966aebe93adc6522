"""Metrics and health endpoints over a real loopback HTTP server."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client import generate_latest

from reconciler.actions import Plan
from reconciler.engine.apply import ApplyReport
from reconciler.engine.sync import PassResult
from reconciler.run.metrics import Metrics, parse_address, serve


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def server():
    metrics = Metrics()
    srv = serve("127.0.0.1:0", metrics)
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    yield metrics.cluster("", interval=30, stale_after=0.5), base
    srv.shutdown()


def test_not_ready_and_not_healthy_before_the_first_pass(server):
    _, base = server
    assert get(base + "/readyz")[0] == 503
    assert get(base + "/healthz")[0] == 503


def test_pass_makes_it_ready_and_healthy_then_stale(server, monkeypatch):
    metrics, base = server
    result = PassResult("p1", Plan(), ApplyReport(), duration=0.2, observed={"Redis": 4})
    metrics.record_pass(result, {("LIST", "200"): 3})
    assert get(base + "/readyz")[0] == 200
    assert get(base + "/healthz")[0] == 200
    code, body = get(base + "/metrics")
    assert code == 200
    assert 'reconciler_passes_total{result="ok"} 1.0' in body
    assert 'reconciler_objects_observed{kind="Redis"} 4.0' in body
    assert 'reconciler_api_requests_total{code="200",verb="LIST"} 3.0' in body
    assert "reconciler_pass_duration_seconds_count 1.0" in body
    assert "process_resident_memory_bytes " in body  # the dashboard's memory panel
    metrics.record_requests({("LIST", "200"): 5})  # cumulative client counts
    assert 'reconciler_api_requests_total{code="200",verb="LIST"} 5.0' in get(base + "/metrics")[1]
    import time

    monkeypatch.setattr(time, "monotonic", lambda: metrics.last_tick + 1.0)
    assert get(base + "/healthz")[0] == 503  # a stalled loop is seen


def test_readyz_says_why_while_the_lease_cannot_be_seen(server):
    metrics, base = server
    metrics.tick()
    trouble: list[str] = []
    metrics.blocked = lambda: trouble[0] if trouble else None
    assert get(base + "/readyz") == (200, "ok\n")
    trouble.append("lease ns/reconciler neither held nor seen for 20s: 403 Forbidden")
    assert get(base + "/readyz") == (503, trouble[0] + "\n")
    assert get(base + "/healthz")[0] == 200  # alive: a restart would not help


def test_the_interval_is_exported_for_the_stalled_alert():
    metrics = Metrics()
    metrics.cluster("", interval=45, stale_after=135)
    body = generate_latest(metrics.registry).decode()
    assert "reconciler_pass_interval_seconds 45.0" in body


def test_parse_address():
    assert parse_address(":8080") == ("", 8080)
    assert parse_address("127.0.0.1:9") == ("127.0.0.1", 9)
    with pytest.raises(ValueError):
        parse_address("nope")


def test_a_port_out_of_range_is_a_value_error_naming_it():
    """Not the socket's OverflowError, which the daemon does not expect."""
    with pytest.raises(ValueError, match="port 99999 is not between 0 and 65535"):
        parse_address(":99999")


def unreachable(message: str = "connect to 10.0.0.1:443: connection refused") -> PassResult:
    return PassResult("p", Plan(), ApplyReport(), unreachable=message)


def test_several_clusters_label_every_series_and_readyz_names_the_one_not_reached():
    metrics = Metrics(named=True)
    srv = serve("127.0.0.1:0", metrics)
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        prod = metrics.cluster("prod", interval=30, stale_after=90)
        staging = metrics.cluster("staging", interval=10, stale_after=30)
        assert get(base + "/readyz") == (503, "prod: first pass not done\n")
        prod.record_pass(PassResult("p", Plan(), ApplyReport(), observed={"Redis": 2}), {})
        staging.record_pass(unreachable(), {("LIST", "error"): 1})
        assert get(base + "/readyz") == (200, "ok\n")  # its loop says when that is too long
        body = get(base + "/metrics")[1]
        assert 'reconciler_objects_observed{cluster="prod",kind="Redis"} 2.0' in body
        assert 'reconciler_passes_total{cluster="staging",result="unreachable"} 1.0' in body
        assert 'reconciler_pass_interval_seconds{cluster="staging"} 10.0' in body
        assert 'reconciler_api_requests_total{cluster="staging",code="error",verb="LIST"}' in body
        assert 'reconciler_last_reached_timestamp_seconds{cluster="staging"}' not in body
        staging.blocked = lambda: "no pass has reached the cluster for 20s (...): refused"
        assert get(base + "/readyz") == (
            503,
            "staging: no pass has reached the cluster for 20s (...): refused\n",
        )
    finally:
        srv.shutdown()


def test_readyz_fails_after_unready_after_passes_that_cannot_use_the_cluster(server):
    """The count is the loop's (it feeds systemd's STATUS= too); /readyz
    answers with the same words, and a pass that reaches the cluster clears it."""
    from reconciler.run.daemon import Loop
    from reconciler.run.pacing import Schedule

    metrics, base = server
    metrics.stale_after = 3600  # not the stalled-loop rule
    results = [unreachable(), unreachable(), PassResult("p", Plan(), ApplyReport())]
    loop = Loop(
        lambda: results.pop(0),
        schedule=Schedule(30, 1, 0.5),
        jitter=0,
        metrics=metrics,
        unready_after=2,
    )
    loop.tick()
    assert get(base + "/readyz") == (200, "ok\n")
    loop.tick()
    code, why = get(base + "/readyz")
    assert code == 503
    assert why.startswith("no pass has reached the cluster for ")
    assert "(2 passes in a row since " in why
    assert why.endswith("UTC): connect to 10.0.0.1:443: connection refused\n")
    assert "reconciler_last_reached_timestamp_seconds 0.0" in get(base + "/metrics")[1]
    loop.tick()
    assert get(base + "/readyz") == (200, "ok\n")
    assert "reconciler_last_reached_timestamp_seconds 0.0" not in get(base + "/metrics")[1]


def test_a_stuck_clusters_loop_fails_readyz_with_its_name_not_healthz(monkeypatch):
    """A restart would stop every cluster's passes for one that hangs: the
    stuck loop is named by /readyz (and its alerts), and /healthz fails only
    once no loop ticks at all."""
    import time

    metrics = Metrics(named=True)
    quick, slow = (metrics.cluster(n, interval=1, stale_after=3) for n in ("a", "b"))
    quick.tick()
    slow.tick()
    assert metrics.healthy()
    assert metrics.not_ready() is None
    later = time.monotonic() + 4
    monkeypatch.setattr(time, "monotonic", lambda: later)
    quick.tick()
    assert metrics.healthy()
    assert metrics.not_ready() == "b: no pass has ended for 4s: one is still running"
    monkeypatch.setattr(time, "monotonic", lambda: later + 4)
    assert not metrics.healthy()


def test_one_clusters_stuck_loop_fails_healthz():
    import time

    metrics = Metrics()
    one = metrics.cluster("", interval=1, stale_after=3)
    one.tick()
    assert metrics.healthy()
    one.last_tick = time.monotonic() - 4
    assert not metrics.healthy()
    assert metrics.not_ready() == "no pass has ended for 4s: one is still running"


def test_one_cluster_has_no_cluster_label():
    metrics = Metrics()
    one = metrics.cluster("", interval=30, stale_after=90)
    one.record_pass(PassResult("p", Plan(), ApplyReport(), observed={"Redis": 1}), {})
    body = generate_latest(metrics.registry).decode()
    assert 'reconciler_objects_observed{kind="Redis"} 1.0' in body
    assert "cluster=" not in body


def test_a_list_that_was_no_list_or_stale_is_counted_by_kind():
    metrics = Metrics()
    one = metrics.cluster("", interval=30, stale_after=90)
    result = PassResult("p", Plan(), ApplyReport(), errors=["LIST Redis: ..."])
    result.malformed, result.stale, result.refused = ["Redis"], ["Xca"], ["Redis", "Redis"]
    one.record_pass(result, {})
    one.record_pass(result, {})
    body = generate_latest(metrics.registry).decode()
    assert 'reconciler_malformed_lists_total{kind="Redis"} 2.0' in body
    assert 'reconciler_stale_lists_total{kind="Xca"} 2.0' in body
    assert 'reconciler_owner_references_refused_total{kind="Redis"} 4.0' in body
