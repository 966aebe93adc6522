"""Are the installed CRDs this release's? Helm never upgrades CRDs, so a
cluster keeps the CRDs of the release first installed: fields this release
writes are pruned, printer columns lie. Each CRD carries the release that
shipped it in its ``app.kubernetes.io/version`` label; `reconciler plan` and
the daemon in its first pass in each cluster name every CRD whose label is
not this release.
"""

from __future__ import annotations

import logging

from reconciler import __version__
from reconciler.client.errors import ApiError, Forbidden, KubeError, NotFound
from reconciler.client.interface import Client
from reconciler.constants import LABEL_VERSION
from reconciler.kinds import registry
from reconciler.model import ResourceType

log = logging.getLogger(__name__)

CRDS = ResourceType(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"
)


def lagging(kube: Client) -> list[str]:
    """A line for each installed CRD of ours that another release shipped.
    A CRD that is missing is the pass's to report; one we may not read
    (RBAC older than this release) is passed over."""
    lines: list[str] = []
    for kind in registry.KINDS:
        name = kind.resource.crd_name
        try:
            crd = kube.get(CRDS, "", name)
        except ApiError as exc:
            if not isinstance(exc, Forbidden | NotFound):
                log.debug("CRD %s: %s", name, exc)
            continue
        except KubeError:
            return lines  # unreachable: the pass says so
        release = ((crd.get("metadata") or {}).get("labels") or {}).get(LABEL_VERSION)
        if release != __version__:
            shipped = f"release {release}'s" if release else "from a release that did not label it"
            lines.append(
                f"the installed CRD {name} is {shipped}; this is {__version__}: "
                "apply the CRDs of this release (kubectl apply -f crds/)"
            )
    return lines
