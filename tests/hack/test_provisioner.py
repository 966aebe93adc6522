"""hack/cluster/provisioner.py: what it writes for a claim handed to it, a
claim that grows and a volume released, against a recorded apiserver."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from hack.cluster import provisioner as prov

NAME = "hack.reconciler.local/hostpath"
UID = "0b5e6c1e-1111-2222-3333-444455556666"
VOLUME = f"pvc-{UID}"


class FakeApi:
    """Answers LISTs from ``objects`` (by path) and records every write."""

    def __init__(self, **objects: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.writes: list[tuple[str, str, Any]] = []
        self.refuse: dict[tuple[str, str], int] = {}

    def items(self, path: str) -> list[dict[str, Any]]:
        key = {
            prov.STORAGE_CLASSES: "classes",
            "/api/v1/persistentvolumeclaims": "claims",
            "/api/v1/persistentvolumes": "volumes",
        }[path]
        return self.objects.get(key, [])

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        if (method, path) in self.refuse:
            raise prov.ApiError(method, path, self.refuse[method, path], b"refused")
        self.writes.append((method, path, body))
        return {}

    def without_events(self) -> list[tuple[str, str, Any]]:
        return [w for w in self.writes if not w[1].endswith("/events")]

    def reasons(self) -> list[str]:
        return [w[2]["reason"] for w in self.writes if w[1].endswith("/events")]


def standard(**over: Any) -> dict[str, Any]:
    """A class as cluster.py makes it."""
    return {
        "metadata": {"name": "standard"},
        "provisioner": NAME,
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True,
        "volumeBindingMode": "Immediate",
        **over,
    }


def claim(phase: str = "Pending", size: str = "1Gi", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "data-r-0",
            "namespace": "ns1",
            "uid": UID,
            "annotations": {prov.ANN_PROVISIONER: NAME},
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
            "storageClassName": "standard",
            "volumeMode": "Filesystem",
            **({"volumeName": VOLUME} if phase == "Bound" else {}),
        },
        "status": {"phase": phase, **status},
    }


def volume(
    volumes_dir: Path, size: str = "1Gi", phase: str = "Bound", by: str = NAME, **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": VOLUME, "annotations": {prov.ANN_PROVISIONED_BY: by}},
        "spec": {
            "capacity": {"storage": size},
            "persistentVolumeReclaimPolicy": "Delete",
            "hostPath": {"path": str(volumes_dir / VOLUME)},
            "claimRef": {"namespace": "ns1", "name": "data-r-0", "uid": UID},
            **spec,
        },
        "status": {"phase": phase},
    }


def loop(tmp_path: Path, api: FakeApi) -> None:
    prov.Provisioner(api, NAME, tmp_path).loop()  # type: ignore[arg-type]


def test_a_claim_handed_to_us_gets_a_volume_of_its_size_pre_bound_to_it(tmp_path: Path) -> None:
    api = FakeApi(classes=[standard()], claims=[claim(size="3Gi")])
    loop(tmp_path, api)
    ((method, path, pv),) = api.without_events()
    assert (method, path) == ("POST", "/api/v1/persistentvolumes")
    assert pv["metadata"] == {"name": VOLUME, "annotations": {prov.ANN_PROVISIONED_BY: NAME}}
    spec = pv["spec"]
    assert spec["capacity"] == {"storage": "3Gi"}
    assert spec["accessModes"] == ["ReadWriteOnce"]
    assert spec["storageClassName"] == "standard"
    assert spec["persistentVolumeReclaimPolicy"] == "Delete"
    assert spec["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ns1",
        "name": "data-r-0",
        "uid": UID,
    }
    assert spec["hostPath"]["path"] == str(tmp_path / VOLUME)
    assert (tmp_path / VOLUME).is_dir()
    assert api.reasons() == ["ProvisioningSucceeded"]


@pytest.mark.parametrize(
    ("classes", "annotation"),
    [
        ([], NAME),  # its class does not exist
        ([standard(provisioner="example.com/other")], NAME),
        ([standard()], None),  # the binder has not handed it over yet
        ([standard()], "example.com/other"),
    ],
)
def test_a_claim_not_handed_to_us_is_left_alone(
    tmp_path: Path, classes: list[dict[str, Any]], annotation: str | None
) -> None:
    pending = claim()
    pending["metadata"]["annotations"] = {prov.ANN_PROVISIONER: annotation} if annotation else {}
    api = FakeApi(classes=classes, claims=[pending])
    loop(tmp_path, api)
    assert api.writes == []


def test_a_volume_made_by_an_earlier_loop_is_not_an_error(tmp_path: Path) -> None:
    api = FakeApi(classes=[standard()], claims=[claim()])
    api.refuse["POST", "/api/v1/persistentvolumes"] = 409
    loop(tmp_path, api)
    assert api.writes == []


def test_a_claim_that_grows_is_resized_then_finished_as_a_node_would(tmp_path: Path) -> None:
    bound = claim("Bound", size="2Gi", capacity={"storage": "1Gi"})
    api = FakeApi(classes=[standard()], claims=[bound], volumes=[volume(tmp_path, "1Gi")])
    loop(tmp_path, api)
    (pv_patch, claim_patch) = api.without_events()
    assert pv_patch == (
        "PATCH",
        f"/api/v1/persistentvolumes/{VOLUME}",
        {"spec": {"capacity": {"storage": "2Gi"}}},
    )
    assert claim_patch[1] == "/api/v1/namespaces/ns1/persistentvolumeclaims/data-r-0/status"
    status = claim_patch[2]["status"]
    assert status["allocatedResources"] == {"storage": "2Gi"}
    assert status["allocatedResourceStatuses"] == {"storage": "NodeResizePending"}
    assert [c["type"] for c in status["conditions"]] == ["FileSystemResizePending"]
    assert api.reasons() == ["Resizing", "FileSystemResizeRequired"]

    # The next loop sees what the first one wrote.
    pending = claim("Bound", size="2Gi", capacity={"storage": "1Gi"}, **status)
    api = FakeApi(classes=[standard()], claims=[pending], volumes=[volume(tmp_path, "2Gi")])
    loop(tmp_path, api)
    ((_, path, body),) = api.without_events()
    assert path.endswith("/data-r-0/status")
    assert body["status"] == {
        "capacity": {"storage": "2Gi"},
        "allocatedResourceStatuses": None,
        "conditions": [],
    }
    assert api.reasons() == ["FileSystemResizeSuccessful"]


def test_the_same_size_in_other_units_is_no_growth(tmp_path: Path) -> None:
    bound = claim("Bound", size="1024Mi", capacity={"storage": "1Gi"})
    api = FakeApi(classes=[standard()], claims=[bound], volumes=[volume(tmp_path, "1Gi")])
    loop(tmp_path, api)
    assert api.writes == []


def test_a_bound_claim_on_a_volume_not_ours_is_not_grown(tmp_path: Path) -> None:
    bound = claim("Bound", size="2Gi", capacity={"storage": "1Gi"})
    theirs = volume(tmp_path, "1Gi", by="example.com/other")
    api = FakeApi(classes=[standard()], claims=[bound], volumes=[theirs])
    loop(tmp_path, api)
    assert api.writes == []


def test_a_released_volume_of_ours_is_deleted_with_its_directory(tmp_path: Path) -> None:
    (tmp_path / VOLUME).mkdir()
    api = FakeApi(volumes=[volume(tmp_path, phase="Released")])
    loop(tmp_path, api)
    assert api.writes == [("DELETE", f"/api/v1/persistentvolumes/{VOLUME}", None)]
    assert not (tmp_path / VOLUME).exists()


@pytest.mark.parametrize(
    "released",
    [
        {"by": "example.com/other"},
        {"persistentVolumeReclaimPolicy": "Retain"},
        {"phase": "Bound"},
    ],
)
def test_other_volumes_are_not_deleted(tmp_path: Path, released: dict[str, Any]) -> None:
    (tmp_path / VOLUME).mkdir()
    api = FakeApi(volumes=[volume(tmp_path, **{"phase": "Released", **released})])
    loop(tmp_path, api)
    assert api.writes == []
    assert (tmp_path / VOLUME).is_dir()


def test_a_directory_outside_ours_is_never_removed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / VOLUME
    elsewhere.mkdir(parents=True)
    released = volume(tmp_path, phase="Released", hostPath={"path": str(elsewhere)})
    api = FakeApi(volumes=[released])
    loop(tmp_path / "volumes", api)
    assert [w[0] for w in api.writes] == ["DELETE"]
    assert elsewhere.is_dir()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Gi", 2**30),
        ("1024Mi", 2**30),
        ("1.5Gi", 3 * 2**29),
        ("500M", 500 * 10**6),
        ("1e3", 1000),
        ("1k", 1000),
        ("100m", Fraction(1, 10)),
        ("12345", 12345),
    ],
)
def test_quantities(text: str, value: Fraction | int) -> None:
    assert prov.quantity(text) == value


def test_an_apiserver_away_fails_a_loop_not_the_provisioner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused connections are logged once, the loops go on, and the first
    loop that works writes the ready file."""
    outcomes: list[BaseException | None] = [OSError("refused"), OSError("refused"), None]

    class Flaky(prov.Provisioner):
        def loop(self) -> None:
            outcome = outcomes.pop(0)
            if outcome is not None:
                raise outcome

    def sleep(seconds: float) -> None:
        if not outcomes:
            raise KeyboardInterrupt  # the test's way out of the endless loop

    monkeypatch.setattr(prov.time, "sleep", sleep)
    ready = tmp_path / "ready"
    with pytest.raises(KeyboardInterrupt):
        prov.run(Flaky(FakeApi(), NAME, tmp_path), 0.5, ready)  # type: ignore[arg-type]
    assert ready.exists()
    log = capsys.readouterr().out
    assert log.count("loop failed") == 1
    assert "loop works again" in log
