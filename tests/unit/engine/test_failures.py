"""What the executor's own failures say to a user (engine/failures.py): the
fix is named with the CRD it concerns. (A CRD without its status subresource
is said through the executor: test_apply.)"""

from __future__ import annotations

from reconciler.engine.failures import pruned_field
from reconciler.kinds.redis.kind import KIND


def test_a_status_field_an_older_crd_prunes_is_named_with_the_crd_and_the_fix():
    assert pruned_field(KIND.resource, "lastProgressTime") == (
        "status.lastProgressTime is pruned by the installed CRD "
        "redis.myapp.demo.kubebuilder.io: apply the CRDs of this release"
    )
