"""KAI-Scheduler's fair-share division, reproduced exactly, with notes where it surprises.

Why this exists: an admin who sets up KAI queues wants to know what each queue
will get before the scheduler decides, and a user whose pod waits wants the
number the scheduler compares against. This module computes the fair share the
way KAI's proportion plugin does (`pkg/scheduler/plugins/proportion`:
`resource_division/resource_division.go`, `resource_share/resource_share.go`,
`proportion.go`), not a tidier version of it:

* Per resource (cpu, memory, gpu), independently, and level by level: the
  top-level queues divide the capacity, then each queue's fair share is what its
  children divide (`setFairShareForQueues`).
* Deserved phase: every queue, whatever its priority, gets
  `min(quota, requestable)`, where requestable is the request capped by the
  limit unless the limit is -1, and quota -1 means the whole amount being
  divided. Capacity does not cap these grants (oversubscription is granted in
  full; what is left is clipped to 0).
* Over-quota phase, by priority (higher first): rounds in which each unsatisfied
  queue with a weight above 0 is offered `left * weight / sum of weights`; a
  queue that wants no more than that gets what it wants, otherwise the offer
  floored to a whole unit, its fraction remembered. What a priority level leaves
  goes to the next lower level in the same pass.
* Remainder: whatever is left goes one unit (or the last fraction) at a time,
  priority by priority, to queues with a remembered fraction, largest fraction
  first, then oldest creationTimestamp, then name; request and limit are not
  checked again.

Float arithmetic, deliberately: KAI computes in Go float64, and its results
depend on it: shares are floored on floats, the loops stop on exact `== 0`
tests of what is left, the remainder goes by comparing remembered float
fractions (where ties fall to creation time and name), and KAI's own tests
assert float results such as 32.54999999999996. Python's float is the same IEEE
754 binary64 type with the same round-to-nearest arithmetic, so every
operation here is written in KAI's order and gives bit-identical results.
Exact rationals (Fraction, Decimal) would be tidier and would disagree with the
scheduler exactly where a user is puzzled. Two departures remain: Go walks its
maps in random order, so where KAI sums or hands out over a map we go by queue
name (this changes results only in the last bit, with fractional amounts, where
KAI itself differs from run to run); and Go fuses `a + k*(b-c)` into one FMA
instruction on arm64, which with historical usage and k > 0 can differ from
amd64 (and from us) in the last bit.

Units: queues state cpu in millicores, memory in megabytes (10^6 bytes) and gpu
in devices. Capacity, requests and usage come in as `Amounts` in KAI's internal
units (millicores, bytes, devices), and queue memory terms are turned into
bytes as KAI does (`max(-1, mb * 1e6)`). Results are reported in the queue's
units.

What it deliberately does not do: read anything (the capacity, requests and
historical usage are handed in; see `raybridge.queues.fairshare` for the
cluster side), decide allocation or reclaim, or validate Queue objects (see
`raybridge.kai.queue`). Queues whose parent is missing are left out, with
their subtrees, as KAI does (`cleanQueueOrphans`), and reported in `dropped`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Optional, Sequence

#: KAI's `AllResources` order, and the names the result uses.
RESOURCES: tuple[str, ...] = ("cpu", "memory", "gpu")
#: quota -1: the whole amount being divided; limit -1: no limit.
UNLIMITED = -1.0
#: `spec.priority` when unset (`constants.DefaultQueuePriority`).
DEFAULT_PRIORITY = 100
#: The plugin's default kValue (`proportion.go` New); with zero usage it has no effect.
DEFAULT_K_VALUE = 1.0
#: Queue memory is in MB (10^6 bytes); KAI multiplies by this (`mebibytes`, sic).
BYTES_PER_MB = 1000 * 1000
#: Go's zero time, which sorts before every real creationTimestamp.
_ZERO_TIME = datetime.min.replace(tzinfo=timezone.utc)


# --- inputs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Amounts:
    """One amount per resource in KAI's internal units: millicores, bytes, devices."""

    cpu: float = 0.0
    memory: float = 0.0
    gpu: float = 0.0

    def get(self, resource: str) -> float:
        return float(getattr(self, resource))

    def plus(self, other: "Amounts") -> "Amounts":
        return Amounts(self.cpu + other.cpu, self.memory + other.memory, self.gpu + other.gpu)

    @staticmethod
    def unbounded() -> "Amounts":
        return Amounts(math.inf, math.inf, math.inf)


