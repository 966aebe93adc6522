"""A mutating admission webhook served by the test process, so e2e tests see
pods the way a production cluster hands them back: with an injected sidecar,
images rewritten to a registry mirror, or a nodeSelector no node matches.

The kube-apiserver of hack/cluster runs with its default admission plugins,
MutatingAdmissionWebhook included, and calls a webhook by URL: so the server
is stdlib `http.server` + `ssl` in a thread on 127.0.0.1, with a throwaway CA
and an IP-SAN certificate made by the `openssl` CLI (the apiserver verifies
it against the configuration's `caBundle`). Only pod CREATEs in namespaces
carrying the chosen label are sent to it, and `failurePolicy: Fail` makes a
webhook that is not answering visible instead of silently skipped.

    with mutating_webhook(kubectl, "e2e.reconciler.local/inject=sidecar",
                          [sidecar_injection], namespaces=[ns]) as hook:
        ...                       # pods created in ns get istio-proxy
        assert hook.mutated >= 3  # the webhook really ran

Mutations are pure functions of the pod (deep copy in, pod out); the patch is
the difference, so they compose in order and a pod that already has what a
mutation adds gets nothing more (idempotent, as a reinvoked webhook must be).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from .conftest import Kubectl

Pod = dict[str, Any]
Mutation = Callable[[Pod], Pod]
PATH = "/mutate"

SIDECAR = {"name": "istio-proxy", "image": "istio/proxyv2:1.24"}
SIDECAR_INIT = {"name": "istio-init", "image": "istio/proxyv2:1.24"}
MIRROR = "mirror.local/"


# ---------------------------------------------------------------- mutations


def sidecar_injection(pod: Pod) -> Pod:
    """Add the istio-proxy container and the istio-init init container, as
    Istio's injector does; a pod that already has either keeps its own."""
    spec = pod.setdefault("spec", {})
    containers = spec.setdefault("containers", [])
    if not any(c.get("name") == SIDECAR["name"] for c in containers):
        containers.append(dict(SIDECAR))
    inits = spec.get("initContainers") or []
    if not any(c.get("name") == SIDECAR_INIT["name"] for c in inits):
        spec["initContainers"] = [*inits, dict(SIDECAR_INIT)]
    return pod


def image_rewrite(pod: Pod, prefix: str = MIRROR) -> Pod:
    """Rewrite every image X (containers and init containers) to PREFIX + X,
    as a registry-mirror policy does; an image already there is left alone."""
    spec = pod.get("spec", {})
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            image = c.get("image", "")
            if image and not image.startswith(prefix):
                c["image"] = prefix + image
    return pod


def node_selector(labels: Mapping[str, str]) -> Mutation:
    """A mutation adding a nodeSelector: with labels no node has, the real
    kube-scheduler marks the pod Unschedulable (kwok never sees it)."""

    def mutate(pod: Pod) -> Pod:
        spec = pod.setdefault("spec", {})
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **labels}
        return pod

    return mutate


def json_patch(before: Pod, after: Pod) -> list[dict[str, Any]]:
    """The JSONPatch from before to after, per key of metadata and spec: a
    changed key is replaced whole (`add` replaces an existing member)."""
    ops: list[dict[str, Any]] = []
    for section in ("metadata", "spec"):
        old, new = before.get(section) or {}, after.get(section) or {}
        for key in sorted(new.keys() | old.keys()):
            path = f"/{section}/{key.replace('~', '~0').replace('/', '~1')}"
            if key not in new:
                ops.append({"op": "remove", "path": path})
            elif old.get(key) != new[key]:
                ops.append({"op": "add", "path": path, "value": new[key]})
    return ops


# ---------------------------------------------------------------- TLS


def _openssl(*args: str | Path) -> None:
    proc = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {proc.stderr}")


def make_certs(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a serving cert for IP 127.0.0.1 signed by it (EC
    P-256: fast to make); returns (ca.crt, server.crt, server.key)."""
    ca_crt, ca_key = directory / "ca.crt", directory / "ca.key"
    crt, key, csr = directory / "server.crt", directory / "server.key", directory / "server.csr"
    ext = directory / "server.ext"
    ext.write_text(
        "basicConstraints = critical, CA:FALSE\n"
        "keyUsage = critical, digitalSignature, keyEncipherment\n"
        "extendedKeyUsage = serverAuth\n"
        "subjectAltName = IP:127.0.0.1\n"
    )
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req", "-x509", *ec, "-days", "2", "-subj", "/CN=e2e-webhook-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout", ca_key, "-out", ca_crt,
    )  # fmt: skip
    _openssl("req", "-new", *ec, "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", csr)
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-set_serial",
        f"0x{uuid.uuid4().hex}", "-days", "2", "-extfile", ext, "-out", crt,
    )  # fmt: skip
    return ca_crt, crt, key


# ---------------------------------------------------------------- server


@dataclass(frozen=True)
class Admission:
    """One AdmissionReview the webhook answered."""

    namespace: str
    name: str  # metadata.name, or generateName for a generated one
    dry_run: bool
    patch: list[dict[str, Any]]


@dataclass
class Webhook:
    """A running webhook: what it admitted, and the mutations per namespace.

    `mutations` applies to every matched namespace unless `per_namespace`
    names that namespace; both may be changed while the webhook runs."""

    config_name: str
    url: str
    ca_bundle: str
    mutations: Sequence[Mutation]
    per_namespace: dict[str, Sequence[Mutation]] = field(default_factory=dict)
    admissions: list[Admission] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def mutated(self) -> int:
        """Pods (not dry runs) the webhook changed."""
        with self._lock:
            return sum(1 for a in self.admissions if a.patch and not a.dry_run)

    def mutated_in(self, namespace: str) -> list[str]:
        with self._lock:
            return [
                a.name
                for a in self.admissions
                if a.patch and not a.dry_run and a.namespace == namespace
            ]

    def review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The AdmissionReview v1 answer for one request: always allowed,
        with a JSONPatch when the mutations change the pod."""
        request = body["request"]
        pod = request.get("object") or {}
        namespace = request.get("namespace", "")
        meta = pod.get("metadata", {})
        mutations = self.per_namespace.get(namespace, self.mutations)
        after = copy.deepcopy(pod)
        for mutate in mutations:
            after = mutate(after)
        patch = json_patch(pod, after)
        with self._lock:
            self.admissions.append(
                Admission(
                    namespace,
                    meta.get("name") or meta.get("generateName", ""),
                    bool(request.get("dryRun")),
                    patch,
                )
            )
        response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        }

    def wait_ready(self, kubectl: Kubectl, namespace: str, timeout: float = 20) -> None:
        """Dry-run pod creates in a labelled namespace until one reaches the
        webhook: the apiserver loads a new configuration asynchronously."""
        _wait_for_webhook(self, kubectl, namespace, timeout, reached=True)


