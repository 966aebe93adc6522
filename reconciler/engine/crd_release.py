"""Are the installed CRDs this release's? Helm never upgrades CRDs, so a
cluster keeps the CRDs of the release first installed: fields this release
writes are pruned, printer columns lie. Each CRD carries the release that
shipped it in its ``app.kubernetes.io/version`` label; `reconciler plan` and
the daemon in its first pass in each cluster name every CRD whose label is
not this release. `reconciler check` fails on an older one (it prunes the
fields it does not know, silently on a client-side apply) and warns of a newer
one (this binary ignores the fields it added).
"""

from __future__ import annotations

import logging
import re

from reconciler import __version__
from reconciler.client.errors import ApiError, Forbidden, KubeError, NotFound
from reconciler.client.interface import Client
from reconciler.constants import LABEL_VERSION
from reconciler.kinds import registry
from reconciler.model import ResourceType

log = logging.getLogger(__name__)

# The one step that puts this release's CRDs in place, from any directory the
# binary runs in: check's fix line (checks/grants.py builds it from its parts,
# and a test holds the two equal), and the warning of plan and the daemon.
APPLY_CRDS = "reconciler manifests crds | kubectl apply -f -"

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
        release = release_of(crd)
        if release == __version__:
            continue
        if newer(release):
            lines.append(f"the installed CRD {name} is {ahead(release)}: {upgrade(release)}")
            continue
        shipped = f"release {release}'s" if release else "from a release that did not label it"
        lines.append(
            f"the installed CRD {name} is {shipped}; this is {__version__}: "
            f"apply the CRDs of this release ({APPLY_CRDS})"
        )
    return lines


def newer(release: str | None) -> bool:
    """Whether the CRDs are of a later release than this binary: then the
    binary is what to upgrade, not the CRDs to take back."""
    return release is not None and _parts(release) > _parts(__version__)


def ahead(release: str | None) -> str:
    return f"release {release}'s, newer than this {__version__}"


def upgrade(release: str | None) -> str:
    """The step for CRDs newer than the binary: it ignores their new fields."""
    return f"run reconciler {release}, which knows the fields this one ignores"


def _parts(release: str) -> tuple[int, ...]:
    """A release's numbers; an unreadable one sorts before every release."""
    found = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", release)
    return tuple(map(int, found.groups())) if found else (-1,)


def release_of(crd: dict[str, object]) -> str | None:
    """The release a CRD says shipped it; None for one without the label."""
    metadata = crd.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    release = labels.get(LABEL_VERSION) if isinstance(labels, dict) else None
    return str(release) if release is not None else None
