"""What the real node is, for cluster.py and realnode.py: its names, its
directories, whether it is asked for, its certificates (made once) and the
configuration of containerd, the CNI bridge and the kubelet, with why each
setting (CONTRIBUTING.md, "The real node", says it for users). Standard
library only."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__:
    from . import realnode_host as host
else:
    import realnode_host as host  # type: ignore[no-redef]

NAME = "real-0"
LABEL = ("real", "true")  # the node's label and taint: only pods that ask land there
TAINT = {"key": LABEL[0], "value": LABEL[1], "effect": "NoSchedule"}


def placement() -> dict:
    """The pod spec fields (a Redis's spec takes the same) that put a pod on the node."""
    return {"nodeSelector": dict([LABEL]), "tolerations": [{**TAINT, "operator": "Equal"}]}


KUBELET_PORT = 10250
APISERVER_CLIENT = "kube-apiserver-kubelet-client"  # who the apiserver is to the kubelet
NETWORK = "reconciler-real-node"  # the CNI network's name
# `REAL_NODE=1 cluster.py up` (or `up --real-node`) asks for the node; the
# request is kept in the node's directory, and the apiserver's and the
# controller-manager's flags follow it (`requested`).
ENV_VAR = "REAL_NODE"


@dataclass(frozen=True)
class Node:
    """The node's directories for one cluster state dir."""

    root: Path  # kept across down/up: certificates, configs, containerd's images
    run: Path  # thrown away at down: sockets, kubelet root, netns, logs of pods

    @classmethod
    def of(cls, state_dir: Path) -> Node:
        digest = hashlib.sha256(str(state_dir).encode()).hexdigest()[:12]
        return cls(root=state_dir / "node", run=Path(f"/run/reconciler-node-{digest}"))

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    def leftovers(self) -> list[str]:
        """What the node left on the host (realnode_host.leftovers)."""
        return host.leftovers(self.footprint())

    def footprint(self) -> host.Footprint:
        return host.Footprint(
            dirs=(self.run, self.root / "containerd"),
            markers=(f"{self.run}/", f"{self.root}/containerd.toml"),
            sysctls_saved=self.root / "sysctls.json",
            network=NETWORK,
        )


# ---------------------------------------------------------------- requested or not


def requested(node: Node) -> bool:
    return (node.root / "requested").exists()


def request(node: Node, wanted: bool) -> None:
    node.root.mkdir(parents=True, exist_ok=True)
    marker = node.root / "requested"
    if wanted:
        marker.touch()
    else:
        marker.unlink(missing_ok=True)


# ---------------------------------------------------------------- certificates


def prepare(node: Node, ca: Path, openssl: Callable[..., None]) -> None:
    """The kubelet's CA and the three certificates, made once: the apiserver's
    client certificate to the kubelet and the kubelet's serving one (both of
    the kubelet CA), and the kubelet's client certificate to the apiserver (of
    the cluster CA, as system:node:real-0 in system:nodes)."""
    pki = node.pki
    if (pki / "node-client.crt").exists():
        return
    pki.mkdir(parents=True, exist_ok=True, mode=0o700)
    cnf = pki / "openssl.cnf"
    cnf.write_text(
        "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = real-node\n"
        "[ca]\nbasicConstraints = critical, CA:TRUE\n"
        "keyUsage = critical, keyCertSign, cRLSign, digitalSignature\n"
        "[client]\nbasicConstraints = critical, CA:FALSE\n"
        "keyUsage = critical, digitalSignature, keyEncipherment\nextendedKeyUsage = clientAuth\n"
        "[serving]\nbasicConstraints = critical, CA:FALSE\n"
        "keyUsage = critical, digitalSignature, keyEncipherment\nextendedKeyUsage = serverAuth\n"
        f"subjectAltName = IP:{host.GATEWAY}, DNS:{NAME}\n"
    )
    rsa = ("-newkey", "rsa:2048", "-nodes")
    openssl("req", "-x509", "-config", cnf, "-extensions", "ca", *rsa, "-days", "3650",
            "-subj", "/CN=reconciler-local-kubelet-ca",
            "-keyout", pki / "kubelet-ca.key", "-out", pki / "kubelet-ca.crt")  # fmt: skip
    signed = (
        ("apiserver-kubelet-client", f"/CN={APISERVER_CLIENT}", "client", "kubelet-ca"),
        ("kubelet-serving", f"/CN={NAME}", "serving", "kubelet-ca"),
        ("node-client", f"/O=system:nodes/CN=system:node:{NAME}", "client", None),
    )  # fmt: skip
    for name, subject, ext, issuer in signed:
        ca_crt = pki / f"{issuer}.crt" if issuer else ca
        ca_key = pki / f"{issuer}.key" if issuer else ca.with_suffix(".key")
        openssl("req", "-new", "-config", cnf, *rsa, "-subj", subject,
                "-keyout", pki / f"{name}.key", "-out", pki / f"{name}.csr")  # fmt: skip
        openssl("x509", "-req", "-in", pki / f"{name}.csr", "-CA", ca_crt, "-CAkey", ca_key,
                "-set_serial", f"0x{os.urandom(16).hex()}", "-days", "3650",
                "-extfile", cnf, "-extensions", ext, "-out", pki / f"{name}.crt")  # fmt: skip
    for key in pki.glob("*.key"):
        key.chmod(0o600)


def apiserver_flags(node: Node) -> list[str]:
    """The apiserver's side: its client certificate to the kubelet, the CA the
    kubelet's serving certificate is checked with, and the node's address."""
    if not requested(node) or not (node.pki / "kubelet-ca.crt").exists():
        return []
    pki = node.pki
    return [
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--kubelet-certificate-authority={pki / 'kubelet-ca.crt'}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
    ]


# The kubelet's pods need what kwok's never did: the kube-root-ca.crt
# ConfigMap of their service-account volume, and Deployments and Jobs (a Job
# made from the shipped CronJob) that make pods. No cronjob-controller: no
# applied CronJob fires on its own.
KCM_CONTROLLERS = (
    "root-ca-certificate-publisher-controller,deployment-controller,replicaset-controller,"
    "job-controller"
)


# ---------------------------------------------------------------- configs


def containerd_config(node: Node, pause: str) -> str:
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    return f"""\
version = 2
root = "{node.root / "containerd"}"
state = "{node.run / "containerd"}"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{node.socket}"
[ttrpc]
  address = "{node.socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{node.root / "containerd-opt"}"
{cri}
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
{cri[:-1]}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
{cri[:-1]}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
{cri[:-1]}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{node.run / "runc"}"
{cri[:-1]}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{node.root / "cni"}"
"""


def cni_config(node: Node) -> dict[str, object]:
    """A bridge on the node's /24, no masquerade, and one route: to the
    Services' range through the bridge (the apiserver's DNAT); no default."""
    return {
        "cniVersion": "0.4.0",
        "name": NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": host.BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": host.SUBNET, "gateway": host.GATEWAY}]],
                    "routes": [{"dst": f"{host.SERVICE_IP.rsplit('.', 2)[0]}.0.0/16"}],
                    "dataDir": str(node.run / "cni-ipam"),
                },
            }
        ],
    }


def kubelet_config(node: Node) -> dict[str, object]:
    pki = node.pki
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": host.GATEWAY,  # not eth0: the kubelet's API stays on this machine
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "tlsCertFile": str(pki / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(pki / "kubelet-ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "oomScoreAdj": 0,  # no CAP_SYS_RESOURCE in a sandbox: no negative scores
        "makeIPTablesUtilChains": False,
        "registerWithTaints": [TAINT],
        "podLogsDir": str(node.run / "pod-logs"),
        "imageGCHighThresholdPercent": 100,  # no registry to pull a collected image from
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi"},
        "clusterDomain": "cluster.local",
    }


def kubeconfig(node: Node, server: str, ca: Path) -> str:
    pki = node.pki
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {
                "server": server, "certificate-authority": str(ca)}}],
            "users": [{"name": NAME, "user": {
                "client-certificate": str(pki / "node-client.crt"),
                "client-key": str(pki / "node-client.key")}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": NAME}}],
            "current-context": "local",
        }
    )  # fmt: skip
