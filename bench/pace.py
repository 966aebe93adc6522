"""The pace budget, measured on rollouts: what each budget costs and saves.

    python -m bench.pace [--n 1000] [--budgets 0.25,0.5,1] [--rounds 2] [--before REV]

Starts the bench cluster (<repo>/.cluster-bench), creates N Redis ({port:
6379, num: 3}, so 3N pods) and N Xca over ``--namespaces`` namespaces, and
converges them. Then each contender, after an untimed pass of its own
that puts the budgets in its form and the disruption controller's count of
them (``own_budgets``), rolls every pod once, with
``sync -A --wait`` and an image of its own (``RECONCILER_IMAGE``), so each
rollout starts from the same converged population and does the same writes:
an eviction and a create per pod, one pod per Redis at a time, the status
patches between. The contenders are today's code at each ``--pace-budget``
and the code of ``--before`` (the pace that doubled while objects moved),
measured in turn, in reversed order every other round.

A rollout is where the budget matters: passes follow each other while pods
move, and each pass looks at every object. Per rollout: the wall time, the
passes, the client's CPU and the apiserver's and etcd's. Results go to
bench/results/pace-<UTC timestamp>.json. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.contenders import Setup
from bench.kubeapi import Api, Request
from bench.scale import (
    BUDGETS_LIMIT,
    BUDGETS_PATH,
    converge,
    freeze_commit,
    grow,
    namespace_names,
)

log = logging.getLogger("bench.pace")
ROOT = Path(__file__).resolve().parents[1]
BEFORE = "e482c4d^"  # the code whose pace doubled from --min-interval while objects moved
DEFAULT = 0.5  # the budget the verdicts judge (reconciler/config.py pace_budget)
FIGURES = ("wall", "passes", "cpu", "server_cpu", "refused", "requests")
COUNTS = ("passes", "refused", "requests")
# Today's default against the code before: no more of either CPU per rollout.
TARGETS = {"cpu": 1.0, "server_cpu": 1.0}


def contenders(budgets: list[float]) -> list[str]:
    return ["before", *(f"budget {b:g}" for b in budgets)]


def own_budgets(setup: Setup, code_dir: Path, label: str, image: str | None) -> dict[str, Any]:
    """Untimed, before a contender's rollout: its own ``sync --wait`` over the
    pods as they are (``image``, None for the default), which writes only what
    it makes differently of the converged population (a release before
    budgets of minAvailable made them of maxUnavailable), then every budget
    counted by the disruption controller. Each rollout then starts from
    budgets of its own code's form, counted, as a rollout in a cluster does;
    otherwise it would pay for the other contender's form: a patch of every
    budget and the wait for their count."""
    env = {"RECONCILER_IMAGE": image} if image else {}
    result = converge(setup, code_dir, f"{label}-own-budgets", timeout=3600.0, env=env)
    waited = budgets_counted(setup.api)
    log.info(
        "%s: %d passes over the population, budgets counted after %.0fs",
        label,
        len(result["pass_lines"]),
        waited,
    )
    return {"passes": len(result["pass_lines"]), "wall": result["wall"], "counted_after": waited}


def budgets_counted(api: Api, limit: float = BUDGETS_LIMIT) -> float:
    """Seconds until the disruption controller has counted every budget at
    its generation."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        found = api.call(Request("GET", BUDGETS_PATH))["items"]
        if all(counted(b) for b in found):
            break
        time.sleep(2.0)
    return time.monotonic() - started


def counted(budget: dict[str, Any]) -> bool:
    observed = (budget.get("status") or {}).get("observedGeneration")
    return isinstance(observed, int) and observed >= budget["metadata"].get("generation", 0)


def rollout(setup: Setup, code_dir: Path, name: str, image: str) -> dict[str, Any]:
    """Every pod rolled to ``image`` by one contender, as ``sync --wait`` does it."""
    env = {"RECONCILER_IMAGE": image}
    if name.startswith("budget "):
        env["RECONCILER_PACE_BUDGET"] = name.split()[1]
    label = f"rollout-{image.rsplit(':', 1)[1]}"
    result = converge(setup, code_dir, label, timeout=3600.0, env=env)
    return result | tallied(result["pass_lines"])


_REFUSED = re.compile(r"Pod/evict/refused=(\d+)")
_REQUESTS = re.compile(r"(\d+) API requests")


