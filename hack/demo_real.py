"""The Redis `make demo` puts on the real node real-0, where there is one
(`make demo REAL_NODE=1`): the sample's password Secret, one replica, the
Redis and exporter images built here, and the node's selector and toleration,
so a real redis-server answers the demo's `redis-cli PING`.

    python3 -m hack.demo_real NAME SECRET   # the manifest, as JSON; exit 1 and
                                            # the reason on stderr without a node
"""

from __future__ import annotations

import json
import sys
from typing import Any

from hack.cluster import cluster, realnode, realnode_config


def manifest(name: str, secret: str, images: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "myapp.demo.kubebuilder.io/v1",
        "kind": "Redis",
        "metadata": {"name": name},
        "spec": {
            "num": 1,
            "image": images["redis"],
            "auth": {"passwordSecret": {"name": secret}},
            "exporter": {"image": images["exporter"]},
            **realnode_config.placement(),
        },
    }


def why_not(found: dict[str, Any], requested: bool) -> str | None:
    """None where the node runs; else why, in the words of `cluster.py status`."""
    if not requested:
        return "not asked for (make demo REAL_NODE=1)"
    if not found.get("ready"):
        return str(found.get("reason") or "not started")
    return None


def main(argv: list[str]) -> int:
    name, secret = argv
    node = realnode.Node.of(cluster.DEFAULT_STATE_DIR)
    reason = why_not(realnode.state(node), realnode.requested(node))
    if reason is not None:
        print(f"no real node: {reason}", file=sys.stderr)
        return 1
    print(json.dumps(manifest(name, secret, realnode.images(node))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
