"""What the real node changes on the host, how it is undone, and a lister of
what is left: the pods' bridge, the one DNAT to the apiserver, the kubelet's
sysctls and iptables chains, mounts under the node's directories, its
/kubepods cgroups and its processes (containerd's shims included).

The listers take the host's text (mountinfo, iptables-save, `ip -o link`) as
arguments, so they are tested without root; `leftovers()` reads the host.
Standard library only: it runs from cluster.py before any venv exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

BRIDGE = "rnode0"
SUBNET = "10.250.0.0/24"  # neither kwok's 10.244/16, podman's 10.88/16 nor the Services'
GATEWAY = "10.250.0.1"  # the bridge's address: the kubelet listens here, pods route here
SERVICE_IP = "10.96.0.1"  # the kubernetes Service (its serving cert names it)
CHAIN = "RECONCILER-REAL-NODE"
# The chains a kubelet may make (its canary and hint chains, the firewall of
# older releases): none exists on a host that runs no other kubelet.
KUBELET_CHAINS = ("KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT", "KUBE-FIREWALL")
# The sysctls the kubelet sets at start (protectKernelDefaults: false), and
# the forwarding the bridge plugin switches on: saved before, restored at down.
SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBEPODS = "kubepods"


class HostError(RuntimeError):
    """A host command failed."""


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if check and res.returncode != 0:
        raise HostError(f"{' '.join(cmd)}: exit {res.returncode}: {res.stderr.strip()}")
    return res


# ---------------------------------------------------------------- sysctls


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def save_sysctls(saved: Path) -> None:
    """Record the values before the node changes them; an existing record is
    kept (a run that died before restoring holds the true values)."""
    if saved.exists():
        return
    values = {n: _sysctl_path(n).read_text().strip() for n in SYSCTLS if _sysctl_path(n).exists()}
    saved.write_text(json.dumps(values, indent=2) + "\n")


def restore_sysctls(saved: Path) -> list[str]:
    """Put back what save_sysctls recorded; returns what it changed."""
    try:
        values = json.loads(saved.read_text())
    except (OSError, ValueError):
        return []
    changed = []
    for name, value in values.items():
        path = _sysctl_path(name)
        if path.read_text().strip() != value:
            path.write_text(value + "\n")
            changed.append(f"{name}={value}")
    saved.unlink()
    return changed


def changed_sysctls(saved_text: str, current: dict[str, str]) -> list[str]:
    """The recorded sysctls whose value now differs: `name: now (was before)`."""
    try:
        values = json.loads(saved_text)
    except ValueError:
        return []
    return [
        f"sysctl {n}: {current.get(n)} (was {v})" for n, v in values.items() if current.get(n) != v
    ]


# ---------------------------------------------------------------- network


def network_up(apiserver_port: int) -> None:
    """The bridge with its address before the kubelet binds it, route_localnet
    on it and the DNAT of the kubernetes Service to the loopback apiserver."""
    if run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        run("ip", "link", "add", BRIDGE, "type", "bridge")
    prefix = SUBNET.split("/")[1]
    run("ip", "addr", "replace", f"{GATEWAY}/{prefix}", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")
    _sysctl_path(f"net.ipv4.conf.{BRIDGE}.route_localnet").write_text("1\n")
    network_rules_down()
    run("iptables", "-t", "nat", "-N", CHAIN)
    dnat = ("-j", "DNAT", "--to-destination", f"127.0.0.1:{apiserver_port}")
    run("iptables", "-t", "nat", "-A", CHAIN, "-d", f"{SERVICE_IP}/32", "-p", "tcp",
        "--dport", "443", *dnat)  # fmt: skip
    run("iptables", "-t", "nat", "-A", "PREROUTING", "-i", BRIDGE, "-j", CHAIN)


def network_rules_down() -> None:
    """Our chain and the kubelet's, wherever they are."""
    for _ in range(5):  # one jump may have been added more than once
        if run("iptables", "-t", "nat", "-D", "PREROUTING", "-i", BRIDGE, "-j", CHAIN,
               check=False).returncode != 0:  # fmt: skip
            break
    run("iptables", "-t", "nat", "-F", CHAIN, check=False)
    run("iptables", "-t", "nat", "-X", CHAIN, check=False)
    for table in ("filter", "nat", "mangle"):
        for chain in KUBELET_CHAINS:
            run("iptables", "-t", table, "-F", chain, check=False)
            run("iptables", "-t", table, "-X", chain, check=False)


def network_down() -> None:
    """The rules, the veths left on the bridge, the bridge."""
    network_rules_down()
    for name in bridge_links(run("ip", "-o", "link").stdout):
        run("ip", "link", "del", name, check=False)


# ---------------------------------------------------------------- listers (pure)


def bridge_links(ip_link: str) -> list[str]:
    """From `ip -o link`: the bridge and every interface enslaved to it."""
    found = []
    for line in ip_link.splitlines():
        parts = line.split(":", 2)
        if len(parts) < 3:
            continue
        name = parts[1].strip().split("@")[0]
        if name == BRIDGE or f" master {BRIDGE} " in parts[2]:
            found.append(name)
    return found


def mounts_under(mountinfo: str, roots: list[Path]) -> list[str]:
    """From /proc/self/mountinfo: mount points at or under any of roots, deepest first."""
    prefixes = [str(r).rstrip("/") for r in roots]
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = fields[4].replace("\\040", " ")
        if any(point == p or point.startswith(p + "/") for p in prefixes):
            found.append(point)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


