"""One real node, `real-0`, beside kwok's: a kubelet built from the control
plane's tag (build.sh kubelet) on Debian's containerd, runc and CNI plugins
(node-deps.sh), running images built here (node-images.sh): its start and
stop. Its names, certificates and configs: realnode_config.py. What it
changes on the host and how that is undone: realnode_host.py. How to use it
and debug its pods: CONTRIBUTING.md, "The real node".

cluster.py calls `prepare` before the apiserver starts (the certificates it
presents to the kubelet), `start` once the control plane is up, and `stop`
before it stops the control plane. `start` never fails the cluster: where
the machine cannot run a node it returns the reason, recorded in the state.
Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

if __package__:
    from . import realnode_host as host
    from .realnode_config import (
        APISERVER_CLIENT,
        ENV_VAR,
        KCM_CONTROLLERS,
        KUBELET_PORT,
        LABEL,
        NAME,
        NETWORK,
        TAINT,
        Node,
        apiserver_flags,
        cni_config,
        containerd_config,
        kubeconfig,
        kubelet_config,
        prepare,
        request,
        requested,
    )
else:
    import realnode_host as host  # type: ignore[no-redef]
    from realnode_config import (  # type: ignore[no-redef]
        APISERVER_CLIENT,
        ENV_VAR,
        KCM_CONTROLLERS,
        KUBELET_PORT,
        LABEL,
        NAME,
        NETWORK,
        TAINT,
        Node,
        apiserver_flags,
        cni_config,
        containerd_config,
        kubeconfig,
        kubelet_config,
        prepare,
        request,
        requested,
    )

__all__ = [  # what cluster.py and the tests use, from here or realnode_config
    "ENV_VAR", "KCM_CONTROLLERS", "LABEL", "NAME", "NETWORK", "TAINT", "Node",
    "apiserver_flags", "blocked", "cannot_run", "images", "prepare", "record", "request",
    "requested", "running", "start", "state", "stop",
]  # fmt: skip

HERE = Path(__file__).resolve().parent
# What the apiserver's client certificate may do on the kubelet (logs, exec,
# port-forward, metrics): the built-in role made for it.
KUBELET_API_ROLE = "system:kubelet-api-admin"
RBAC = "rbac.authorization.k8s.io"
TIMEOUT = 60.0
Api = Callable[..., tuple[int, dict]]


def cannot_run(bin_dir: Path | None = None) -> str | None:
    """Why this machine cannot run the node, or None."""
    if os.geteuid() != 0:
        return "not root (the kubelet needs root)"
    if (
        not (host.CGROUP_ROOT / "memory").is_dir()
        and not (host.CGROUP_ROOT / "cgroup.controllers").exists()
    ):
        return f"no cgroup hierarchy under {host.CGROUP_ROOT}"
    for tool in ("containerd", "runc", "iptables", "ip", "ctr"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (make cluster-up REAL_NODE=1 installs it as root)"
    if not Path("/usr/lib/cni/bridge").exists():
        return "the CNI plugins are not installed (containernetworking-plugins)"
    if bin_dir is not None and not (bin_dir / "kubelet").exists():
        return f"no kubelet in {bin_dir} (hack/cluster/build.sh kubelet)"
    return None


# ---------------------------------------------------------------- start


def start(
    node: Node, *, bin_dir: Path, server: str, ca: Path, api: Api, log: Callable[[str], None]
) -> str | None:
    """Start containerd and the kubelet and wait for real-0 Ready; returns
    None, or why the node could not run (what was started is stopped)."""
    reason = blocked(node, bin_dir)
    if reason is None:
        try:
            _start(node, bin_dir, server, ca, api, log)
        except (host.HostError, OSError, subprocess.SubprocessError, TimeoutError) as err:
            reason = f"failed: {err}"
            stop(node, api=api, log=log)
    record(node, reason)
    return reason


def record(node: Node, reason: str | None) -> None:
    """Whether the node runs, and if not why: what the real-node tests skip with."""
    _save(node, {"ready": reason is None, "reason": reason or ""})


def blocked(node: Node, bin_dir: Path | None = None) -> str | None:
    """Why this node cannot start here now, or None."""
    return cannot_run(bin_dir) or _another_node(node)


def _another_node(node: Node) -> str | None:
    """One real node per host: the bridge and the kubelet's port are the host's.
    A bridge without this node's run directory is another cluster's (whose
    `down` removes it): this one must not start on it, nor undo it."""
    if node.run.exists() or not host.bridge_links(host.run("ip", "-o", "link").stdout):
        return None
    return (
        f"another real node runs on this host (bridge {host.BRIDGE}; its cluster-down removes it)"
    )


def _start(
    node: Node, bin_dir: Path, server: str, ca: Path, api: Api, log: Callable[[str], None]
) -> None:
    started = time.monotonic()
    for d in (node.run / "kubelet", node.run / "pod-logs", node.root / "cni", node.root / "logs"):
        d.mkdir(parents=True, exist_ok=True)
    images = _images(bin_dir, log)
    host.save_sysctls(node.footprint().sysctls_saved)
    host.network_up(int(server.rsplit(":", 1)[1]))
    (node.root / "cni" / "10-reconciler.conflist").write_text(
        json.dumps(cni_config(node), indent=2)
    )
    pause = next(name for role, name, _ in images if role == "pause")
    (node.root / "containerd.toml").write_text(containerd_config(node, pause))
    _spawn(node, "containerd", ["containerd", "--config", str(node.root / "containerd.toml")])
    _until(lambda: _ctr(node, "version", check=False).returncode == 0, "containerd", node)
    _import(node, images, log)
    (node.root / "kubelet.yaml").write_text(json.dumps(kubelet_config(node), indent=2))
    (node.root / "kubelet.kubeconfig").write_text(kubeconfig(node, server, ca))
    _bind_apiserver_client(api)
    _spawn(node, "kubelet", [
        str(bin_dir / "kubelet"),
        f"--config={node.root / 'kubelet.yaml'}",
        f"--kubeconfig={node.root / 'kubelet.kubeconfig'}",
        f"--root-dir={node.run / 'kubelet'}",
        f"--hostname-override={NAME}",
        f"--node-ip={host.GATEWAY}",
        f"--node-labels={LABEL[0]}={LABEL[1]}",
        "--v=1",
    ])  # fmt: skip
    _until(lambda: _ready(api), f"node {NAME} Ready", node)
    took = time.monotonic() - started
    log(f"real node {NAME} Ready in {took:.1f}s (kubelet on {host.GATEWAY}:{KUBELET_PORT})")


def _images(bin_dir: Path, log: Callable[[str], None]) -> list[tuple[str, str, Path]]:
    """(role, name, OCI archive) of each image, pause first, from node-images.sh."""
    started = time.monotonic()
    res = subprocess.run(["bash", str(HERE / "node-images.sh"), str(bin_dir)],
                         stdout=subprocess.PIPE, text=True, timeout=1800)  # fmt: skip
    if res.returncode != 0:
        raise host.HostError(f"node-images.sh exited {res.returncode}")
    images = [(r, n, Path(p)) for r, n, p in (line.split() for line in res.stdout.splitlines())]
    names = ", ".join(n for _, n, _ in images)
    log(f"images ready in {time.monotonic() - started:.1f}s: {names}")
    return images


def images(node: Node) -> dict[str, str]:
    """The images the node holds, by role (pause, exporter, redis, reconciler)."""
    state = _load(node)
    return dict(state.get("images", {}))


def _import(node: Node, found: list[tuple[str, str, Path]], log: Callable[[str], None]) -> None:
    have = set(_ctr(node, "images", "ls", "-q").stdout.split())
    for _, name, archive in found:
        if name not in have:
            started = time.monotonic()
            _ctr(node, "images", "import", str(archive))
            log(f"imported {name} in {time.monotonic() - started:.1f}s")
    _save(node, {"images": {role: name for role, name, _ in found}})


def _bind_apiserver_client(api: Api) -> None:
    body = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": APISERVER_CLIENT},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": KUBELET_API_ROLE},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": APISERVER_CLIENT}],
    }  # fmt: skip
    code, out = api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body)
    if code not in (201, 409):
        raise host.HostError(f"binding {KUBELET_API_ROLE}: HTTP {code} {out}")


def _ready(api: Api) -> bool:
    code, node = api("GET", f"/api/v1/nodes/{NAME}")
    conditions = node.get("status", {}).get("conditions", []) if code == 200 else []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


# ---------------------------------------------------------------- stop


def stop(node: Node, *, api: Api | None, log: Callable[[str], None]) -> list[str]:
    """Delete the node's pods (the kubelet tears their sandboxes down), stop
    the kubelet and containerd, then undo the rest; returns the leftovers."""
    fp = node.footprint()
    if api is not None and _pid(node, "kubelet") is not None:
        _drain(api, log)
    if _pid(node, "containerd") is not None:
        _remove_containers(node)
    for name in ("kubelet", "containerd"):
        pid = _pid(node, name)  # the kubelet first: it would start the pods again
        if pid is not None:
            _terminate(pid)
        (node.run / f"{name}.pid").unlink(missing_ok=True)
    host.kill_all(fp)
    host.unmount_all(list(fp.dirs))
    host.remove_cgroups()
    host.network_down()
    restored = host.restore_sysctls(fp.sysctls_saved)
    if restored:
        log(f"restored sysctls {' '.join(restored)}")
    if api is not None:
        api("DELETE", f"/api/v1/nodes/{NAME}")
    host.remove_files(fp.network, node.run)
    record(node, "stopped by cluster down")
    if not host.mounts_under(Path("/proc/self/mountinfo").read_text(), list(fp.dirs)):
        shutil.rmtree(node.run, ignore_errors=True)
    left = host.leftovers(fp)
    for line in left:
        log(f"real node left: {line}")
    return left


def _drain(api: Api, log: Callable[[str], None]) -> None:
    """Cordon the node, delete every pod bound to it and wait until the
    kubelet has stopped them (it deletes each once its containers and sandbox
    are gone)."""
    api("PATCH", f"/api/v1/nodes/{NAME}", {"spec": {"unschedulable": True}})  # no replacements
    selector = f"spec.nodeName={NAME}"
    code, pods = api("GET", f"/api/v1/pods?fieldSelector={selector}")
    items = pods.get("items", []) if code == 200 else []
    for pod in items:
        meta = pod["metadata"]
        api("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
            {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 1})  # fmt: skip
    deadline = time.monotonic() + TIMEOUT
    while items and time.monotonic() < deadline:
        code, pods = api("GET", f"/api/v1/pods?fieldSelector={selector}")
        items = pods.get("items", []) if code == 200 else []
        time.sleep(0.2)
    if items:
        log(f"{len(items)} pod(s) on {NAME} not stopped by the kubelet; removing their containers")


def _remove_containers(node: Node) -> None:
    """Whatever the kubelet left in containerd: tasks killed, containers deleted."""
    for task in _ctr(node, "tasks", "ls", "-q", check=False).stdout.split():
        _ctr(node, "tasks", "kill", "-s", "SIGKILL", task, check=False)
        with contextlib.suppress(subprocess.SubprocessError):
            _ctr(node, "tasks", "delete", "-f", task, check=False)
    for container in _ctr(node, "containers", "ls", "-q", check=False).stdout.split():
        _ctr(node, "containers", "delete", container, check=False)


# ---------------------------------------------------------------- processes and state


def _spawn(node: Node, name: str, args: list[str]) -> None:
    with open(node.root / "logs" / f"{name}.log", "wb") as out:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            cwd=node.run, start_new_session=True,
        )  # fmt: skip
    (node.run / f"{name}.pid").write_text(f"{proc.pid}\n")


def _pid(node: Node, name: str) -> int | None:
    try:
        pid = int((node.run / f"{name}.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if any(m in cmdline for m in node.footprint().markers) else None


def _terminate(pid: int) -> None:
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 3.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.05)


def _until(check: Callable[[], bool], what: str, node: Node) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what} (logs in {node.root / 'logs'})")
        time.sleep(0.1)


def _ctr(node: Node, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return host.run("ctr", "--address", str(node.socket), "-n", "k8s.io", *args, check=check)


def _load(node: Node) -> dict:
    try:
        return json.loads(node.state_file.read_text())
    except (OSError, ValueError):
        return {}


def _save(node: Node, values: dict) -> None:
    node.root.mkdir(parents=True, exist_ok=True)
    node.state_file.write_text(json.dumps({**_load(node), **values}, indent=2) + "\n")


def running(node: Node) -> bool:
    """Started, and its kubelet and containerd alive."""
    alive = all(_pid(node, n) is not None for n in ("kubelet", "containerd"))
    return bool(_load(node).get("ready")) and alive


def state(node: Node) -> dict:
    """What the last `start` recorded: ready, reason (when not), images."""
    return _load(node)
