"""Names shared by every kind, the client and the manifests.

What belongs to one kind (its group, finalizer, annotations, limits) lives in
that kind's module under `reconciler.kinds`.
"""

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_VERSION = "app.kubernetes.io/version"  # on our CRDs: the release that shipped them
MANAGED_BY = "reconciler"
MANAGED_POD_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
