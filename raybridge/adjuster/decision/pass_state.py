"""What one pass of the adjuster's decision has decided so far: `PassState`, shared by its steps.

Split from reconcile.py, whose steps (`brought_up.py`'s crediting, the placing on pending placeholders, the new
placeholders) each read the pass's snapshot through it and add their deletions, keeps and covered pods to it. Pure:
plain data, no clock, no I/O. What it deliberately does not do: decide anything itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Optional, Sequence

from raybridge.adjuster.decision.demand import ClusterSnapshot, DemandPiece, demand_in
from raybridge.adjuster.decision.placeholders import DELETE_FINISHED, FINISHED, PROVIDED, TERMINATING, ExistingPlaceholder
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.core.views import Node, Pod


@dataclass
class PassState:
    """What one pass has decided so far; each step (brought_up.py's, then reconcile.py's) adds to it."""

    #: The pass's pods (without the placeholders), nodes and PodGroups, read once for every demand this pass asks for.
    snapshot: ClusterSnapshot
    existing: Sequence[ExistingPlaceholder]
    settings: AdjusterSettings
    provision_timeout_seconds: float
    waiting: set[str]
    delete: list[tuple[str, str]] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)
    provided_gpus: int = 0
    pending_gpus: int = 0

    @property
    def uncapped(self) -> AdjusterSettings:
        return replace(self.settings, max_total_gpus=None)

    @property
    def pods(self) -> list[Pod]:
        return self.snapshot.pods

    @property
    def nodes(self) -> Optional[list[Node]]:
        return self.snapshot.nodes

    @property
    def now(self) -> datetime:
        return self.snapshot.now

    def demand(self, pods: Sequence[Pod]) -> Sequence[DemandPiece]:
        """The demand pieces of `pods`, without the cap (what capacity already brought up holds is not capped)."""
        return demand_in(self.snapshot, self.uncapped, pods).pieces


def by_state(state: PassState) -> tuple[list[ExistingPlaceholder], list[ExistingPlaceholder]]:
    """(pending, provided) placeholders, by name; finished ones are deleted, terminating ones ignored."""
    pending: list[ExistingPlaceholder] = []
    provided: list[ExistingPlaceholder] = []
    for ph in sorted(state.existing, key=lambda p: p.name):
        if ph.state == TERMINATING:
            continue
        if ph.state == FINISHED:
            state.delete.append((ph.name, DELETE_FINISHED))
        elif ph.state == PROVIDED:
            provided.append(ph)
        else:
            pending.append(ph)
    return pending, provided
