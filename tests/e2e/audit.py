"""Who wrote what, and who held which bucket, from the apiserver's audit log.

The cluster's audit policy (hack/cluster/cluster.py AUDIT_POLICY) records
every write to pods, Redis, Xca and Leases. A sharded replica names itself in
its user agent, `reconciler (<base>)`; its member incarnations are
`<base>_<suffix>`, the holderIdentity its bucket Leases carry.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from reconciler.buckets import bucket_of

_AGENT = re.compile(r"^reconciler \((?P<base>[^)]+)\)$")
_OURS = {"pods", "redis", "xcas"}
_WRITES = {"create", "update", "patch", "delete"}


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def events(log: Path, namespace: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted(log.parent.glob(log.name + "*")):
        for line in path.read_text().splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            ref = ev.get("objectRef") or {}
            if ref.get("namespace") == namespace and ev.get("stage") == "ResponseComplete":
                out.append(ev)
    out.sort(key=lambda e: e["stageTimestamp"])
    return out


def _ok(ev: Mapping[str, Any]) -> bool:
    return int((ev.get("responseStatus") or {}).get("code") or 0) < 300


@dataclass(frozen=True)
class Held:
    """One bucket in the hands of one replica, from a Lease write naming it
    to the next write naming another (or its member Lease's deletion)."""

    bucket: int
    replica: str
    start: datetime
    end: datetime | None


@dataclass(frozen=True)
class Write:
    replica: str
    at: datetime
    verb: str
    resource: str
    name: str  # the Redis or Xca the write is for


def holdings(evs: Iterable[Mapping[str, Any]], group: str) -> list[Held]:
    prefix, member_prefix = f"{group}-bucket-", f"{group}-member-"
    current: dict[int, tuple[str, str, datetime]] = {}  # bucket -> incarnation, replica, since
    out: list[Held] = []
    for ev in evs:
        ref = ev["objectRef"]
        if ref.get("resource") != "leases" or not _ok(ev):
            continue
        at, name = _time(ev["stageTimestamp"]), ref.get("name") or ""
        if name.startswith(member_prefix) and ev["verb"] == "delete":
            gone = name[len(member_prefix) :]
            for b, (inc, replica, since) in list(current.items()):
                if _slug(inc) == gone:
                    out.append(Held(b, replica, since, at))
                    del current[b]
            continue
        if not name.startswith(prefix) or ev["verb"] not in ("create", "update"):
            continue
        bucket = int(name[len(prefix) :])
        holder = ((ev.get("requestObject") or {}).get("spec") or {}).get("holderIdentity") or ""
        if bucket in current and current[bucket][0] == holder:
            continue
        if bucket in current:
            inc, replica, since = current.pop(bucket)
            out.append(Held(bucket, replica, since, at))
        if holder:
            current[bucket] = (holder, holder.rsplit("_", 1)[0], at)
    out.extend(Held(b, replica, since, None) for b, (_, replica, since) in current.items())
    return out


def _slug(identity: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")


def writes(evs: Iterable[Mapping[str, Any]]) -> list[Write]:
    out = []
    for ev in evs:
        ref, agent = ev["objectRef"], _AGENT.match(ev.get("userAgent") or "")
        if agent is None or ref.get("resource") not in _OURS or ev["verb"] not in _WRITES:
            continue
        if not _ok(ev):
            continue  # refused: it changed nothing
        name = ref.get("name") or ""
        owner = name.rsplit("-", 1)[0] if ref["resource"] == "pods" else name
        at = _time(ev["requestReceivedTimestamp"])
        out.append(Write(agent["base"], at, ev["verb"], ref["resource"], owner))
    return out


def rollout_breaks(log: Path, namespace: str) -> list[str]:
    """A rolling update replaces one pod of a Redis at a time: after our
    delete of one of its pods, the next delete of its pods comes only after
    that pod was created again. Each pair of deletes without it, by whichever
    replicas, is named."""
    pending: dict[str, str] = {}  # Redis -> the pod deleted and not yet created
    found = []
    for ev in events(log, namespace):
        ref, agent = ev["objectRef"], _AGENT.match(ev.get("userAgent") or "")
        if agent is None or ref.get("resource") != "pods" or not _ok(ev):
            continue
        name = ref.get("name") or ""
        owner = name.rsplit("-", 1)[0]
        if ev["verb"] == "create" and pending.get(owner) == name:
            del pending[owner]
        elif ev["verb"] == "delete":
            if owner in pending:
                found.append(f"{name} deleted while {pending[owner]} was not yet back")
            pending[owner] = name
    return found


def violations(
    log: Path,
    namespace: str,
    group: str,
    buckets: int,
    uids: Mapping[str, str],
    renew_deadline: float,
) -> list[str]:
    """Each successful write of a replica that did not hold the bucket of the
    object it wrote at that time (its renew deadline past the end allowed),
    and each bucket held by two replicas at once."""
    evs = events(log, namespace)
    held = holdings(evs, group)
    slack = timedelta(seconds=renew_deadline)
    found = []
    for w in writes(evs):
        uid = uids.get(w.name)
        if uid is None:
            found.append(f"{w.replica} wrote {w.resource} of {w.name}, whose uid is unknown")
            continue
        b = bucket_of(uid, buckets)
        if not any(
            h.bucket == b
            and h.replica == w.replica
            and h.start <= w.at
            and (h.end is None or w.at <= h.end + slack)
            for h in held
        ):
            found.append(
                f"{w.replica} {w.verb} {w.resource} of {w.name} at {w.at:%H:%M:%S.%f}"
                f" without holding bucket {b}"
            )
    by_bucket: dict[int, list[Held]] = {}
    for h in held:
        by_bucket.setdefault(h.bucket, []).append(h)
    for b, hs in by_bucket.items():
        hs.sort(key=lambda h: h.start)
        for a, c in itertools.pairwise(hs):
            if a.end is None or a.end > c.start:
                found.append(f"bucket {b} held by {a.replica} and {c.replica} at once")
    return found
