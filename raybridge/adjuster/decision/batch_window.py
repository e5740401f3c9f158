"""New placeholders wait while a burst of pods is still arriving, as Karpenter batches pending pods.

Why it exists: placeholders made for the first pods of a burst bring a node sized for those, and the rest grow it
or need another; waiting a moment, by the pods' own timestamps, asks for the whole burst at once. The reconcile
core asks `still_arriving` once a pass, before it creates anything.

What it deliberately does not do: read the clock (the pass's `now` is given), or decide what to create.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Optional, Sequence

from raybridge.adjuster.decision.placeholders import ExistingPlaceholder, PlannedPlaceholder
from raybridge.adjuster.decision.plan import AdjusterPlan
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.core.views import Pod, pod_fact, scheduled_condition
from raybridge.kai.share import asks_for_share


@dataclass(frozen=True)
class BatchWindow:
    """New placeholders wait while a burst is still arriving: while a GPU-sharing pod of the scheduler has not been
    looked at yet (no PodScheduled condition: KAI marks a burst's pods over several of its 1 s sessions, and its pod
    grouper first gives each a PodGroup), and until none has been created for `idle_seconds`; never longer than
    until a pod they are for has waited `max_seconds`. Karpenter batches pending pods the same way
    (BATCH_IDLE_DURATION 1 s, BATCH_MAX_DURATION 10 s, pkg/controllers/provisioning/batcher.go); placeholders made
    for the first pods of a burst bring a node sized for those, and the rest grow it or need another."""

    idle_seconds: float
    max_seconds: float


def still_arriving(batch: BatchWindow, plan: AdjusterPlan, create: Sequence[PlannedPlaceholder], existing: Sequence[ExistingPlaceholder],
                    pods: Sequence[Pod], waiting: set[str], settings: AdjusterSettings, now: datetime) -> Optional[str]:
    """Why the new placeholders wait this pass (a burst still arriving), or None. Times are from the pods' own
    timestamps (whole seconds), so a pass decides as `adjuster plan` would at that moment."""
    waits = {piece.pod: piece.waiting_seconds for piece in plan.pieces}
    asked = {pod for ph in existing for pod in ph.pods}
    new = [waits.get(pod) for planned in create for pod in planned.placeholder.pods if pod not in asked]
    known = [w for w in new if w is not None]
    if not new or len(known) < len(new) or max(known) >= batch.max_seconds:
        return None
    unseen, youngest = arrivals(pods, waiting, settings, now, batch.max_seconds)
    if unseen:
        return (f"a burst is still arriving ({unseen} GPU-sharing pods not looked at by {settings.scheduler_name} yet): new "
                f"placeholders wait for them, at most {batch.max_seconds:g} s")
    if youngest is not None and youngest < batch.idle_seconds:
        return (f"a burst is still arriving (a GPU-sharing pod was created {max(youngest, 0):.1f} s ago): new placeholders wait "
                f"until none has been for {batch.idle_seconds:g} s, at most {batch.max_seconds:g} s")
    return None


def arrivals(pods: Sequence[Pod], waiting: set[str], settings: AdjusterSettings, now: datetime, within: float) -> tuple[int, Optional[float]]:
    """Of the scheduler's `waiting` GPU-sharing pods (`waiting_pod_keys`) created less than `within` seconds ago: how
    many it has not looked at yet (no PodScheduled condition), and the age of the youngest."""
    unseen, youngest = 0, None
    for pod in pods:
        if pod.key not in waiting or pod.scheduler_name != settings.scheduler_name or not asks_for_share(pod.meta.annotations):
            continue
        created = pod.meta.created_at
        age = (now - created).total_seconds() if created is not None else None
        if age is None or age >= within:
            continue
        youngest = age if youngest is None else min(youngest, age)
        if pod_fact(pod, scheduled_condition) is None:
            unseen += 1
    return unseen, youngest