def chains_left(iptables_save: str) -> list[str]:
    """From iptables-save: our chain, the kubelet's, and rules naming the bridge."""
    found, table = [], "?"
    for line in iptables_save.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":"):
            chain = line[1:].split()[0]
            if chain == CHAIN or chain in KUBELET_CHAINS:
                found.append(f"iptables {table} chain {chain}")
        elif line.startswith("-A") and (BRIDGE in line.split() or SUBNET in line):
            found.append(f"iptables {table} rule {line}")
    return found


def cgroups_left(root: Path = CGROUP_ROOT) -> list[Path]:
    """The kubelet's /kubepods trees, one per hierarchy, deepest first."""
    found: list[Path] = []
    for hierarchy in sorted(p for p in root.glob("*") if p.is_dir()):
        top = hierarchy / KUBEPODS
        if top.is_dir():
            found.extend(sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True))
            found.append(top)
    return found


def processes(markers: list[str], root: Path = CGROUP_ROOT) -> dict[int, str]:
    """Processes whose command line holds a marker (containerd, kubelet and
    the shims name the node's socket or directories) or that live in a
    /kubepods cgroup (the containers' own)."""
    found: dict[int, str] = {}
    for top in cgroups_left(root):
        with contextlib.suppress(OSError):
            for pid in (top / "cgroup.procs").read_text().split():
                found[int(pid)] = f"in cgroup {top}"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(m in cmdline for m in markers):
            found[int(entry.name)] = cmdline.strip()
    return found


# ---------------------------------------------------------------- the host now


@dataclass(frozen=True)
class Footprint:
    """Where the node's things are on this host."""

    dirs: tuple[Path, ...]  # the run dir (kubelet root, containerd state), containerd root
    markers: tuple[str, ...]  # in the command line of each node process
    sysctls_saved: Path
    network: str  # the CNI network's name


def leftovers(fp: Footprint) -> list[str]:
    """Everything the node left on the host, one line each; empty after a clean down."""
    left = [f"process {pid}: {what}" for pid, what in processes(list(fp.markers)).items()]
    mountinfo = Path("/proc/self/mountinfo").read_text()
    left += [f"mount {m}" for m in mounts_under(mountinfo, list(fp.dirs))]
    left += [f"interface {n}" for n in bridge_links(run("ip", "-o", "link").stdout)]
    with contextlib.suppress(HostError, FileNotFoundError):
        left += chains_left(run("iptables-save").stdout)
    left += [f"cgroup {p}" for p in cgroups_left()]
    left += [f"file {p}" for p in files_left(fp.network, fp.dirs[0])]
    left += [f"directory {fp.dirs[0]}"] if fp.dirs[0].exists() else []
    if fp.sysctls_saved.exists():
        current = {n: _sysctl_path(n).read_text().strip() for n in SYSCTLS}
        left += changed_sysctls(fp.sysctls_saved.read_text(), current) or [
            f"sysctl record {fp.sysctls_saved} not yet restored"
        ]
    return left


def kill_all(fp: Footprint, grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, every node process still there."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 3.0)):
        pids = processes(list(fp.markers))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            for pid in list(pids):
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
            pids = {p: w for p, w in pids.items() if alive(p)}
            time.sleep(0.05)
        if not pids:
            return


def alive(pid: int) -> bool:
    """True for a running (non-zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def unmount_all(dirs: list[Path]) -> None:
    """Every mount under dirs, deepest first (lazily if one stays busy)."""
    for _ in range(3):
        points = mounts_under(Path("/proc/self/mountinfo").read_text(), dirs)
        if not points:
            return
        for point in points:
            if run("umount", point, check=False).returncode != 0:
                run("umount", "-l", point, check=False)


# Paths outside the node's directories that the kubelet and containerd write
# whatever they are told: the kubelet's device-plugin socket, its links to the
# containers' logs, containerd's CNI result cache and its shims' sockets.
DEVICE_PLUGINS = Path("/var/lib/kubelet/device-plugins")
CONTAINER_LOGS = Path("/var/log/containers")
CNI_RESULTS = Path("/var/lib/cni/results")
SHIM_SOCKETS = Path("/run/containerd/s")


def files_left(network: str, run_dir: Path) -> list[Path]:
    """The node's files in those places: nothing else's."""
    found = [p for p in (DEVICE_PLUGINS / "kubelet.sock",) if p.exists() or p.is_symlink()]
    with contextlib.suppress(OSError):
        found += [
            p for p in CONTAINER_LOGS.iterdir()
            if p.is_symlink() and os.readlink(p).startswith(f"{run_dir}/")
        ]  # fmt: skip
    found += sorted(CNI_RESULTS.glob(f"{network}-*")) + sorted(CNI_RESULTS.glob("cni-loopback-*"))
    found += sorted(SHIM_SOCKETS.glob("*"))
    return found


def remove_files(network: str, run_dir: Path) -> None:
    """files_left, then the directories they leave empty (rmdir: only if empty)."""
    for path in files_left(network, run_dir):
        with contextlib.suppress(OSError):
            path.unlink()
    for empty in (DEVICE_PLUGINS, DEVICE_PLUGINS.parent, CONTAINER_LOGS, SHIM_SOCKETS,
                  SHIM_SOCKETS.parent):  # fmt: skip
        with contextlib.suppress(OSError):
            empty.rmdir()


def remove_cgroups() -> None:
    for path in cgroups_left():
        with contextlib.suppress(OSError):
            path.rmdir()