@dataclass(frozen=True)
class ResourceTerms:
    """A queue's terms for one resource, in the queue's units (CRD: all three default to 0)."""

    quota: float = 0.0
    limit: float = 0.0
    over_quota_weight: float = 0.0


@dataclass(frozen=True)
class QueueSpec:
    """One KAI Queue as the division sees it."""

    name: str
    parent: Optional[str] = None
    priority: int = DEFAULT_PRIORITY
    #: metadata.creationTimestamp; None sorts first, like Go's zero time.
    created: Optional[datetime] = None
    cpu: ResourceTerms = ResourceTerms()
    memory: ResourceTerms = ResourceTerms()
    gpu: ResourceTerms = ResourceTerms()

    def terms(self, resource: str) -> ResourceTerms:
        return getattr(self, resource)


def kai_terms(queue: QueueSpec, resource: str) -> tuple[float, float, float]:
    """(deserved, maxAllowed, overQuotaWeight) in KAI units (`createQueueResourceAttrs`)."""
    terms = queue.terms(resource)
    quota, limit, weight = float(terms.quota), float(terms.limit), float(terms.over_quota_weight)
    if resource == "memory":
        quota = max(UNLIMITED, quota * float(BYTES_PER_MB))
        limit = max(UNLIMITED, limit * float(BYTES_PER_MB))
    return quota, limit, weight


def to_queue_units(resource: str, amount: float) -> float:
    """A KAI-internal amount in the queue's units (memory: bytes -> MB)."""
    if resource == "memory" and amount != UNLIMITED:
        return amount / BYTES_PER_MB
    return amount


def requestable(request: float, max_allowed: float) -> float:
    """`GetRequestableShare`: the request, capped by the limit unless the limit is -1."""
    if max_allowed == UNLIMITED:
        return request
    return min(max_allowed, request)


# --- one level, one resource ---------------------------------------------------------------


@dataclass(frozen=True)
class DivisionEntry:
    """A queue at one level, for one resource, in KAI units."""

    name: str
    deserved: float
    max_allowed: float
    weight: float
    request: float
    priority: int = 0
    created: Optional[datetime] = None
    #: Historical usage normalised to the capacity (0 when KAI has no usage database).
    usage: float = 0.0


@dataclass(frozen=True)
class Division:
    """The outcome of dividing one resource among the queues of one level."""

    fair_share: Mapping[str, float]
    #: What each queue got in the deserved phase.
    deserved_share: Mapping[str, float]
    #: What was left unassigned (KAI's `setResourceShare` return value).
    remaining: float


@dataclass
class _Fraction:
    entry: DivisionEntry
    amount: float


def divide_resource(total: float, entries: Sequence[DivisionEntry], k_value: float = 0.0) -> Division:
    """KAI's `setResourceShare` for one level: deserved phase, then over quota."""
    ordered = sorted(entries, key=lambda e: e.name)
    share = {e.name: 0.0 for e in ordered}
    remaining = _set_deserved(total, ordered, share)
    deserved = dict(share)
    if remaining > 0:
        remaining = _divide_over_quota(remaining, k_value, ordered, share)
    else:
        remaining = 0.0
    return Division(fair_share=share, deserved_share=deserved, remaining=remaining)


def _set_deserved(total: float, entries: Sequence[DivisionEntry], share: dict[str, float]) -> float:
    remaining = total
    for entry in entries:
        deserved = total if entry.deserved == UNLIMITED else entry.deserved
        amount = min(deserved, requestable(entry.request, entry.max_allowed))
        share[entry.name] += amount
        remaining -= amount
    return remaining


def _divide_over_quota(total: float, k_value: float, entries: Sequence[DivisionEntry], share: dict[str, float]) -> float:
    priorities = sorted({e.priority for e in entries}, reverse=True)
    fractions: dict[int, dict[str, _Fraction]] = {}
    remaining = total
    for priority in priorities:
        level = [e for e in entries if e.priority == priority]
        remaining, found = _divide_up_to_fair_share(remaining, k_value, level, share)
        fractions.setdefault(priority, {}).update(found)
    for priority in priorities:
        if remaining <= 0:
            break
        if fractions.get(priority):
            remaining = _divide_remainder(remaining, fractions[priority], share)
    return remaining


