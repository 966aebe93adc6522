"""Ratios, targets and the one table, from the raw per-N measurements.

Kept apart from the measuring code so the numbers in the JSON and the table
are derived in exactly one place. Ratios are taken between numbers measured
in the same run, minutes apart, because absolute numbers on a shared 2-core
machine are noisy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

RSS_LIMIT_MB = 150.0
EXPONENT_LIMIT = 1.15  # t ~ N^b: b = 1 is linear, 2 quadratic


@dataclass(frozen=True)
class Target:
    name: str
    rule: str
    check: Callable[[float], bool]


TARGETS = {
    "first_pass_vs_write_limit": Target("first pass / write limit", "<= 1.5", lambda r: r <= 1.5),
    "cold_vs_write_limit_ready": Target(
        "cold convergence / (write limit + kwok readiness)", "<= 1.5", lambda r: r <= 1.5
    ),
    "kopf_vs_reconciler_end_state": Target(
        "kopf / reconciler, same end state", ">= 2", lambda r: r >= 2.0
    ),
    "cold_vs_steady_wall": Target(
        "cold convergence / steady pass, wall", ">= 20", lambda r: r >= 20
    ),
    "cold_vs_steady_cpu": Target("cold convergence / steady pass, CPU", ">= 20", lambda r: r >= 20),
    "cold_vs_daemon_wall": Target(
        "cold convergence / daemon steady pass, wall", ">= 20", lambda r: r >= 20
    ),
    "cold_vs_daemon_cpu": Target(
        "cold convergence / daemon steady pass, CPU", ">= 20", lambda r: r >= 20
    ),
}


def _div(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def ratios(row: dict[str, Any]) -> dict[str, float | None]:
    rec, wl, kopf = row["reconciler"], row["write_limit"], row.get("kopf") or {}
    cold, first, steady = rec["cold"], rec["first_pass"], rec["steady"]
    first_cpu, cold_cpu = rec["first_pass_machine_cpu"], rec["cold_machine_cpu"]
    daemon = rec.get("daemon_steady") or {}
    return {
        "first_pass_vs_write_limit": _div(first["wall"], wl["wall"]),
        "first_pass_requests_vs_write_limit": _div(first["requests"], wl["requests"]),
        "first_pass_cluster_cpu_vs_write_limit": _div(
            first_cpu["cluster"], wl["writes_machine_cpu"]["cluster"]
        ),
        "first_pass_client_cpu_vs_write_limit": _div(first["cpu"], wl["client_cpu"]),
        "cold_vs_write_limit": _div(cold["wall"], wl["wall"]),
        "cold_vs_write_limit_ready": _div(cold["wall"], wl["ready_wall"]),
        "end_state_vs_write_limit_ready": _div(cold["end_state_wall"], wl["ready_wall"]),
        "kopf_vs_reconciler_end_state": _div(kopf.get("wall"), cold["end_state_wall"]),
        "kopf_vs_reconciler_cold": _div(kopf.get("wall"), cold["wall"]),
        "kopf_vs_reconciler_cluster_cpu": _div(
            (kopf.get("machine_cpu") or {}).get("cluster"), cold_cpu["cluster"]
        ),
        "kopf_vs_reconciler_client_cpu": _div(kopf.get("cpu"), cold["cpu"]),
        "cold_vs_steady_wall": _div(cold["wall"], steady["wall"]),
        "cold_vs_steady_cpu": _div(cold["cpu"], steady["cpu"]),
        "cold_vs_daemon_wall": _div(cold["wall"], daemon.get("wall")),
        "cold_vs_daemon_cpu": _div(cold["cpu"], daemon.get("cpu")),
        "cold_vs_steady_total_cpu": _div(
            cold["cpu"] + cold_cpu["cluster"], steady["cpu"] + rec["steady_machine_cpu"]["cluster"]
        ),
    }


def verdicts(row: dict[str, Any]) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    for key, target in TARGETS.items():
        value = row["ratios"].get(key)
        out[key] = None if value is None else target.check(value)
    return out


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> dict[str, float]:
    """Slope, intercept and R² of y = a + b·x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx if sxx else 0.0
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return {"slope": slope, "intercept": intercept, "r2": 1 - ss_res / ss_tot if ss_tot else 1.0}


def _exponent(ns: Sequence[float], ys: Sequence[float]) -> float | None:
    """b in y = a·N^b (least squares on logs): 1 is linear, 2 quadratic."""
    if len(ns) < 2 or min(ys) <= 0:
        return None
    return least_squares([math.log(x) for x in ns], [math.log(y) for y in ys])["slope"]