def _probe(kubectl: Kubectl, namespace: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "webhook-probe-", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    kubectl.run("create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod), check=False)


def _wait_for_webhook(
    hook: Webhook, kubectl: Kubectl, namespace: str, timeout: float, *, reached: bool
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        before = len(hook.admissions)
        _probe(kubectl, namespace)
        if (len(hook.admissions) > before) == reached:
            return
        if time.monotonic() > deadline:
            state = "reach" if reached else "stop reaching"
            raise AssertionError(f"webhook {hook.config_name} did not {state} {namespace}")
        time.sleep(0.2)


def _handler(hook: Webhook) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                payload, code = json.dumps(hook.review(body)).encode(), 200
            except Exception as exc:  # an answer, not a dropped connection
                payload, code = str(exc).encode(), 500
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # pytest output is for failures

    return Handler


@contextlib.contextmanager
def serve(hook_factory: Callable[[str, str], Webhook]) -> Iterator[Webhook]:
    """Serve HTTPS on a free loopback port from a daemon thread."""
    with tempfile.TemporaryDirectory(prefix="e2e-webhook-") as tmp:
        ca, crt, key = make_certs(Path(tmp))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(crt, key)
        server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        url = f"https://127.0.0.1:{server.server_address[1]}{PATH}"
        hook = hook_factory(url, base64.b64encode(ca.read_bytes()).decode())
        server.RequestHandlerClass = _handler(hook)
        thread = threading.Thread(target=server.serve_forever, name="e2e-webhook", daemon=True)
        thread.start()
        try:
            yield hook
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


def configuration(hook: Webhook, namespace_label: str) -> dict[str, Any]:
    """The MutatingWebhookConfiguration: pod CREATE only, in namespaces
    matching `key=value` (or carrying `key`, whatever its value)."""
    key, _, value = namespace_label.partition("=")
    selector: dict[str, Any] = (
        {"matchLabels": {key: value}}
        if value
        else {"matchExpressions": [{"key": key, "operator": "Exists"}]}
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": hook.config_name},
        "webhooks": [
            {
                "name": f"pods.{hook.config_name}.reconciler.local",
                "clientConfig": {"url": hook.url, "caBundle": hook.ca_bundle},
                "namespaceSelector": selector,
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "timeoutSeconds": 5,
            }
        ],
    }


@contextlib.contextmanager
def mutating_webhook(
    kubectl: Kubectl,
    namespace_label: str,
    mutations: Sequence[Mutation] = (sidecar_injection,),
    *,
    namespaces: Sequence[str] = (),
    per_namespace: Mapping[str, Sequence[Mutation]] | None = None,
) -> Iterator[Webhook]:
    """Serve the webhook and register it for namespaces labelled
    `namespace_label` (`key=value` or `key`). `namespaces` are labelled here
    and the first is used to wait until the apiserver calls the webhook, and,
    on exit, until it no longer does, before the server stops: with
    `failurePolicy: Fail`, a configuration left pointing at a dead server
    would refuse every pod in those namespaces."""
    key, _, value = namespace_label.partition("=")
    name = f"e2e-webhook-{uuid.uuid4().hex[:8]}"

    def factory(url: str, ca_bundle: str) -> Webhook:
        return Webhook(name, url, ca_bundle, mutations, dict(per_namespace or {}))

    with serve(factory) as hook:
        for ns in namespaces:
            kubectl.run("label", "namespace", ns, f"{key}={value}", "--overwrite")
        kubectl.apply(yaml.safe_dump(configuration(hook, namespace_label)))
        try:
            if namespaces:
                hook.wait_ready(kubectl, namespaces[0])
            yield hook
        finally:
            kubectl.run(
                "delete", "mutatingwebhookconfiguration", name, "--ignore-not-found", check=False
            )
            if namespaces:
                with contextlib.suppress(AssertionError):
                    _wait_for_webhook(hook, kubectl, namespaces[0], 20, reached=False)
            else:
                time.sleep(1)  # the apiserver drops a deleted configuration within ms