def _satisfied(entry: DivisionEntry, share: dict[str, float]) -> bool:
    """`isQueueSatisfied`: the request (not the requestable) or the limit is reached."""
    if entry.request <= share[entry.name]:
        return True
    return entry.max_allowed != UNLIMITED and entry.max_allowed <= share[entry.name]


def _remaining_request(entry: DivisionEntry, share: dict[str, float]) -> float:
    wanted = requestable(entry.request, entry.max_allowed)
    have = share[entry.name]
    return 0.0 if wanted < have else wanted - have


def _share_weights(entries: Sequence[DivisionEntry], share: dict[str, float], k_value: float) -> tuple[dict[str, float], float]:
    """`calcShareWeights`: weights normalised over the unsatisfied, adjusted by usage."""
    total_weight = 0.0
    for entry in entries:
        if _remaining_request(entry, share) > 0:
            total_weight += entry.weight
    if total_weight == 0:
        return {}, 0.0
    weights: dict[str, float] = {}
    weight_sum = 0.0
    for entry in entries:
        if _satisfied(entry, share):
            continue
        normalised = entry.weight / total_weight
        weight = max(0.0, normalised + k_value * (normalised - entry.usage))
        weights[entry.name] = weight
        weight_sum += weight
    return weights, weight_sum


def _divide_up_to_fair_share(
    total: float, k_value: float, entries: Sequence[DivisionEntry], share: dict[str, float]
) -> tuple[float, dict[str, _Fraction]]:
    """`divideUpToFairShare`: rounds of weighted offers within one priority level."""
    fractions: dict[str, _Fraction] = {}
    while True:
        another_round = False
        to_give = total
        weights, weight_sum = _share_weights(entries, share, k_value)
        if weight_sum == 0:
            break
        for entry in entries:
            if total == 0:
                break
            if _satisfied(entry, share):
                continue
            wanted = _remaining_request(entry, share)
            if entry.weight == 0:
                continue
            offer = to_give * (weights.get(entry.name, 0.0) / weight_sum)
            given = _amount_to_give(offer, wanted, entry, fractions)
            if given == 0:
                continue
            share[entry.name] += given
            total -= given
            another_round = another_round or wanted < offer
        if not another_round or total == 0:
            break
    return total, fractions


def _amount_to_give(offer: float, wanted: float, entry: DivisionEntry, fractions: dict[str, _Fraction]) -> float:
    """`getResourceToGiveInCurrentRound`: all that is wanted, else the offer floored."""
    given = 0.0
    if wanted <= offer:
        given = wanted
        fractions.pop(entry.name, None)
    else:
        whole = float(math.floor(offer))
        if whole > 0:
            given = whole
        if offer - given > 0:
            fractions[entry.name] = _Fraction(entry, offer - given)
    return given


def _divide_remainder(total: float, fractions: Mapping[str, _Fraction], share: dict[str, float]) -> float:
    """`divideRemainingResource`: one unit at a time, largest fraction, oldest, then name."""
    order = sorted(
        fractions.values(),
        key=lambda f: (-f.amount, f.entry.created or _ZERO_TIME, f.entry.name),
    )
    for fraction in order:
        if total == 0:
            break
        given = min(1.0, total)
        share[fraction.entry.name] += given
        total -= given
    return total


# --- the hierarchy ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceShare:
    """One queue's share of one resource, in the queue's units."""

    quota: float
    limit: float
    over_quota_weight: float
    #: What the queue and its descendants request (None: not given, taken as unbounded).
    request: Optional[float]
    #: Granted in the deserved phase: min(quota, request capped by limit).
    deserved: float
    fair_share: float

    @property
    def over_quota(self) -> float:
        return self.fair_share - self.deserved

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "quota": number(self.quota),
            "limit": number(self.limit),
            "overQuotaWeight": number(self.over_quota_weight),
        }
        if self.request is not None:
            data["request"] = number(self.request)
        data["deserved"] = number(self.deserved)
        data["overQuota"] = number(self.over_quota)
        data["fairShare"] = number(self.fair_share)
        return data


