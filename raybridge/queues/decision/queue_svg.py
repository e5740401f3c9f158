"""Fair shares and "why is it waiting" as pictures: the queue tree with its numbers as bars.

`queues fairshare -o svg` and `explain -o svg` call these to turn the data
their services return (`FairShareResult`, `KaiExplanation`,
`KueueExplanation`) into a `core.svg.Chart`, one row per queue (indented
under its parent) and one column per resource:

* KAI fair share: the capacity the top level divides, then per queue its
  quota, its fair share as what it deserves (its quota) plus what it gets over
  quota (by its over-quota weight, named beside the priority), and what it
  requests (the demand; unbounded when none was given);
* `explain` of a KAI pod: every queue with quota, fair share and what is
  allocated, the pod's queue and its ancestors highlighted, and under the
  chart the pod's and PodGroup's state, the scheduler's reasons and each
  queue's verdict (over or within its fair share), without the quota terms
  the bars show;
* `explain` of a Kueue job: its cohort, ClusterQueue and, per pod set and
  flavor, the nominal quota, what is in use with what the job asks stacked
  on it, and the most the ClusterQueue could hold with borrowing, the path
  highlighted; under it Kueue's reason and the verdict, not the per-flavor
  sentences the bars already show.

Pure: data in, `Chart` (and SVG text through `core.svg.render`) out. It
decides nothing the services did not: every number is one they computed.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Mapping, Optional, Sequence

from raybridge.queues.decision.kueue_explain import BORROWS, FITS, NEVER, RESOURCES_SHOWN, WAITS, FlavorRequest, KueueExplanation
from raybridge.kai.fairshare import UNLIMITED, FairShareResult, number
from raybridge.queues.decision.kai_explain import KaiExplanation, QueueFacts
from raybridge.core.svg import Bar, Chart, Column, Row, Series, render

RESOURCES = ("gpu", "cpu", "memory")
_COLUMN_TITLES = {"gpu": "GPU (devices)", "cpu": "CPU (millicores)", "memory": "memory (MB)"}

CAPACITY = Series("capacity", "capacity divided", "#374151")
QUOTA = Series("quota", "quota", "#9ca3af")
FAIR_SHARE = Series("fair-share", "fair share", "#2563eb")
DESERVED = Series("deserved", "fair share: deserved (quota)", "#2563eb")
OVER_QUOTA = Series("over-quota", "+ over quota (by weight)", "#93c5fd")
REQUESTED = Series("requested", "requested", "#f59e0b")
ALLOCATED = Series("allocated", "allocated", "#dc2626")
NOMINAL = Series("nominal", "nominal quota", "#9ca3af")
IN_USE = Series("in-use", "in use", "#dc2626")
ASKS = Series("asks", "this job asks", "#f59e0b")
COULD_HOLD = Series("could-hold", "most it could hold (with borrowing)", "#2563eb")

_VERDICT_WORDS = {
    FITS: "fits",
    WAITS: "waits for quota in use",
    BORROWS: "borrows from the cohort",
    NEVER: "can never fit here",
}


def show(value: float) -> str:
    """A number as the tables print it: whole numbers without a point, else up to three decimals."""
    shown = number(value)
    return f"{shown:.3f}".rstrip("0").rstrip(".") if isinstance(shown, float) else str(shown)


# --- KAI fair share ----------------------------------------------------------------------------------


def fair_share_chart(result: FairShareResult, warnings: Sequence[str] = ()) -> Chart:
    """`queues fairshare`: the capacity, then every queue's quota, fair share and request per resource."""
    shown = _shown_resources(result)
    depth: dict[str, int] = {}
    rows = [Row("capacity", tuple((Bar(CAPACITY.key, result.capacity[r], show(result.capacity[r])),) for r in shown),
                note="what the top-level queues divide")]  # fmt: skip
    for queue in result.queues:
        depth[queue.name] = depth[queue.parent] + 1 if queue.parent in depth else 0
        cells = []
        for resource in shown:
            share = queue.resource(resource)
            over = f" + {show(share.over_quota)}" if share.over_quota else ""
            cells.append((
                _quota_bar(share.quota),
                Bar(DESERVED.key, share.deserved, ""),
                Bar(OVER_QUOTA.key, share.over_quota, f"{show(share.deserved)}{over} = {show(share.fair_share)}" if over
                    else show(share.fair_share), stacked=True),
                Bar(REQUESTED.key, None, "unbounded", unbounded=True) if share.request is None
                else Bar(REQUESTED.key, share.request, show(share.request)),
            ))  # fmt: skip
        rows.append(Row(queue.name, tuple(cells), depth=depth[queue.name], note=_priority_and_weight(queue, shown)))
    notes = [f"{n.queue} {n.resource}: {n.message}" for n in result.notes]
    notes += [f"left out: {name}: {reason}" for name, reason in result.dropped]
    notes += [f"warning: {w}" for w in warnings]
    c = {r: show(result.capacity[r]) for r in RESOURCES}
    capacity = f"{c['gpu']} GPUs, {c['cpu']} millicores of CPU, {c['memory']} MB of memory"
    demand = "requests as given" if result.demand_given else "no demand given: every queue taken to want without bound"
    notes.insert(0, OVER_QUOTA_RULE)
    return Chart(
        title=f"KAI fair share of {capacity}",
        subtitle=f"per queue and resource, in the queues' units; {demand}",
        series=(CAPACITY, QUOTA, DESERVED, OVER_QUOTA, REQUESTED),
        columns=tuple(Column(_COLUMN_TITLES[r]) for r in shown),
        rows=tuple(rows),
        notes=tuple(notes),
        notes_title="How it is divided",
    )


