"""The image's size, and what one `reconciler sync` costs inside it.

    python -m bench.image [--runs 7]

Builds the image with `make docker-build` and podman on the stand-in base
(hack/image/base.sh: Debian bookworm's python3.11, as the image tests use),
starts the local control plane, converges the samples in one namespace, then
runs the CronJob overlay's container (its user, read-only root, limits, a
ServiceAccount token) `--runs` times on that converged namespace. Inside the
container a small parent runs `reconciler sync` and reads the child's CPU
time (user + system) and peak RSS from getrusage(RUSAGE_CHILDREN), so the
figures are the process's own, not podman's. Prints medians and ranges.

The size is the image's as podman stores it, and what our layers add to the
base; on python:3.11-slim the base differs, our layers barely do.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from hack.cluster import cluster as launcher
from hack.image import podman

ROOT = Path(__file__).resolve().parents[1]
IMG = "localhost/reconciler:bench"
NAMESPACE = "bench-image"
SYSTEM_NS = "reconciler-system"
# The parent inside the container: one sync, then the child's rusage as JSON.
MEASURE = (
    "import json, resource, subprocess, sys; "
    "code = subprocess.run(['reconciler', 'sync'], stdout=subprocess.DEVNULL).returncode; "
    "r = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "print(json.dumps({'code': code, 'cpu': r.ru_utime + r.ru_stime, 'rss_kb': r.ru_maxrss}))"
)


def kubectl(kubeconfig: Path, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    out = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, check=True)
    return out.stdout


def converge(kubeconfig: Path) -> None:
    """The samples in their own namespace, reconciled until a pass has nothing to do."""
    kubectl(kubeconfig, "apply", "-k", str(ROOT / "config" / "rbac"))
    subprocess.run(
        ["kubectl", "create", "namespace", NAMESPACE],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
    )
    kubectl(kubeconfig, "apply", "-k", str(ROOT / "config" / "samples"), "-n", NAMESPACE)
    sync = ["reconciler", "sync", "-n", NAMESPACE, "--kubeconfig", str(kubeconfig)]
    for _ in range(30):
        out = subprocess.run(sync, capture_output=True, text=True)
        if "no changes" in out.stdout:
            return
    raise RuntimeError(f"the samples did not converge: {out.stdout}{out.stderr}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.image")
    p.add_argument("--runs", type=int, default=7)
    args = p.parse_args(argv)
    if missing := podman.missing_tools():
        raise SystemExit(f"bench.image: missing {', '.join(missing)} (make image-deps)")

    engine = podman.engine()
    base = engine.base()
    built = engine.build(IMG, base)
    if built.returncode != 0:
        raise SystemExit(built.stderr[-3000:])
    size, base_size = engine.size(IMG), engine.size(base)

    kubeconfig = launcher.up().kubeconfig
    converge(kubeconfig)
    token = kubectl(kubeconfig, "create", "token", "reconciler", "-n", SYSTEM_NS).strip()
    pod, container = podman.overlay_pod("config/cronjob")
    with tempfile.TemporaryDirectory() as tmp:
        flags = [
            *podman.container_args(pod, container, SYSTEM_NS),
            *podman.limits(container),
            *podman.in_cluster(kubeconfig, token, Path(tmp) / "sa", SYSTEM_NS),
            "-e",
            f"RECONCILER_NAMESPACES={NAMESPACE}",
        ]
        runs = []
        for _ in range(args.runs):
            out = engine.run("run", "--rm", *flags, "--entrypoint", "python", IMG, "-c", MEASURE)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    if any(r["code"] != 0 for r in runs):
        raise SystemExit(f"a sync failed inside the image: {runs}")
    cpu = [r["cpu"] for r in runs]
    rss = [r["rss_kb"] / 1024 for r in runs]
    print(f"image {IMG}: {size / 1e6:.0f} MB; base {base} {base_size / 1e6:.0f} MB;")
    print(f"  our layers add {(size - base_size) / 1e6:.0f} MB")
    print(
        f"sync on a converged namespace, {args.runs} runs inside the image "
        f"(uid 65532, read-only root, limits {container['resources']['limits']}):"
    )
    print(
        f"  CPU (user+sys) median {statistics.median(cpu):.3f} s [{min(cpu):.3f}, {max(cpu):.3f}]"
    )
    print(f"  peak RSS median {statistics.median(rss):.1f} MB [{min(rss):.1f}, {max(rss):.1f}]")


if __name__ == "__main__":
    main()