@dataclass(frozen=True)
class QueueShare:
    name: str
    parent: Optional[str]
    priority: int
    children: tuple[str, ...]
    cpu: ResourceShare
    memory: ResourceShare
    gpu: ResourceShare

    def resource(self, resource: str) -> ResourceShare:
        return getattr(self, resource)


@dataclass(frozen=True)
class FairShareNote:
    """Where KAI's number is arguably wrong or surprising, and why."""

    queue: str
    resource: str
    kind: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"queue": self.queue, "resource": self.resource, "kind": self.kind, "message": self.message}


@dataclass(frozen=True)
class FairShareResult:
    #: Every computed queue, parents before children, siblings by name.
    queues: tuple[QueueShare, ...]
    #: What the top level divided, in queue units.
    capacity: Mapping[str, float]
    #: Per parent ("" for the top level): what its division left unassigned, in queue units.
    unassigned: Mapping[str, Mapping[str, float]]
    notes: tuple[FairShareNote, ...] = ()
    #: Queues KAI leaves out (name, reason): a missing parent, or a parent cycle.
    dropped: tuple[tuple[str, str], ...] = ()
    demand_given: bool = True

    def queue(self, name: str) -> QueueShare:
        for queue in self.queues:
            if queue.name == name:
                return queue
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "queues": {
                q.name: {r: q.resource(r).to_dict() for r in ("gpu", "cpu", "memory")} for q in self.queues
            },
            "hierarchy": {
                q.name: {"parent": q.parent, "priority": q.priority, "children": list(q.children)} for q in self.queues
            },
            "capacity": {r: number(self.capacity[r]) for r in ("gpu", "cpu", "memory")},
            "unassigned": {
                parent or "<top>": {r: number(v[r]) for r in ("gpu", "cpu", "memory")}
                for parent, v in self.unassigned.items()
            },
            "units": {"gpu": "devices", "cpu": "millicores", "memory": "MB (10^6 bytes)"},
            "demand": "given" if self.demand_given else "none given: every queue taken to want without bound",
            "notes": [n.to_dict() for n in self.notes],
            "dropped": [{"queue": name, "reason": reason} for name, reason in self.dropped],
        }


def number(value: float) -> Any:
    """An int when the float is a whole number (16, not 16.0), else the float."""
    if isinstance(value, float) and math.isfinite(value) and value == math.floor(value) and abs(value) < 2**53:
        return int(value)
    return value


def hierarchy_problems(queues: Sequence[QueueSpec]) -> list[str]:
    """Duplicate names, missing parents and parent cycles, one sentence each."""
    problems: list[str] = []
    names: dict[str, int] = {}
    for queue in queues:
        names[queue.name] = names.get(queue.name, 0) + 1
    for name, count in names.items():
        if count > 1:
            problems.append(f"queue {name} is defined {count} times")
    by_name = {q.name: q for q in queues}
    for queue in queues:
        if queue.parent and queue.parent not in by_name:
            problems.append(
                f"queue {queue.name}: parentQueue {queue.parent} does not exist "
                "(KAI would leave this queue and its children out)"
            )
    for cycle in _cycles(by_name):
        problems.append(f"queues {' -> '.join(cycle + [cycle[0]])} form a parent cycle")
    return problems


def _cycles(by_name: Mapping[str, QueueSpec]) -> list[list[str]]:
    cycles: list[list[str]] = []
    seen: set[str] = set()
    for start in sorted(by_name):
        path: list[str] = []
        current: Optional[str] = start
        while current is not None and current in by_name and current not in seen and current not in path:
            path.append(current)
            current = by_name[current].parent
        if current is not None and current in path:
            cycles.append(path[path.index(current) :])
        seen.update(path)
    return cycles


