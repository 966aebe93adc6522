"""The checks of one cluster that come before its permissions: can it be
reached and is it a version we support, who does it say we are, what
credential do we show it, and are our CRDs this release's."""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconciler import __version__
from reconciler.checks import Check, failed, grants, passed, warned
from reconciler.client.errors import ApiError, KubeError, NotFound, Unauthorized
from reconciler.client.kube import SELF_REVIEWS, Kube
from reconciler.engine import crd_release
from reconciler.engine.crd_release import CRDS, release_of
from reconciler.kinds import registry

# The oldest minor we support: our CRDs' CEL rules and config/flowcontrol's
# flowcontrol.apiserver.k8s.io/v1 are GA from 1.29.
MIN_MINOR = 29
# The version the test suite runs (hack/cluster/versions.env; a unit test
# holds the two equal).
TESTED = "v1.34.4"
# A credential nobody renews (a token or a certificate in the kubeconfig) that
# expires sooner than this is worth a warning line: a week to renew it.
SOON = 7 * 86400
# Credentials renewed without a person: by running the plugin again, or by
# the kubelet rewriting the token file.
RENEWS_ITSELF = ("exec plugin", "token file")
RENEW = "renew it in the kubeconfig (docs/install.md, Credentials), then restart the unit"

REACHABLE = "apiserver"
IDENTITY = "identity"
CREDENTIAL = "credentials"
CRD = "CRDs"
CRD_FIX = grants.crds_fix()


@dataclass(frozen=True)
class Identity:
    """Who the cluster says we are (SelfSubjectReview): what a binding names."""

    user: str
    groups: tuple[str, ...]


def reachable(kube: Kube) -> Check:
    """GET /version: the first request; an answer of any kind is a server."""
    try:
        answer = kube.version()
    except Unauthorized as exc:
        return refused(exc)
    except KubeError as exc:
        return failed(
            REACHABLE,
            f"{kube.server} cannot be reached: {exc}",
            "check the kubeconfig's server and the network path to it (kubectl version)",
            fatal=True,
        )
    version = str(answer.get("gitVersion") or "")
    minor = _minor(answer)
    if minor is None:
        return passed(REACHABLE, f"{kube.server} answers (version {version or 'not said'})")
    if minor < MIN_MINOR:
        return failed(
            REACHABLE,
            f"{kube.server} runs Kubernetes {version}; the oldest supported is 1.{MIN_MINOR}",
            f"upgrade the cluster to 1.{MIN_MINOR} or later",
        )
    return passed(
        REACHABLE,
        f"{kube.server} answers: Kubernetes {version}"
        f" (supported: 1.{MIN_MINOR} and later; tested: {TESTED})",
    )


def refused(exc: Unauthorized) -> Check:
    """A 401: nothing more can be asked with these credentials."""
    return failed(
        IDENTITY,
        f"the cluster refuses the credentials: {exc.message}",
        "renew the credential in the kubeconfig (kubectl auth whoami asks the same)",
        fatal=True,
    )


def _minor(answer: dict[str, object]) -> int | None:
    """The minor version; "29+" (as EKS and GKE say) is 29."""
    match = re.match(r"\d+", str(answer.get("minor") or ""))
    return int(match.group()) if match else None


def identity(kube: Kube) -> tuple[Check, Identity | None]:
    """A SelfSubjectReview: the user and groups an RBAC binding must name.
    A 401 is fatal: nothing more can be asked with these credentials."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = kube.review(SELF_REVIEWS, review)
    except Unauthorized as exc:
        return refused(exc), None
    except ApiError as exc:
        return failed(
            IDENTITY,
            f"cannot ask who we are (SelfSubjectReview): {exc}",
            "Kubernetes 1.28 or later answers it; kubectl auth whoami asks the same",
        ), None
    except KubeError as exc:
        return failed(IDENTITY, f"cannot ask who we are: {exc}", "retry", fatal=True), None
    info = (answer.get("status") or {}).get("userInfo") or {}
    who = Identity(str(info.get("username") or ""), tuple(map(str, info.get("groups") or ())))
    groups = ", ".join(who.groups) or "none"
    return passed(IDENTITY, f"user {who.user or '(anonymous)'}, groups {groups}"), who


def credential(kube: Kube, now: float) -> Check:
    """The credential's kind and expiry; an exec plugin is run to see it runs."""
    shown = kube.presented()
    if shown.error is not None:
        return failed(
            CREDENTIAL,
            f"{shown.kind}: {shown.error}",
            "run the plugin's command as the user of the process to see it work",
            fatal=True,
        )
    if shown.expires is None:
        return passed(CREDENTIAL, f"{shown.kind}, no expiry it says itself")
    left = shown.expires - now
    if left <= 0:
        return failed(CREDENTIAL, f"{shown.kind} expired {_span(-left)} ago", RENEW)
    said = f"{shown.kind}, expires in {_span(left)}"
    if shown.kind.startswith(RENEWS_ITSELF):
        renewed = " (renewed by running the plugin again)" if "plugin" in shown.kind else ""
        return passed(CREDENTIAL, f"{said}{renewed}")
    if left < SOON:
        return warned(CREDENTIAL, f"{said}, and nothing renews it", RENEW)
    return passed(CREDENTIAL, said)


def _span(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 120:
        return f"{minutes}m"
    hours = minutes // 60
    return f"{hours}h" if hours < 48 else f"{hours // 24}d"


def crds(kube: Kube, grant: str) -> list[Check]:
    """Each kind's CRD is installed and labelled with this release. A CRD
    we may not read is fixed by ``grant``, the binding the permissions line
    below names too: every ✗ has its fix line."""
    checks = []
    for kind in registry.KINDS:
        name = kind.resource.crd_name
        try:
            crd = kube.get(CRDS, "", name)
        except NotFound:
            checks.append(failed(CRD, f"{name} is not installed", CRD_FIX))
            continue
        except KubeError as exc:
            checks.append(failed(CRD, f"{name} cannot be read: {exc}", grant))
            continue
        checks.append(crd_of_release(name, release_of(crd)))
    return checks


def crd_of_release(name: str, release: str | None) -> Check:
    """This release's CRD passes. An older one fails: it prunes the fields
    this release writes, silently on a client-side apply. A newer one warns:
    this binary ignores the fields it added."""
    if release == __version__:
        return passed(CRD, f"{name} of release {__version__}")
    if crd_release.newer(release):
        return warned(CRD, f"{name} is {crd_release.ahead(release)}", crd_release.upgrade(release))
    shipped = f"release {release}'s" if release else "unlabelled"
    return failed(
        CRD,
        f"{name} is {shipped}; this is {__version__}: the fields it does not know are pruned",
        CRD_FIX,
    )