#: How KAI divides what is left over the quotas (`kai/fairshare.py`, after KAI's proportion plugin).
OVER_QUOTA_RULE = (
    "Each queue first deserves its quota (up to what it requests). What is left goes to the queues that still want "
    "more, highest priority first, in proportion to their over-quota weight (in whole units; a unit flooring leaves goes to "
    "the largest fraction); a child divides its parent's share the same way."
)


def _priority_and_weight(queue: Any, shown: Sequence[str]) -> str:
    """A queue's priority and over-quota weights, which decide its share of what is left over the quotas."""
    weights = {r: show(queue.resource(r).over_quota_weight) for r in shown}
    if len(set(weights.values())) == 1:
        return f"priority {queue.priority}, over-quota weight {next(iter(weights.values()))}"
    return f"priority {queue.priority}, over-quota weight " + ", ".join(f"{r} {w}" for r, w in weights.items())


def _shown_resources(result: FairShareResult) -> tuple[str, ...]:
    """Resources with a nonzero term or share somewhere (as the table shows them); GPUs when none has one."""
    shown = tuple(
        r for r in RESOURCES
        if any(v != 0 for q in result.queues for v in (q.resource(r).quota, q.resource(r).limit,
                                                        q.resource(r).over_quota_weight, q.resource(r).fair_share))
    )  # fmt: skip
    return shown or ("gpu",)


def _quota_bar(quota: float) -> Bar:
    if quota == UNLIMITED:
        return Bar(QUOTA.key, None, "unlimited", unbounded=True)
    return Bar(QUOTA.key, quota, show(quota))


# --- explain, KAI --------------------------------------------------------------------------------------


def kai_explain_chart(explanation: KaiExplanation, what: str) -> Chart:
    """`explain` of a KAI pod or PodGroup (`what`, e.g. "Pod ml/notebook-0"): every queue, the pod's path highlighted."""
    facts = explanation.tree or tuple(reversed(explanation.queues))
    path = {q.name for q in explanation.queues}
    shown = tuple(
        r for r in RESOURCES if r == "gpu" or any((q.resources.get(r) or {}).get("configured") for q in facts)
    )
    depth: dict[str, int] = {}
    rows = []
    for queue in facts:
        depth[queue.name] = depth[queue.parent] + 1 if queue.parent in depth else 0
        rows.append(
            Row(
                queue.name,
                tuple(_kai_cell(queue, r) for r in shown),
                depth=depth[queue.name],
                highlight=queue.name in path,
                note=f"priority {queue.priority}" + ("; the pod's queue" if queue.name == explanation.queue else ""),
            )
        )
    if not rows:
        rows.append(Row(f"queue {explanation.queue or 'none'}: not found", tuple(() for _ in shown), highlight=True))
    return Chart(
        title=f"Why {what} waits: KAI queue {explanation.queue or 'none'}",
        subtitle="the pod's queue and its parents highlighted; per queue and resource, in the queues' units",
        series=(QUOTA, FAIR_SHARE, ALLOCATED),
        columns=tuple(Column(_COLUMN_TITLES[r]) for r in shown),
        rows=tuple(rows),
        notes=tuple(line.strip() for line in [*explanation.standing(), *explanation.verdicts(terms_shown=False)]),
        notes_title="Why it waits",
    )


def _kai_cell(queue: QueueFacts, resource: str) -> tuple[Bar, ...]:
    facts: Mapping[str, Any] = queue.resources.get(resource) or {}
    fair, allocated = facts.get("fairShare"), facts.get("allocated")
    return (
        _quota_bar(float(facts.get("quota") or 0)),
        Bar(FAIR_SHARE.key, None, "unknown") if fair is None else Bar(FAIR_SHARE.key, float(fair), show(float(fair))),
        Bar(ALLOCATED.key, None, "unknown") if allocated is None else Bar(ALLOCATED.key, float(allocated), show(float(allocated))),
    )