def divide_fair_share(
    queues: Sequence[QueueSpec],
    capacity: Amounts,
    requests: Optional[Mapping[str, Amounts]] = None,
    *,
    usage: Optional[Mapping[str, Amounts]] = None,
    k_value: float = DEFAULT_K_VALUE,
) -> FairShareResult:
    """Every queue's fair share per resource, as KAI's proportion plugin computes it.

    `capacity`: what the top level divides (KAI: allocatable of Ready nodes, less
    pods of other schedulers). `requests`: each queue's own pending and allocated
    requests (leaf queues, normally); they are added up the hierarchy as KAI
    does. None means every queue wants without bound. `usage`: historical usage
    per queue, normalised to the capacity (KAI's usage database); absent means 0.
    `k_value`: the plugin's kValue.
    """
    _require_unique_names(queues)
    by_name = {q.name: q for q in queues}
    dropped = _dropped(by_name)
    live = {name: q for name, q in by_name.items() if name not in dict(dropped)}
    walk = _Walk(
        live=live,
        children=_children_by_name(live),
        total_request=_propagate(live, requests),
        usage=usage or {},
        k_value=k_value,
        shares={name: {} for name in live},
        deserved={name: {} for name in live},
    )
    order = _divide_top_down(walk, capacity)
    result = FairShareResult(
        queues=tuple(_queue_share(walk, name, requests) for name in order),
        capacity={r: to_queue_units(r, capacity.get(r)) for r in RESOURCES},
        unassigned={p: {r: to_queue_units(r, v[r]) for r in RESOURCES} for p, v in walk.unassigned.items()},
        dropped=dropped + _cycle_members(live, order),
        demand_given=requests is not None,
    )
    return replace(result, notes=tuple(surprises(result)))


@dataclass
class _Walk:
    """What the level-by-level division shares: the live queues and what each level gave them."""

    live: Mapping[str, QueueSpec]
    children: Mapping[str, list[str]]
    #: Each queue's request plus its descendants', in KAI units.
    total_request: Mapping[str, Amounts]
    usage: Mapping[str, Amounts]
    k_value: float
    #: Per queue, per resource: the fair share and the deserved-phase grant, in KAI units.
    shares: dict[str, dict[str, float]]
    deserved: dict[str, dict[str, float]]
    #: Per parent ("" for the top level), per resource: what its division left, in KAI units.
    unassigned: dict[str, dict[str, float]] = field(default_factory=dict)


def _require_unique_names(queues: Sequence[QueueSpec]) -> None:
    """A queue name defined twice is bad input, not something to divide."""
    names = [q.name for q in queues]
    if len(set(names)) != len(names):
        raise ValueError("queue names must be unique: " + "; ".join(hierarchy_problems(queues)))


def _children_by_name(live: Mapping[str, QueueSpec]) -> dict[str, list[str]]:
    """Each live queue's children, by name."""
    children: dict[str, list[str]] = {name: [] for name in live}
    for name, queue in sorted(live.items()):
        if queue.parent:
            children[queue.parent].append(name)
    return children


def _divide_top_down(walk: _Walk, capacity: Amounts) -> list[str]:
    """Divide level by level; returns the queues reached, parents before children.

    Depth first, siblings by name, parents before children; a stack, not recursion, so a
    hierarchy of any depth costs time in proportion to its size.
    """
    order: list[str] = []
    top = sorted(name for name, q in walk.live.items() if not q.parent)
    pending: list[tuple[str, str]] = [("level", "")]
    level_totals: dict[str, Mapping[str, float]] = {"": {r: capacity.get(r) for r in RESOURCES}}
    level_members: dict[str, list[str]] = {"": top}
    while pending:
        what, name = pending.pop()
        if what == "queue":
            order.append(name)
            level_members[name], level_totals[name] = walk.children[name], walk.shares[name]
            pending.append(("level", name))
            continue
        members = level_members[name]
        if members:
            _divide_level(walk, name, members, level_totals[name])
            pending.extend(("queue", child) for child in sorted(members, reverse=True))
    return order


def _divide_level(walk: _Walk, parent: str, members: list[str], totals: Mapping[str, float]) -> None:
    """Divide what `parent` has among its `members`, one resource at a time."""
    left: dict[str, float] = {}
    for resource in RESOURCES:
        entries = [_division_entry(walk, name, resource) for name in members]
        division = divide_resource(totals[resource], entries, walk.k_value)
        left[resource] = division.remaining
        for name in members:
            walk.shares[name][resource] = division.fair_share[name]
            walk.deserved[name][resource] = division.deserved_share[name]
    walk.unassigned[parent] = left


def _division_entry(walk: _Walk, name: str, resource: str) -> DivisionEntry:
    """One queue's terms, request and usage for one resource, in KAI units."""
    queue = walk.live[name]
    quota, limit, weight = kai_terms(queue, resource)
    return DivisionEntry(
        name=name,
        deserved=quota,
        max_allowed=limit,
        weight=weight,
        request=walk.total_request[name].get(resource),
        priority=queue.priority,
        created=queue.created,
        usage=walk.usage.get(name, Amounts()).get(resource),
    )


