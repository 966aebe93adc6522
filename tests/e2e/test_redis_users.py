"""What creating a Redis grants, on the real apiserver: an editor of a
namespace (the built-in `edit`, into which config/redis-users aggregates)
may write Redis objects there and not their status; a Redis naming an image
outside `allowed_images` gets no pod and says why; the pods of one that may
run get no ServiceAccount token and no Service variables."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.e2e.conftest import Kubectl, Reconciler, kubeconfig_for, wait_for

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = "redis,oliver006/redis_exporter"


def editor(kubectl: Kubectl, ns: str, tmp_path: Path) -> Kubectl:
    """A ServiceAccount bound to the built-in edit role in ``ns`` only."""
    kubectl.run("create", "serviceaccount", "editor", "-n", ns)
    kubectl.run(
        "create", "rolebinding", "editor", "--clusterrole=edit", f"--serviceaccount={ns}:editor",
        "-n", ns,
    )  # fmt: skip
    token = kubectl.run("create", "token", "editor", "-n", ns, "--duration=10m").stdout.strip()
    return Kubectl(kubeconfig_for(kubectl, tmp_path / "editor", {"token": token}))


def can(who: Kubectl, verb: str, what: str, ns: str, *extra: str) -> bool:
    asked = who.run("auth", "can-i", verb, what, "-n", ns, *extra, check=False)
    return asked.stdout.strip() == "yes"


def redis(ns: str, name: str, **spec: object) -> str:
    body = {
        "apiVersion": "myapp.demo.kubebuilder.io/v1",
        "kind": "Redis",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"num": 1, **spec},
    }
    return json.dumps(body)


def test_an_editor_writes_redis_objects_and_gets_what_the_setting_allows(
    kubectl: Kubectl, reconciler: Reconciler, ns: str, tmp_path: Path
):
    kubectl.run("apply", "-k", str(ROOT / "config" / "redis-users"))
    user = editor(kubectl, ns, tmp_path)
    wait_for(lambda: can(user, "create", "redis", ns), what="edit to aggregate our role")
    assert can(user, "create", "xcas", ns) and can(user, "delete", "redis", ns)
    assert not can(user, "patch", "redis", ns, "--subresource=status")
    assert not can(user, "create", "redis", "default")

    user.run("create", "-f", "-", stdin=redis(ns, "evil", image="evil.example/exfil:1"))
    user.run("create", "-f", "-", stdin=redis(ns, "good", image="redis:7"))
    env = {"RECONCILER_ALLOWED_IMAGES": SHIPPED}
    reconciler.sync(ns, env=env, expect=None)
    reconciler.sync(ns, env=env, expect=None)

    evil = kubectl.json("get", "redis", "evil", "-n", ns)["status"]
    degraded = next(c for c in evil["conditions"] if c["type"] == "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "ImageNotAllowed"
    assert "spec.image: evil.example/exfil:1" in degraded["message"]
    pods = kubectl.json("get", "pods", "-n", ns)["items"]
    assert [p["metadata"]["name"] for p in pods] == ["good-0"]
    spec = pods[0]["spec"]
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert not [v for v in spec.get("volumes", []) if "projected" in v], yaml.safe_dump(spec)