def tallied(pass_lines: list[str]) -> dict[str, int]:
    """The passes, the evictions refused and the requests, from the pass lines."""
    return {
        "passes": len(pass_lines),
        "refused": sum(int(m[1]) for line in pass_lines for m in _REFUSED.finditer(line)),
        "requests": sum(int(m[1]) for line in pass_lines for m in _REQUESTS.finditer(line)),
    }


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def summary(results: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Each contender's median of each figure over its rollouts."""
    return {name: {k: median_of(runs, k) for k in FIGURES} for name, runs in results.items()}


def verdicts(medians: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Today's default budget against the code before, per figure bounded."""
    ours, before = medians[f"budget {DEFAULT:g}"], medians["before"]
    out = {}
    for key, bound in TARGETS.items():
        ratio = ours[key] / before[key] if before[key] else float("inf")
        out[key] = {"ratio": ratio, "target": bound, "ok": ratio <= bound}
    return out


def table(n: int, results: dict[str, list[dict[str, Any]]], verdict: dict[str, Any]) -> str:
    medians = summary(results)
    lines = [
        f"| N={n}: contender (median of rollouts; each in brackets) | rollout wall s | passes"
        " | client CPU s | apiserver+etcd CPU s | evictions refused | requests |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        cells = []
        for key in FIGURES:
            each = ", ".join(str(r[key]) if key in COUNTS else f"{r[key]:.1f}" for r in runs)
            median = medians[name][key]
            cells.append(f"{median:.0f} ({each})" if key in COUNTS else f"{median:.1f} ({each})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| budget 0.5 / before | measured | target | verdict |", "|---|---|---|---|"]
    for key, v in verdict.items():
        ok = "PASS" if v["ok"] else "FAIL"
        lines.append(f"| {key} per rollout | {v['ratio']:.2f} | <= {v['target']:.2f} | {ok} |")
    return "\n".join(lines)


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.pace", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1000, help="Redis (and Xca) objects (%(default)s)")
    p.add_argument("--namespaces", type=int, default=20)
    p.add_argument("--budgets", default="0.25,0.5,1", help="today's budgets (%(default)s)")
    p.add_argument("--rounds", type=int, default=2, help="rollouts per contender (%(default)s)")
    p.add_argument("--before", default=BEFORE, help="the code to compare with (%(default)s)")
    p.add_argument("--qps", type=int, default=1000)
    p.add_argument("--burst", type=int, default=1000)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from bench.run import STATE_DIR, freeze_code
    from hack.cluster import cluster as launcher

    args = _args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    budgets = [float(b) for b in args.budgets.split(",")]
    if DEFAULT not in budgets:
        raise SystemExit(f"--budgets must include the default, {DEFAULT:g}: it is judged")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    frozen = STATE_DIR / "frozen" / f"pace-{stamp}"
    code = {"today": freeze_code(frozen / "today", False)}
    code["before"] = freeze_commit(args.before, frozen / "before")
    names = contenders(budgets)
    launcher.down(STATE_DIR)
    cluster = launcher.up(STATE_DIR)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    try:
        setup = Setup.for_cluster(
            cluster,
            STATE_DIR,
            STATE_DIR / "logs" / f"pace-{stamp}",
            frozen / "today",
            qps=args.qps,
            burst=args.burst,
            settle_timeout=3600.0,
            kopf_timeout=0.0,
        )
        grow(setup.api, namespace_names(args.namespaces), 0, args.n)
        created = converge(setup, frozen / "today", "create", timeout=3600.0)
        log.info("N=%d: converged in %.0fs", args.n, created["wall"])
        image: str | None = None  # the pods' image: the default, then each rollout's
        for r in range(args.rounds):
            for i, name in enumerate(names if r % 2 == 0 else names[::-1]):
                code_dir = frozen / ("before" if name == "before" else "today")
                prepared = own_budgets(setup, code_dir, f"bench-{r}-{i}", image)
                started = time.monotonic()
                image = f"redis:bench-{r}-{i}"
                result = rollout(setup, code_dir, name, image) | {"own_budgets": prepared}
                results[name].append(result)
                log.info("%s rolled every pod in %.0fs", name, time.monotonic() - started)
    finally:
        launcher.down(STATE_DIR)
    verdict = verdicts(summary(results))
    doc = {
        "command": "python -m bench.pace " + " ".join(argv or sys.argv[1:]),
        "started": stamp,
        "code": code,
        "n": args.n,
        "create": created,
        "rollouts": results,
        "medians": summary(results),
        "verdicts": verdict,
        "table": table(args.n, results, verdict),
    }
    out = ROOT / "bench" / "results" / f"pace-{stamp}.json"
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(doc["table"])
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