# --- explain, Kueue ------------------------------------------------------------------------------------


def kueue_explain_chart(explanation: KueueExplanation) -> Chart:
    """`explain` of a RayJob or RayCluster: its cohort path and, per pod set and flavor, the quota arithmetic."""
    e = explanation
    resources = _kueue_resources(e.requests)
    empty: tuple[tuple[Bar, ...], ...] = tuple(() for _ in resources)
    rows: list[Row] = []
    cohorts = list(reversed(e.cohort_parents)) + ([e.cohort] if e.cohort else [])
    for depth, cohort in enumerate(cohorts):
        rows.append(Row(f"cohort {cohort}", empty, depth=depth, highlight=True))
    cq_depth = len(cohorts)
    if e.cluster_queue:
        local = f"LocalQueue {e.namespace}/{e.local_queue} points here" if e.local_queue else ""
        rows.append(Row(f"ClusterQueue {e.cluster_queue}", empty, depth=cq_depth, highlight=True, note=local))
    groups: dict[tuple[str, str], list[FlavorRequest]] = {}
    for request in e.requests:
        groups.setdefault((request.pod_set, request.flavor), []).append(request)
    for (pod_set, flavor), requests in groups.items():
        by_resource = {r.resource: r for r in requests}
        worst = _worst(requests)
        how = "assigned" if requests[0].assigned else "candidate"
        pods = f"{requests[0].count} pod{'s' if requests[0].count != 1 else ''}"
        rows.append(
            Row(
                f"flavor {flavor}, pod set {pod_set}",
                tuple(_kueue_cell(by_resource.get(r)) for r in resources),
                depth=cq_depth + 1,
                highlight=worst != FITS,
                note=f"{pods}, {how}: {_VERDICT_WORDS.get(worst, worst)}",
            )
        )
    queue = f"LocalQueue {e.local_queue or 'none'}" + (f" -> ClusterQueue {e.cluster_queue}" if e.cluster_queue else "")
    return Chart(
        title=f"Why {e.kind} {e.namespace}/{e.name} waits: Kueue workload {e.state}",
        subtitle=f"{queue}; cpu in cores, memory in GiB, GPUs in devices",
        series=(NOMINAL, IN_USE, ASKS, COULD_HOLD),
        columns=tuple(Column(_kueue_title(r)) for r in resources),
        rows=tuple(rows),
        notes=tuple(line.strip() for line in e.verdict()),
        notes_title="Why it waits",
    )


def _kueue_resources(requests: Sequence[FlavorRequest]) -> tuple[str, ...]:
    present = {r.resource for r in requests}
    ordered = [r for r in RESOURCES_SHOWN if r in present] + sorted(present - set(RESOURCES_SHOWN))
    return tuple(ordered) or ("nvidia.com/gpu",)


def _kueue_title(resource: str) -> str:
    if resource == "memory":
        return "memory (GiB)"
    if resource == "cpu":
        return "CPU (cores)"
    return resource


def _worst(requests: Sequence[FlavorRequest]) -> str:
    order = ("never-fits", "needs-borrowing", "waits-for-quota", FITS)
    verdicts = {r.verdict for r in requests}
    return next((v for v in order if v in verdicts), requests[0].verdict)


def _kueue_cell(request: Optional[FlavorRequest]) -> tuple[Bar, ...]:
    if request is None:
        return ()
    resource = request.resource
    used, asked = _amount(request.used, resource), _amount(request.requested, resource)
    return (
        _kueue_bar(NOMINAL.key, request.nominal, resource),
        Bar(IN_USE.key, used, ""),
        Bar(ASKS.key, asked, f"{show(round(used, 3))} + {show(round(asked, 3))} = {show(round(used + asked, 3))}", stacked=True),
        _kueue_bar(COULD_HOLD.key, request.potential, resource),
    )


def _amount(value: Decimal, resource: str) -> float:
    return float(value) / (1 << 30) if resource == "memory" else float(value)


def _kueue_bar(series: str, value: Decimal, resource: str) -> Bar:
    if not value.is_finite():  # what the cohort can lend is unknown
        return Bar(series, None, "unknown")
    amount = _amount(value, resource)
    return Bar(series, amount, show(round(amount, 3)))


def fair_share_svg(result: FairShareResult, warnings: Sequence[str] = ()) -> str:
    return render(fair_share_chart(result, warnings))


def kai_explain_svg(explanation: KaiExplanation, what: str) -> str:
    return render(kai_explain_chart(explanation, what))


def kueue_explain_svg(explanation: KueueExplanation) -> str:
    return render(kueue_explain_chart(explanation))
