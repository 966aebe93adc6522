"""A Redis only its clients can use, on a real apiserver: the password from
a Secret the reconciler never reads, a Secret that is missing named in the
status (its container state written as a kubelet writes it), redis.conf
directives that roll the pods and those we set refused at admission, the
exporter and the Service's metrics port, and a NetworkPolicy made, updated
and deleted with spec.networkPolicy."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from reconciler.kinds.redis.server import OPEN_ARGS

from . import kubelet
from .conftest import Kubectl, NotYet, Reconciler, wait_for
from .test_real_clusters import condition, events, status, stays_converged, uids
from .test_redis import pods, settled

pytestmark = pytest.mark.e2e

NAME = "redis-sample"
PASSWORD = "e2e-pw-7c1f0b9d"  # unique: found nowhere but in its Secret


def redis_doc(ns: str, num: int = 2, **spec: Any) -> str:
    doc = {
        "apiVersion": "myapp.demo.kubebuilder.io/v1",
        "kind": "Redis",
        "metadata": {"name": NAME, "namespace": ns},
        "spec": {"num": num, **spec},
    }
    return json.dumps(doc)


def secret(kubectl: Kubectl, ns: str, name: str = "creds", key: str = "password") -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "data": {key: base64.b64encode(PASSWORD.encode()).decode()},
    }
    kubectl.apply(json.dumps(doc))


def merge(kubectl: Kubectl, ns: str, spec: dict[str, Any]) -> None:
    patch = json.dumps({"spec": spec})
    kubectl.run("patch", "redis", NAME, "-n", ns, "--type=merge", "-p", patch)


def converged(kubectl: Kubectl, reconciler: Reconciler, ns: str) -> None:
    reconciler.converge(ns, settle=lambda: settled(kubectl, ns), passes=30)


def container(p: dict[str, Any], name: str = "redis") -> dict[str, Any]:
    return next(c for c in p["spec"]["containers"] if c["name"] == name)


def test_the_password_comes_from_the_secret_and_is_nowhere_else(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    secret(kubectl, ns)
    kubectl.apply(redis_doc(ns, auth={"passwordSecret": {"name": "creds"}}))
    first = reconciler.sync(ns, "--log-level", "debug")
    converged(kubectl, reconciler, ns)
    for p in pods(kubectl, ns).values():
        redis = container(p)
        assert redis["env"] == [
            {
                "name": "REDIS_PASSWORD",
                "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}},
            }
        ]
        assert "$(REDIS_PASSWORD)" in redis["args"]
        assert PASSWORD not in json.dumps(p)
    seen = [
        json.dumps(kubectl.json("get", "redis", NAME, "-n", ns)),
        json.dumps(kubectl.json("get", "events", "-n", ns)),
        first.stderr,
        json.dumps(first.summary),
        reconciler.cli("plan", "-n", ns, "-o", "json").stdout,
    ]
    assert not [s for s in seen if PASSWORD in s]
    # A new key rolls the pods; the same spec again rolls nothing.
    before = uids(kubectl, ns)
    merge(kubectl, ns, {"auth": {"passwordSecret": {"name": "creds", "key": "pw"}}})
    converged(kubectl, reconciler, ns)
    after = uids(kubectl, ns)
    assert set(after) == set(before) and not set(after.values()) & set(before.values())
    assert all(
        container(p)["env"][0]["valueFrom"]["secretKeyRef"]["key"] == "pw"
        for p in pods(kubectl, ns).values()
    )
    stays_converged(kubectl, reconciler, ns)


def test_a_missing_secret_is_named_with_its_key_in_the_status(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_doc(ns, num=1, auth={"passwordSecret": {"name": "absent", "key": "k"}}))
    converged(kubectl, reconciler, ns)
    kubelet.config_error(kubectl, ns, f"{NAME}-0", 'secret "absent" not found')
    reconciler.sync(ns)
    st = status(kubectl, ns)
    assert condition(st, "Progressing") == ("True", "WaitingForReady")
    assert (
        f'{NAME}-0 not Ready: CreateContainerConfigError: secret "absent" not found '
        "(spec.auth.passwordSecret: key k of Secret absent)"
    ) in st["message"]


def test_a_secret_name_no_pod_could_use_is_refused_at_admission(kubectl: Kubectl, ns: str):
    """A pod's secretKeyRef takes only a DNS subdomain: the CRD refuses any
    other name, so no pass meets a create every pod would fail."""
    bad = redis_doc(ns, num=1, auth={"passwordSecret": {"name": "Team_Creds"}})
    refused = kubectl.apply(bad, check=False)
    assert refused.returncode != 0
    assert "spec.auth.passwordSecret.name" in refused.stderr
    assert "should match" in refused.stderr


def test_directives_roll_the_pods_and_those_we_set_are_refused_at_admission(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    kubectl.apply(redis_doc(ns, config=["maxmemory 100mb"]))
    converged(kubectl, reconciler, ns)
    assert all(
        container(p)["args"] == ["--port", "6379", "--maxmemory", "100mb", *OPEN_ARGS]
        for p in pods(kubectl, ns).values()
    )
    before = uids(kubectl, ns)
    merge(kubectl, ns, {"config": ["maxmemory 200mb", "maxmemory-policy allkeys-lru"]})
    converged(kubectl, reconciler, ns)
    after = pods(kubectl, ns)
    assert not {p["metadata"]["uid"] for p in after.values()} & set(before.values())
    assert all(
        container(p)["args"][2:]
        == ["--maxmemory", "200mb", "--maxmemory-policy", "allkeys-lru", *OPEN_ARGS]
        for p in after.values()
    )
    assert any("spec changed" in m for m in events(kubectl, ns, "CreatePod"))
    refused = kubectl.apply(redis_doc(ns, config=["maxmemory 1mb", "port 7000"]), check=False)
    assert refused.returncode != 0
    assert "directive port is set by spec.port, not spec.config" in refused.stderr
    assert "spec.config[1]" in refused.stderr
    stays_converged(kubectl, reconciler, ns)


# A hostile directive -> what the apiserver says of it (issue 77): the CRD's
# pattern (the grammar) and rules (a refused name, with why) from
# reconciler/kinds/redis/directives.py, in RE2 and CEL as served.
REFUSED_AT_ADMISSION = {
    "#comment": "should match",
    "appendonly": "should match",
    "maxmemory 1mb --port 7000": "should match",
    "maxmemory 1mb\t--port 7000": "should match",
    "maxmemory $(REDIS_PASSWORD)": "should match",
    'save "" --dir /tmp': "should match",
    "tcp-\u212aeepalive 60": "should match",
    "include /var/run/secrets/kubernetes.io/serviceaccount/token": "directive include is refused",
    "user default on nopass ~* &* +@all": "directive user is refused",
    "Loadmodule /x.so": "directive loadmodule is refused: it changes what the server runs",
    "bind 0.0.0.0 --protected-mode no": "directive bind is refused",
}


@pytest.mark.parametrize("directive", list(REFUSED_AT_ADMISSION))
def test_the_apiserver_refuses_a_hostile_directive_naming_its_field(
    kubectl: Kubectl, ns: str, directive: str
):
    doc = redis_doc(ns, num=0, config=["maxmemory 1mb", directive])
    refused = kubectl.apply(doc, check=False)
    assert refused.returncode != 0, refused.stdout
    assert "spec.config[1]" in refused.stderr
    assert REFUSED_AT_ADMISSION[directive] in refused.stderr


def test_the_apiserver_takes_the_controls_and_the_grammars_edges(kubectl: Kubectl, ns: str):
    config = [
        "maxmemory 100mb",
        "maxmemory-policy allkeys-lru",
        "save 900 1",
        'save ""',
        "notify-keyspace-events KEA$",
        "slowlog-log-slower-than -1",
        "  hz   10  ",
    ]
    kubectl.apply(redis_doc(ns, num=0, config=config))


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"storage": {"size": " 1Gi"}}, "spec.storage.size"),
        ({"storage": {"size": "2e30"}}, "spec.storage.size must be at most 1e30 bytes"),
        ({"exporter": {"image": "Redis_Exporter"}}, "spec.exporter.image"),
        ({"exporter": {"resources": {"limits": {"memory": "64 Mi"}}}}, "spec.exporter.resources"),
        ({"exporter": {"resources": {"requests": {"cpu": "-1"}}}}, "spec.exporter.resources"),
    ],
)
def test_the_apiserver_refuses_what_the_planner_refuses_in_storage_and_exporter(
    kubectl: Kubectl, ns: str, spec: dict[str, Any], says: str
):
    refused = kubectl.apply(redis_doc(ns, num=0, **spec), check=False)
    assert refused.returncode != 0, refused.stdout
    assert says in refused.stderr


def test_the_exporter_runs_beside_the_server_and_the_service_names_its_port(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    secret(kubectl, ns)
    auth = {"passwordSecret": {"name": "creds"}}
    kubectl.apply(redis_doc(ns, num=1, auth=auth))
    converged(kubectl, reconciler, ns)
    merge(kubectl, ns, {"exporter": {"resources": {"requests": {"cpu": "10m"}}}})
    converged(kubectl, reconciler, ns)
    (p,) = pods(kubectl, ns).values()
    exporter = container(p, "exporter")
    assert exporter["image"].startswith("oliver006/redis_exporter:v")
    assert exporter["ports"][0] == {"name": "metrics", "containerPort": 9121, "protocol": "TCP"}
    assert {"name": "REDIS_ADDR", "value": "redis://localhost:6379"} in exporter["env"]
    assert exporter["resources"] == {"requests": {"cpu": "10m"}}
    svc = kubectl.json("get", "service", NAME, "-n", ns)
    assert [(q["name"], q["port"]) for q in svc["spec"]["ports"]] == [
        ("redis", 6379),
        ("metrics", 9121),
    ]
    assert any(
        "ports follow spec.port and spec.exporter" in m for m in events(kubectl, ns, "Drift")
    )
    stays_converged(kubectl, reconciler, ns)


def policy(kubectl: Kubectl, ns: str) -> dict[str, Any] | None:
    found = kubectl.run("get", "networkpolicy", NAME, "-n", ns, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def test_a_network_policy_is_made_updated_and_deleted_with_allow_from(
    kubectl: Kubectl, reconciler: Reconciler, ns: str
):
    shop = [{"podSelector": {"matchLabels": {"app": "shop"}}}]
    kubectl.apply(redis_doc(ns, num=1, networkPolicy={"allowFrom": shop}))
    converged(kubectl, reconciler, ns)
    made = policy(kubectl, ns)
    assert made is not None
    assert made["metadata"]["ownerReferences"][0]["kind"] == "Redis"
    assert made["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == NAME
    assert made["spec"]["ingress"] == [{"from": shop, "ports": [{"protocol": "TCP", "port": 6379}]}]
    assert status(kubectl, ns)["networkPolicy"] == NAME
    stays_converged(kubectl, reconciler, ns)

    # Widened by hand: put back.
    kubectl.run(
        "patch",
        "networkpolicy",
        NAME,
        "-n",
        ns,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"ingress": [{}]}}),
    )
    converged(kubectl, reconciler, ns)
    assert policy(kubectl, ns)["spec"]["ingress"][0]["from"] == shop

    # Other peers, and the port: updated in place.
    others = [{"namespaceSelector": {"matchLabels": {"team": "web"}}}]
    merge(kubectl, ns, {"port": 6378, "networkPolicy": {"allowFrom": others}})
    converged(kubectl, reconciler, ns)
    updated = policy(kubectl, ns)
    assert updated["metadata"]["uid"] == made["metadata"]["uid"]
    assert updated["spec"]["ingress"] == [
        {"from": others, "ports": [{"protocol": "TCP", "port": 6378}]}
    ]

    # Unset: ours goes, and the status forgets it.
    kubectl.run(
        "patch",
        "redis",
        NAME,
        "-n",
        ns,
        "--type=json",
        "-p",
        json.dumps([{"op": "remove", "path": "/spec/networkPolicy"}]),
    )
    converged(kubectl, reconciler, ns)
    wait_for(lambda: policy(kubectl, ns) is None or NotYet("still there"), what="policy gone")
    assert "networkPolicy" not in status(kubectl, ns)
    stays_converged(kubectl, reconciler, ns)