def linearity(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pass time against N.

    The slope (ms per object) is fitted to the subprocess wall time. Whether
    growth is linear is judged on the in-process time, which excludes the
    ~0.5 s interpreter start-up that would otherwise make small N look
    expensive per object and hide a superlinear term, by the exponent b of
    t = a·N^b fitted over all sizes (one noisy small-N point moves the
    largest/smallest per-object ratio much more).
    """
    ns = [float(r["n"]) for r in rows]
    out: dict[str, Any] = {}
    for name, key in (
        ("steady_pass", "steady"),
        ("first_pass", "first_pass"),
    ):
        walls = [r["reconciler"][key]["wall"] for r in rows]
        inner = [float(r["reconciler"][key]["in_process_seconds"] or 0.0) for r in rows]
        fit = least_squares(ns, walls) if len(rows) >= 2 else {"slope": 0, "intercept": 0, "r2": 1}
        per_object = [y / x for x, y in zip(ns, inner, strict=True)]
        growth = per_object[-1] / per_object[0] if per_object[0] else None
        out_exponent = _exponent(ns, inner)
        out[name] = {
            "ms_per_object": fit["slope"] * 1000,
            "intercept_s": fit["intercept"],
            "r2": fit["r2"],
            "in_process_ms_per_object": {
                int(x): p * 1000 for x, p in zip(ns, per_object, strict=True)
            },
            "per_object_largest_vs_smallest": growth,
            "exponent": out_exponent,
            "linear": None if out_exponent is None else out_exponent <= EXPONENT_LIMIT,
        }
    return out


# ---------------------------------------------------------------- the table


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _verdict(ok: bool | None) -> str:
    return "" if ok is None else (" PASS" if ok else " FAIL")


def _rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, list[str], str]]:
    """(label, one cell per N, rule) for every line of the table."""

    def line(label: str, pick: Callable[[dict], Any], digits: int = 2) -> tuple:
        return (label, [_fmt(pick(r), digits) for r in results], "")

    def ratio(label: str, key: str) -> tuple:
        target = TARGETS.get(key)
        cells = []
        for r in results:
            value = r["ratios"].get(key)
            cells.append(
                _fmt(value) + ("x" if value is not None else "") + _verdict(r["verdicts"].get(key))
            )
        return (label, cells, target.rule if target else "")

    def rss(r: dict) -> str:
        value = r["reconciler"]["peak_rss_mb"]
        last = r is results[-1]
        return _fmt(value, 1) + _verdict(value < RSS_LIMIT_MB if last else None)

    rec = lambda r: r["reconciler"]  # noqa: E731
    wl = lambda r: r["write_limit"]  # noqa: E731
    kopf = lambda r: r.get("kopf") or {}  # noqa: E731
    daemon = lambda r: rec(r).get("daemon_steady") or {}  # noqa: E731
    return [
        line("reconciler cold convergence: wall s", lambda r: rec(r)["cold"]["wall"]),
        line("  passes", lambda r: rec(r)["cold"]["passes"]),
        line("  API requests", lambda r: rec(r)["cold"]["requests"]),
        line("  client CPU s (all passes)", lambda r: rec(r)["cold"]["cpu"]),
        line("  cluster CPU s", lambda r: rec(r)["cold_machine_cpu"]["cluster"]),
        line("  waiting for Ready pods between passes s", lambda r: rec(r)["cold"]["wait_wall"]),
        line("  common end state reached at s", lambda r: rec(r)["cold"]["end_state_wall"]),
        line("  foreign load, cores", lambda r: rec(r)["cold_machine_cpu"]["foreign_cores"]),
        line("  steal, cores", lambda r: rec(r)["cold_machine_cpu"].get("steal_cores")),
        line("reconciler first pass: wall s", lambda r: rec(r)["first_pass"]["wall"]),
        line("  in-process s", lambda r: rec(r)["first_pass"]["in_process_seconds"]),
        line("  API requests", lambda r: rec(r)["first_pass"]["requests"]),
        line("  client CPU s", lambda r: rec(r)["first_pass"]["cpu"]),
        line("  cluster CPU s", lambda r: rec(r)["first_pass_machine_cpu"]["cluster"]),
        line("steady pass: wall s", lambda r: rec(r)["steady"]["wall"]),
        line("  in-process s", lambda r: rec(r)["steady"]["in_process_seconds"]),
        line("  client CPU s", lambda r: rec(r)["steady"]["cpu"]),
        line("  cluster CPU s", lambda r: rec(r)["steady_machine_cpu"]["cluster"]),
        line("  API requests", lambda r: rec(r)["steady"]["requests"]),
        line("  bytes received", lambda r: rec(r)["steady"]["bytes_received"]),
        line("  writes", lambda r: rec(r)["steady"]["writes"]),
        line("  only LISTs", lambda r: rec(r)["steady_only_lists"]),
        line("daemon steady pass (reconciler run): wall s", lambda r: daemon(r).get("wall")),
        line("  client CPU s", lambda r: daemon(r).get("cpu"), 3),
        line("  API requests", lambda r: daemon(r).get("requests"), 0),
        line("  RSS after the passes MB", lambda r: daemon(r).get("rss_mb"), 1),
        ("reconciler peak RSS MB", [rss(r) for r in results], f"< {RSS_LIMIT_MB:.0f} at largest N"),
        line("write limit: wall s (mean of before/after)", lambda r: wl(r)["wall"]),
        line("  before / after s", lambda r: " / ".join(f"{w:.1f}" for w in wl(r)["runs"])),
        line("  requests", lambda r: wl(r)["requests"]),
        line("  client CPU s", lambda r: wl(r)["client_cpu"]),
        line("  cluster CPU s", lambda r: wl(r)["writes_machine_cpu"]["cluster"]),
        line("  + kwok readiness: wall s", lambda r: wl(r)["ready_wall"]),
        line("  foreign load, cores", lambda r: wl(r)["ready_machine_cpu"]["foreign_cores"]),
        line("  steal, cores", lambda r: wl(r)["ready_machine_cpu"].get("steal_cores")),
        line("kopf: wall s to common end state", lambda r: kopf(r).get("wall")),
        line("  client CPU s", lambda r: kopf(r).get("cpu")),
        line("  cluster CPU s", lambda r: (kopf(r).get("machine_cpu") or {}).get("cluster")),
        line("  peak RSS MB", lambda r: kopf(r).get("max_rss_mb"), 1),
        line(
            "  foreign load, cores",
            lambda r: (kopf(r).get("machine_cpu") or {}).get("foreign_cores"),
        ),
        line("  steal, cores", lambda r: (kopf(r).get("machine_cpu") or {}).get("steal_cores")),
        ratio("first pass / write limit, wall", "first_pass_vs_write_limit"),
        ratio("first pass / write limit, cluster CPU", "first_pass_cluster_cpu_vs_write_limit"),
        ratio("first pass / write limit, client CPU", "first_pass_client_cpu_vs_write_limit"),
        ratio("cold convergence / write limit", "cold_vs_write_limit"),
        ratio("cold convergence / (write limit + readiness)", "cold_vs_write_limit_ready"),
        ratio("end state / (write limit + readiness)", "end_state_vs_write_limit_ready"),
        ratio("kopf / reconciler, end state", "kopf_vs_reconciler_end_state"),
        ratio("kopf / reconciler cold convergence", "kopf_vs_reconciler_cold"),
        ratio("kopf / reconciler cold, cluster CPU", "kopf_vs_reconciler_cluster_cpu"),
        ratio("kopf / reconciler cold, client CPU", "kopf_vs_reconciler_client_cpu"),
        ratio("cold convergence / steady pass, wall", "cold_vs_steady_wall"),
        ratio("cold convergence / steady pass, CPU", "cold_vs_steady_cpu"),
        ratio("cold / steady, client + cluster CPU", "cold_vs_steady_total_cpu"),
        ratio("cold convergence / daemon steady pass, wall", "cold_vs_daemon_wall"),
        ratio("cold convergence / daemon steady pass, CPU", "cold_vs_daemon_cpu"),
    ]


def table(results: Sequence[dict[str, Any]], lin: dict[str, Any]) -> str:
    rows = _rows(results)
    head = ["", *(f"N={r['n']}" for r in results), "target"]
    width = [max(len(head[0]), *(len(r[0]) for r in rows))]
    for i in range(len(results)):
        width.append(max(len(head[i + 1]), *(len(r[1][i]) for r in rows)))
    lines = [
        "  ".join(
            [
                head[0].ljust(width[0]),
                *(h.rjust(w) for h, w in zip(head[1:-1], width[1:], strict=True)),
                head[-1],
            ]
        )
    ]
    lines.append("-" * len(lines[0]))
    for label, cells, rule in rows:
        body = [c.rjust(w) for c, w in zip(cells, width[1:], strict=True)]
        lines.append("  ".join([label.ljust(width[0]), *body, rule]).rstrip())
    lines.append("")
    lines.append(
        f"{'pass time vs N':<14} {'wall ms/object':>14} {'intercept s':>11} {'R²':>6}"
        "   in-process: per-object cost largest/smallest N; t ~ N^b"
    )
    for name, fit in lin.items():
        exponent = fit["exponent"]
        lines.append(
            f"{name:<14} {fit['ms_per_object']:>14.3f} {fit['intercept_s']:>11.3f} "
            f"{fit['r2']:>6.3f}   {_fmt(fit['per_object_largest_vs_smallest'])}x; "
            f"b = {_fmt(exponent)}{_verdict(fit['linear'])} (b <= {EXPONENT_LIMIT})"
        )
    return "\n".join(lines)