def _queue_share(walk: _Walk, name: str, requests: Optional[Mapping[str, Amounts]]) -> QueueShare:
    """One computed queue's result, in the queue's units."""
    queue = walk.live[name]
    return QueueShare(
        name=name,
        parent=queue.parent or None,
        priority=queue.priority,
        children=tuple(walk.children[name]),
        **{
            r: _resource_share(queue, r, requests, walk.total_request[name], walk.deserved[name], walk.shares[name])
            for r in RESOURCES
        },
    )


def _cycle_members(live: Mapping[str, QueueSpec], reached: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """Live queues no top-level queue reaches: their parents form a cycle."""
    reached_set = set(reached)
    members = [n for n in live if n not in reached_set]
    return tuple((n, "its parents form a cycle, so no top-level queue reaches it") for n in sorted(members))


def _dropped(by_name: Mapping[str, QueueSpec]) -> tuple[tuple[str, str], ...]:
    """Orphans and their subtrees, as `cleanQueueOrphans` deletes them."""
    dropped: dict[str, str] = {}
    for name, queue in sorted(by_name.items()):
        if queue.parent and queue.parent not in by_name:
            dropped[name] = f"parentQueue {queue.parent} does not exist"
    changed = True
    while changed:
        changed = False
        for name, queue in sorted(by_name.items()):
            if name not in dropped and queue.parent in dropped:
                dropped[name] = f"its parent {queue.parent} is left out"
                changed = True
    return tuple(sorted(dropped.items()))


def _propagate(live: Mapping[str, QueueSpec], requests: Optional[Mapping[str, Amounts]]) -> dict[str, Amounts]:
    """Each queue's request plus its descendants' (`updateQueuesResourceUsageFor*Job`)."""
    if requests is None:
        return {name: Amounts.unbounded() for name in live}
    total = {name: Amounts() for name in live}
    for name in sorted(requests):
        if name not in live:
            continue  # KAI ignores jobs of queues it does not know
        current: Optional[str] = name
        visited: set[str] = set()
        while current is not None and current in live and current not in visited:
            visited.add(current)
            total[current] = total[current].plus(requests[name])
            current = live[current].parent or None
    return total


def _resource_share(
    queue: QueueSpec,
    resource: str,
    requests: Optional[Mapping[str, Amounts]],
    request: Amounts,
    deserved: Mapping[str, float],
    shares: Mapping[str, float],
) -> ResourceShare:
    terms = queue.terms(resource)
    return ResourceShare(
        quota=float(terms.quota),
        limit=float(terms.limit),
        over_quota_weight=float(terms.over_quota_weight),
        request=None if requests is None else to_queue_units(resource, request.get(resource)),
        deserved=to_queue_units(resource, deserved[resource]),
        fair_share=to_queue_units(resource, shares[resource]),
    )


# --- notes ----------------------------------------------------------------------------------


def surprises(result: FairShareResult) -> Iterable[FairShareNote]:
    """Notes for the numbers KAI computes that an admin would not expect."""
    by_name = {q.name: q for q in result.queues}
    levels: dict[str, list[QueueShare]] = {}
    for queue in result.queues:
        levels.setdefault(queue.parent or "", []).append(queue)
    for resource in RESOURCES:
        for queue in result.queues:
            yield from _queue_notes(queue, resource)
        for parent, members in sorted(levels.items()):
            available = result.capacity[resource] if not parent else by_name[parent].resource(resource).fair_share
            yield from _oversubscribed_note(parent, members, resource, available)
            left = result.unassigned.get(parent, {}).get(resource, 0.0)
            yield from _unassigned_note(parent, members, resource, left)
            yield from _priority_inversion_notes(members, resource)


def _queue_notes(queue: QueueShare, resource: str) -> Iterable[FairShareNote]:
    """One queue's own surprises: a limit of 0 that cancels its quota, a share above its request or limit."""
    unit = _UNITS[resource]
    share = queue.resource(resource)
    fair = share.fair_share
    if share.limit == 0 and share.quota != 0:
        quota = "unlimited quota" if share.quota == UNLIMITED else f"quota of {_fmt(share.quota)} {unit}"
        yield FairShareNote(
            queue.name, resource, "limit-zero",
            f"limit is 0 (unset): KAI caps what the queue may request at 0, so even its {quota} "
            "is not granted; set limit: -1 for no limit",
        )  # fmt: skip
    if share.request is not None and fair > share.request and not _close(fair, share.request):
        yield FairShareNote(
            queue.name, resource, "above-request",
            f"fair share {_fmt(fair)} {unit} is above the request of {_fmt(share.request)}: KAI hands out "
            "the rounding remainder one unit at a time without checking the request again",
        )  # fmt: skip
    if share.limit not in (UNLIMITED, 0) and fair > share.limit and not _close(fair, share.limit):
        yield FairShareNote(
            queue.name, resource, "above-limit",
            f"fair share {_fmt(fair)} {unit} is above the limit of {_fmt(share.limit)}: KAI hands out the "
            "rounding remainder one unit at a time without checking the limit again",
        )  # fmt: skip


def _where(parent: str) -> str:
    return "the capacity" if not parent else f"the fair share of their parent {parent}"


def _oversubscribed_note(
    parent: str, members: Sequence[QueueShare], resource: str, available: float
) -> Iterable[FairShareNote]:
    """Siblings whose fair shares add up to more than their level divided."""
    unit = _UNITS[resource]
    total = sum(m.resource(resource).fair_share for m in members)
    where = _where(parent)
    if total > available and not _close(total, available):
        if not parent:
            what = f"fair shares of the top-level queues add up to {_fmt(total)} {unit}, more than {where} ({_fmt(available)})"
        else:
            what = f"children of {parent} get {_fmt(total)} {unit} together, more than {where} ({_fmt(available)})"
        yield FairShareNote(
            parent or "<top>", resource, "oversubscribed",
            what + ": KAI grants each queue's deserved quota in full even when the quotas oversubscribe "
            "what is divided",
        )  # fmt: skip


def _unassigned_note(parent: str, members: Sequence[QueueShare], resource: str, left: float) -> Iterable[FairShareNote]:
    """What a level leaves unassigned while some of its queues still want more."""
    unit = _UNITS[resource]
    wanting = [m for m in members if _wants_more(m.resource(resource))]
    if left > 0 and not _close(left, 0.0) and wanting:
        zero = [m.name for m in wanting if m.resource(resource).over_quota_weight == 0]
        why = (
            f"over-quota weight 0 ({', '.join(zero)}) gets nothing beyond quota"
            if zero
            else "each round's share is floored to whole units"
        )
        yield FairShareNote(
            parent or "<top>", resource, "unassigned",
            f"{_fmt(left)} {unit} of {_where(parent)} stay unassigned although "
            f"{', '.join(m.name for m in wanting)} want more: {why}",
        )  # fmt: skip


def _priority_inversion_notes(members: Sequence[QueueShare], resource: str) -> Iterable[FairShareNote]:
    """Queues that get more than quota while higher-priority siblings still want more."""
    unit = _UNITS[resource]
    for low in members:
        low_share = low.resource(resource)
        if low_share.over_quota <= 0 or _close(low_share.over_quota, 0.0):
            continue
        starved = [
            m.name for m in members
            if m.priority > low.priority and _wants_more(m.resource(resource))
            and m.resource(resource).over_quota_weight > 0
        ]  # fmt: skip
        if starved:
            yield FairShareNote(
                low.name, resource, "priority-inversion",
                f"gets {_fmt(low_share.over_quota)} {unit} over quota although higher-priority "
                f"{', '.join(starved)} want more: KAI passes what a priority level leaves (whole-unit flooring, "
                "or weights zeroed by historical usage) to lower priorities before it hands out the remainders",
            )  # fmt: skip


_UNITS = {"gpu": "GPUs", "cpu": "millicores", "memory": "MB"}


def _wants_more(share: ResourceShare) -> bool:
    wanted = math.inf if share.request is None else share.request
    if share.limit != UNLIMITED:
        wanted = min(wanted, share.limit)
    return wanted > share.fair_share and not _close(wanted, share.fair_share)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _fmt(value: float) -> str:
    shown = number(value)
    if isinstance(shown, float):
        return f"{shown:.3f}".rstrip("0").rstrip(".")
    return str(shown)
