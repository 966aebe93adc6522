"""Names shared by the planner, the client and the manifests.

Kept in one place so the CRDs, RBAC and code cannot drift apart silently.
"""

REDIS_GROUP = "myapp.demo.kubebuilder.io"
REDIS_VERSION = "v1"
REDIS_API_VERSION = f"{REDIS_GROUP}/{REDIS_VERSION}"
REDIS_KIND = "Redis"
REDIS_PLURAL = "redis"

XCA_GROUP = "apps.xca.k8s.kb.cx"
XCA_VERSION = "v1beta1"
XCA_API_VERSION = f"{XCA_GROUP}/{XCA_VERSION}"
XCA_KIND = "Xca"
XCA_PLURAL = "xcas"

FINALIZER = f"{REDIS_GROUP}/pods"
TEMPLATE_HASH_ANNOTATION = f"{REDIS_GROUP}/template-hash"

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "reconciler"
MANAGED_POD_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY}"

REDIS_COMPONENT = "redis-controller"
XCA_COMPONENT = "xca-controller"

PORT_MIN = 6370
PORT_MAX = 6380
PORT_DEFAULT = 6379
NUM_MAX = 100
CONTAINER_NAME = "redis"
