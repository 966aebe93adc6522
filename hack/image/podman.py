"""The image built and run as the overlays run it, with podman: shared by the
image tests (tests/e2e/test_image.py) and `python -m bench.image`.

The engine's settings and storage live in a cache directory outside the repo
(CONTAINERS_CONF, CONTAINERS_STORAGE_CONF), so nothing in /etc changes and the
stand-in base image is made once per machine.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOOLS = ("podman", "buildah", "runc", "mmdebstrap")

# Pod security settings that become podman flags below; a setting outside
# these would be silently dropped, so container_args refuses it instead.
_KNOWN_SECURITY = {
    "runAsUser",
    "runAsGroup",
    "runAsNonRoot",
    "fsGroup",
    "readOnlyRootFilesystem",
    "allowPrivilegeEscalation",
    "capabilities",
    "seccompProfile",
}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("IMAGE_CACHE_DIR", f"{base}/reconciler/image"))


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


@dataclass(frozen=True)
class Engine:
    """podman (and buildah, mmdebstrap) with this project's settings."""

    env: dict[str, str]

    def run(
        self, *args: str, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["podman", *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)}: exit {proc.returncode}: {proc.stderr}")
        return proc

    def base(self) -> str:
        """The stand-in base image (hack/image/base.sh), made once and cached."""
        out = subprocess.run(
            ["bash", str(HERE / "base.sh")],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=900,
        )
        if out.returncode != 0:
            raise RuntimeError(f"hack/image/base.sh: {out.stderr}")
        return out.stdout.strip()

    def build(self, img: str, base: str) -> subprocess.CompletedProcess[str]:
        """`make docker-build`, as a user runs it, with podman and the stand-in base."""
        env = {**os.environ, **self.env, "BUILDER": "podman"}
        return subprocess.run(
            ["make", "--no-print-directory", "docker-build", f"IMG={img}", f"BASE={base}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    def size(self, img: str) -> int:
        return int(self.run("image", "inspect", img, "--format", "{{.Size}}").stdout)


def engine() -> Engine:
    """podman set up for this machine: runc, cgroupfs, vfs storage in the cache."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    storage = cache / "storage.conf"
    storage.write_text(
        f'[storage]\ndriver = "vfs"\ngraphroot = "{cache}/storage"\nrunroot = "{cache}/run"\n'
    )
    return Engine(
        env={
            "CONTAINERS_CONF": str(HERE / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(storage),
        }
    )


def container_args(pod: dict[str, Any], container: dict[str, Any], namespace: str) -> list[str]:
    """`podman run` flags for a container as the kubelet would run it: its
    user, read-only root, capabilities, no privilege escalation, emptyDirs as
    tmpfs and its environment (a namespace fieldRef resolved to `namespace`).
    The default seccomp profile of podman stands for RuntimeDefault."""
    sc = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    unknown = set(sc) - _KNOWN_SECURITY
    if unknown:
        raise ValueError(f"securityContext fields with no podman flag here: {sorted(unknown)}")
    if sc.get("runAsNonRoot") and not sc.get("runAsUser"):
        raise ValueError("runAsNonRoot without runAsUser: the image's USER would decide")
    args = ["--user", f"{sc['runAsUser']}:{sc.get('runAsGroup', sc['runAsUser'])}"]
    if sc.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    for cap in sc.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", cap]
    if sc.get("seccompProfile", {}).get("type", "RuntimeDefault") != "RuntimeDefault":
        raise ValueError(f"seccompProfile {sc['seccompProfile']} has no podman flag here")
    if (fs_group := sc.get("fsGroup")) is not None:
        args += ["--group-add", str(fs_group)]  # the kubelet adds it, and owns volumes by it
    args += _volumes(pod, container)
    for var in container.get("env", []):
        if "value" in var:
            args += ["-e", f"{var['name']}={var['value']}"]
        elif var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace":
            args += ["-e", f"{var['name']}={namespace}"]
        else:
            raise ValueError(f"env {var['name']}: only metadata.namespace fieldRefs are resolved")
    return args


def _volumes(pod: dict[str, Any], container: dict[str, Any]) -> list[str]:
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    args: list[str] = []
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "emptyDir" not in volume:
            raise ValueError(f"volume {mount['name']}: only emptyDir is run here")
        options = ["rw", "mode=1777"]  # an emptyDir is world-writable
        if size := volume["emptyDir"].get("sizeLimit"):
            options.append(f"size={_bytes(size)}")
        args += ["--tmpfs", f"{mount['mountPath']}:{','.join(options)}"]
    return args


def _bytes(quantity: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity[: -len(suffix)]) * factor
    return int(quantity)


def service_account(directory: Path, token: str, ca_pem: bytes, namespace: str) -> Path:
    """The files a pod finds in its service account mount, readable by any uid."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    for name, data in (
        ("token", token.encode()),
        ("ca.crt", ca_pem),
        ("namespace", namespace.encode()),
    ):
        path = directory / name
        path.write_bytes(data)
        path.chmod(0o644)
    return directory


def in_cluster(kubeconfig: Path, token: str, directory: Path, namespace: str) -> list[str]:
    """`podman run` flags that make a container a pod of a ServiceAccount:
    its token, the cluster's CA and the namespace mounted where a pod finds
    them, KUBERNETES_SERVICE_HOST/PORT set, and the host's network, because
    the local apiserver listens on loopback."""
    (cluster,) = yaml.safe_load(kubeconfig.read_text())["clusters"]
    ca = base64.b64decode(cluster["cluster"]["certificate-authority-data"])
    server = urlsplit(cluster["cluster"]["server"])
    sa = service_account(directory, token, ca, namespace)
    return [
        "--network=host",
        "-v",
        f"{sa}:{SA_DIR}:ro",
        "-e",
        f"KUBERNETES_SERVICE_HOST={server.hostname}",
        "-e",
        f"KUBERNETES_SERVICE_PORT={server.port}",
    ]


def limits(container: dict[str, Any]) -> list[str]:
    """The container's CPU and memory limits as podman flags."""
    limit = container["resources"]["limits"]
    return ["--memory", f"{_bytes(limit['memory'])}b", "--cpus", str(_cpus(limit["cpu"]))]


def _cpus(quantity: str) -> float:
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def overlay_pod(overlay: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod spec and its one container of a kustomize overlay's workload
    (`kubectl kustomize`), as the kubelet would be given them."""
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / overlay)], capture_output=True, text=True, check=True
    ).stdout
    (workload,) = [
        d for d in yaml.safe_load_all(rendered) if d and d["kind"] in ("CronJob", "Deployment")
    ]
    if workload["kind"] == "CronJob":
        pod = workload["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    else:
        pod = workload["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container
