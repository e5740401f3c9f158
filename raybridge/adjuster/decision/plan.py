"""The node-scale-adjuster's decision: pending fractional-GPU pods in, placeholder GPUs out.

`plan_placeholders(pods, nodes, settings, now)` is the one function both
`adjuster plan` (offline, from files) and the in-cluster controller call. With
the default policy it selects the demand (`adjuster/decision/demand.py`), packs each
constraint group exactly (`adjuster/decision/packing.py`), checks that a scheduler placing
the pods one by one (oldest first, best fit) finds room in what was packed and
adds GPUs where it would not, and then takes that scheduler's placement as the
plan: one placeholder per node it uses (never more GPUs than one node has),
holding exactly the pods it places there and only the GPUs they land on, so
that each pod stands in one placeholder. Then it applies the cap (trimming the
placeholder that does not fit whole rather than dropping it). With
`policy="kai"` it reports what one pass of KAI's own node-scale-adjuster would
do (`kai/node_scale_adjuster.py`). Either way a pod listed twice counts once, with a
warning (`core/pod_identity.py`, the rule `discover` uses too).

Pure: plain dicts in, frozen dataclasses out, `to_dict()` in camelCase for
JSON and YAML. It does not create, delete or remember placeholders; comparing
the plan with what exists is the controller's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from fractions import Fraction
from typing import Any, Iterable, Mapping, Optional, Sequence

from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.demand import (
    ConstraintGroup,
    DemandPiece,
    GroupShape,
    ClusterSnapshot,
    IgnoredPod,
    demand_in,
)
from raybridge.adjuster.decision.host_spread import HostSpread
from raybridge.adjuster.decision.packing import PackedNode, PackItem, Resources, pack
from raybridge.adjuster.decision.scheduled_placement import scheduled_placement
from raybridge.core.inventory import format_milli, inventory_from_nodes, named_nodes, node_gpus_by_vendor
from raybridge.core.node_index import NodeIndex, bits_of, positions_of
from raybridge.core.pod_identity import first_listings
from raybridge.core.views import Node, Pod
from raybridge.core.quantity import format_fraction, fraction_number

__all__ = [
    "AdjusterPlan",
    "CapReport",
    "GroupPlan",
    "Placeholder",
    "plan_in",
    "plan_placeholders",
]


#: Where a group's node size comes from when no node of it is known and no --node-gpus is given.
NODE_SIZE_GUESSED = "largest pod"


@dataclass(frozen=True)
class Placeholder:
    """One placeholder pod: `gpus` whole GPUs of the group's vendor, on one node of the group."""

    gpus: int
    resource_key: str
    pods: tuple[str, ...]
    node_selector: Mapping[str, Any] = field(default_factory=dict)
    affinity: Optional[Mapping[str, Any]] = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    group: Optional[str] = None
    #: KAI policy: the scaling pod's name, and whether it exists already.
    name: Optional[str] = None
    existing: bool = False
    #: What its pods request of a node besides GPUs, summed (thousandths of each unit): recorded on the
    #: placeholder as the room its node must have.
    resources: Resources = ()
    #: Its pods must not share a host with others of their kind (host_spread.py): no two of the group's
    #: placeholders on one node.
    keep_apart: bool = False
    #: Hostnames of the nodes it must not land on (one that keeps apart): where placeholders of its group landed and
    #: where pods of its pods' kind run.
    avoid_nodes: tuple[str, ...] = ()
    #: Where it keeps apart: what makes a pod of its pods' kind, whose anti-affinity terms against that kind the
    #: placeholder leaves out (scale_adjuster.placeholder_manifest). Not in `to_dict`: `affinity` is the group's.
    kind: Optional[HostSpread] = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.name is not None:
            data["name"] = self.name
        data.update(
            {
                "gpus": self.gpus,
                "resourceKey": self.resource_key,
                "group": self.group,
                "nodeSelector": dict(self.node_selector),
                "affinity": self.affinity,
                "tolerations": [dict(t) for t in self.tolerations],
                "resources": {name: format_milli(name, amount) for name, amount in self.resources},
                "pods": list(self.pods),
            }
        )
        if self.avoid_nodes:
            data["avoidNodes"] = list(self.avoid_nodes)
        if self.name is not None:
            data["existing"] = self.existing
        return data


@dataclass(frozen=True)
class GroupPlan:
    """One constraint group: its demand, the GPUs it packs into, and how sure that number is."""

    group: ConstraintGroup
    pods: int
    demand: Fraction
    #: What the group asks for: the packing plus what a greedy scheduler needs beyond it (`packed_gpus` <= `gpus`).
    gpus: int
    lower_bound: int
    method: str
    proof: str
    node_gpus: int
    #: Where node_gpus comes from: "nodes", "flag" or "largest pod".
    node_gpus_source: str
    gpu_memory_mib: Optional[int]
    known_nodes: int
    #: The packing's count (`method` and `proof` are about this one).
    packed_gpus: int = 0
    #: What one node of the group has besides GPUs (thousandths), from its known nodes; None where none is known.
    node_resources: Optional[Resources] = None

    @property
    def node_size_known(self) -> bool:
        """Whether `node_gpus` is what a node of the group has (from its nodes or --node-gpus), not a guess from
        its largest pod."""
        return self.node_gpus_source != NODE_SIZE_GUESSED

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.group.to_dict(),
            "pods": self.pods,
            "demand": fraction_number(self.demand),
            "demandExact": format_fraction(self.demand),
            "gpus": self.gpus,
            "packedGpus": self.packed_gpus,
            "lowerBound": self.lower_bound,
            "method": self.method,
            "proof": self.proof,
            "nodeGpus": self.node_gpus,
            "nodeGpusFrom": self.node_gpus_source,
            "gpuMemoryMiB": self.gpu_memory_mib,
            "knownNodes": self.known_nodes,
        }


@dataclass(frozen=True)
class CapReport:
    """What `--max-gpus` cut: GPUs and pods, and the placeholders it trimmed (kept in part) rather than dropped."""

    limit: int
    requested: int
    cut_gpus: int
    cut_pods: tuple[str, ...]
    #: (group, GPUs planned, GPUs kept) per placeholder kept in part.
    trimmed: tuple[tuple[Optional[str], int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "requested": self.requested,
            "cutGpus": self.cut_gpus,
            "cutPods": list(self.cut_pods),
            "trimmed": [{"group": g, "planned": planned, "kept": kept} for g, planned, kept in self.trimmed],
        }


@dataclass(frozen=True)
class AdjusterPlan:
    policy: str
    total_gpus: int
    placeholders: tuple[Placeholder, ...]
    groups: tuple[GroupPlan, ...] = ()
    ignored: tuple[IgnoredPod, ...] = ()
    #: Annotated pods that are bound or finished, by code.
    skipped: Mapping[str, int] = field(default_factory=dict)
    #: Exact pending demand (Σ fraction × devices of the counted pods) by vendor.
    demand_by_vendor: Mapping[str, Fraction] = field(default_factory=dict)
    pieces: tuple[DemandPiece, ...] = ()
    cap: Optional[CapReport] = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    #: KAI policy: the pass's need, deleted scaling pods and whether the cooldown held it back.
    kai: Optional[Mapping[str, Any]] = None
    #: Per constraints and vendor, the largest GPU memory of their nodes this pass knew (demand.memories_of).
    memories_seen: Mapping[tuple[tuple[str, str, str], str], int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "policy": self.policy,
            "totalGpus": self.total_gpus,
            "placeholders": [p.to_dict() for p in self.placeholders],
            "ignored": [i.to_dict() for i in self.ignored],
            "skipped": dict(self.skipped),
            "demandByVendor": {v: fraction_number(d) for v, d in self.demand_by_vendor.items()},
            "groups": [g.to_dict() for g in self.groups],
            "capped": self.cap.to_dict() if self.cap else None,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }
        if self.kai is not None:
            data["kai"] = dict(self.kai)
        return data


def plan_placeholders(
    pods: Iterable[Any],
    nodes: Optional[Iterable[Any]],
    settings: AdjusterSettings,
    now: datetime,
    pod_groups: Iterable[Any] = (),
    **dra: Any,
) -> AdjusterPlan:
    """What the adjuster asks for now. `nodes` None: node shapes unknown (memory fallback, no device check). `dra`: the
    ResourceSlices, DeviceClasses and ResourceClaims (`slices`, `classes`, `claims` of `ClusterSnapshot.read`).

    The offline plan (`adjuster plan`) also says where waiting pods stand beside free GPUs they may use
    (`free_gpu_notes`); a pass of `adjuster run` (`plan_in`) does not spend the time: nobody reads it there.
    """
    snapshot = ClusterSnapshot.read(pods, nodes, now, pod_groups, **dra)
    plan = plan_in(snapshot, settings)
    if plan.policy != "exact" or snapshot.nodes is None:
        return plan
    by_group: dict[ConstraintGroup, list[DemandPiece]] = {}
    for piece in plan.pieces:
        by_group.setdefault(piece.group, []).append(piece)
    notes = free_gpu_notes(by_group, snapshot.nodes, snapshot.pods)
    return replace(plan, notes=(*plan.notes, *notes)) if notes else plan


def plan_in(snapshot: ClusterSnapshot, settings: AdjusterSettings, pods: Optional[Iterable[Pod]] = None) -> AdjusterPlan:
    """`plan_placeholders` on a pass's snapshot, for its pods or the subset `pods` of them."""
    problems = settings.problems()
    if problems:
        raise ValueError("; ".join(problems))
    pods, repeats = first_listings(snapshot.pods if pods is None else pods)  # a pod listed twice counts once, whichever the policy
    if settings.policy == "kai":
        plan = _plan_kai(pods, settings)
        return replace(plan, warnings=(*repeats, *plan.warnings))
    selection = demand_in(snapshot, settings, pods)
    by_group: dict[ConstraintGroup, list[DemandPiece]] = {}
    for piece in selection.pieces:
        by_group.setdefault(piece.group, []).append(piece)
    so_far = _PlanSoFar()
    for group in sorted(by_group, key=lambda g: (g.vendor, g.id)):
        _plan_group(group, by_group[group], selection.shapes.get(group, GroupShape()), settings, so_far)
    kept, cap = _apply_cap(so_far.placeholders, so_far.waiting, settings.max_total_gpus, so_far.resources_of)
    return AdjusterPlan(
        policy="exact",
        total_gpus=sum(p.gpus for p in kept),
        placeholders=tuple(kept),
        groups=tuple(so_far.groups),
        ignored=selection.ignored,
        skipped=selection.skipped,
        demand_by_vendor=so_far.demand_by_vendor,
        pieces=selection.pieces,
        cap=cap,
        notes=tuple(so_far.notes),
        warnings=(*repeats, *selection.warnings),
        memories_seen=selection.memories,
    )


#: A node younger than this with room left holds the waiting pods that fit it (`reconcile`): the scheduler may not
#: have tried it yet. Room on an older node beside a pod still waiting is room the pod cannot use for a reason the
#: plan does not see.
NEW_NODE_SECONDS = 30.0


def free_gpu_notes(by_group: Mapping[ConstraintGroup, Sequence[DemandPiece]], nodes: Sequence[Node], pods: Sequence[Pod]) -> list[str]:
    """Say where a group's waiting pods stand beside free whole GPUs of a node they may use.

    The plan asks for those pods all the same, as `adjuster run` does: the scheduler marked them
    Unschedulable with that room in sight, so something this model does not see keeps them off it.
    """
    inventory = inventory_from_nodes(nodes, pods)
    free = {n.name: n.free for n in inventory.nodes if n.eligible and n.free}
    if not free:
        return []
    named = list(named_nodes(nodes, []))
    index = NodeIndex([node.meta.labels for node in named], [node.name for node in named], [list(node.taints) for node in named])
    free_nodes = bits_of(i for i, node in enumerate(named) if node.name in free)
    rank = {name: i for i, name in enumerate(free)}  # the notes name the nodes in the inventory's order
    gpus_of: dict[int, dict[str, tuple[int, Optional[int]]]] = {}  # a free node's GPUs, read once for all groups
    notes = []
    for group in sorted(by_group, key=lambda g: (g.vendor, g.id)):
        if group.device_class:
            continue
        admitted = index.admitting(group.node_selector, group.affinity_terms, group.tolerations, group.tolerations_json, among=free_nodes)
        fits = []
        for i in positions_of(admitted):
            gpus = gpus_of.get(i)
            if gpus is None:
                gpus = gpus_of[i] = node_gpus_by_vendor(named[i], [])
            if group.has_gpus_for(named[i], gpus):
                fits.append(named[i].name)
        room = [(name, free[name]) for name in sorted(fits, key=rank.__getitem__)]
        if not room:
            continue
        where = ", ".join(f"{name} ({gpus} free)" for name, gpus in room)
        notes.append(
            f"group {group.id}: its {len(by_group[group])} waiting pod(s) may use the free {group.resource_key} of {where}, "
            "yet the scheduler marked them Unschedulable: the plan asks for them all the same, as `adjuster run` does "
            "(something it does not see keeps them off: a queue's quota, a pod affinity, GPUs held by pods not listed); "
            f"`adjuster run` counts such room instead on a node younger than {NEW_NODE_SECONDS:g} s, which the scheduler may not have tried yet"
        )
    return notes


@dataclass
class _PlanSoFar:
    """What the groups planned so far add up to: each group's step appends to it, in the groups' order."""

    groups: list[GroupPlan] = field(default_factory=list)
    #: Each placeholder with the pods on each of its GPUs (what the cap trims by).
    placeholders: list[tuple[Placeholder, tuple[tuple[str, ...], ...]]] = field(default_factory=list)
    waiting: dict[str, float] = field(default_factory=dict)
    resources_of: dict[str, Resources] = field(default_factory=dict)
    demand_by_vendor: dict[str, Fraction] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _plan_group(
    group: ConstraintGroup, pieces: list[DemandPiece], shape: GroupShape, settings: AdjusterSettings, so_far: _PlanSoFar
) -> None:
    """One constraint group: pack it exactly, take the scheduler's placement of it as its placeholders."""
    node_gpus, source = _node_size(group, pieces, shape, settings, so_far.notes)
    if group.device_class:
        so_far.notes.append(f"group {group.id}: pods whose GPUs come through ResourceClaims of DeviceClass {group.device_class}: "
                            f"a placeholder asks for as many {group.resource_key} (the autoscaler reads no DRA), on nodes that "
                            "publish the class's devices and the device plugin's count")
    if any(p.source == "gpu-memory-fallback" for p in pieces):
        so_far.notes.append(f"group {group.id}: GPU memory of its nodes unknown: gpu-memory pods count as {format_fraction(settings.memory_fallback_fraction)} of a GPU")
    items = [PackItem(p.pod, p.fraction, p.devices, p.resources) for p in pieces]
    # What else a node of the group has room for (CPU, memory, ...): the scheduler places a pod only where
    # its requests fit, and the autoscaler adds a node only for a placeholder that fits a new one.
    room = shape.node_resources
    if room is None and any(p.resources for p in pieces):
        so_far.notes.append(
            f"group {group.id}: no known node of this group, so what one node has of CPU and memory is unknown: "
            "each placeholder carries the requests of the pods it stands for, which a new node may not hold"
        )
    packing = pack(
        items,
        node_gpus,
        exact_max_slices=settings.exact_max_slices,
        budget=settings.search_budget,
    )
    order_keys = [scheduling_order(p) for p in pieces]
    ordered_items = [items[i] for i in sorted(range(len(pieces)), key=order_keys.__getitem__)]
    scheduled = scheduled_placement(packing, ordered_items, node_gpus, room, group.per_node)
    scheduled_gpus = sum(n.gpus for n in scheduled)
    if scheduled_gpus > packing.gpus:
        so_far.notes.append(
            f"group {group.id}: placed one by one, oldest first, best fit, these pods need {scheduled_gpus - packing.gpus} GPU(s) more "
            f"than the packing's {packing.gpus}; the plan asks for them"
        )
    demand = _exact_demand(pieces)
    so_far.demand_by_vendor[group.vendor] = so_far.demand_by_vendor.get(group.vendor, Fraction(0)) + demand
    so_far.groups.append(
        GroupPlan(
            group=group,
            pods=len(pieces),
            demand=demand,
            gpus=scheduled_gpus,
            packed_gpus=packing.gpus,
            lower_bound=packing.lower_bound,
            method=packing.method,
            proof=packing.proof,
            node_gpus=node_gpus,
            node_gpus_source=source,
            gpu_memory_mib=shape.gpu_memory_mib,
            known_nodes=shape.nodes,
            node_resources=room,
        )
    )
    so_far.waiting.update((p.pod, p.waiting_seconds or 0.0) for p in pieces)
    so_far.resources_of.update((p.pod, p.resources) for p in pieces)
    so_far.placeholders.extend(_group_placeholders(group, scheduled, so_far.resources_of))


def _node_size(
    group: ConstraintGroup, pieces: list[DemandPiece], shape: GroupShape, settings: AdjusterSettings, notes: list[str]
) -> tuple[int, str]:
    """The GPUs of one node of the group and where that number comes from: its nodes, the flag, or its largest pod."""
    if shape.node_gpus:
        return shape.node_gpus, "nodes"
    if settings.node_gpus:
        return settings.node_gpus, "flag"
    node_gpus = max(p.devices for p in pieces)
    notes.append(
        f"group {group.id}: no known node of this group, so placeholders are no larger than its largest pod "
        f"({node_gpus} GPUs); pass --nodes or --node-gpus to pack whole nodes"
    )
    return node_gpus, NODE_SIZE_GUESSED


def _exact_demand(pieces: list[DemandPiece]) -> Fraction:
    """Σ fraction × devices of the group's pods, summed by kind so that each distinct fraction is built once."""
    counts: dict[tuple[int, int, int], int] = {}
    for p in pieces:
        key = (p.fraction.numerator, p.fraction.denominator, p.devices)
        counts[key] = counts.get(key, 0) + 1
    return sum((Fraction(num, den) * d * n for (num, den, d), n in counts.items()), Fraction(0))


def _group_placeholders(
    group: ConstraintGroup, scheduled: tuple[PackedNode, ...], resources_of: Mapping[str, Resources]
) -> list[tuple[Placeholder, tuple[tuple[str, ...], ...]]]:
    """One placeholder per node the scheduler uses, holding the pods it places there, with their pods per GPU."""
    tolerations, group_id = tuple(group.tolerations), group.id  # once per group, not per placeholder
    return [
        (
            Placeholder(
                gpus=node.gpus,
                resource_key=group.resource_key,
                pods=node.pods,
                resources=summed_resources(resources_of[p] for p in node.pods),
                node_selector=group.node_selector,
                affinity=group.affinity,
                tolerations=tolerations,
                group=group_id,
                keep_apart=group.per_node is not None,
                kind=group.host_spread,
            ),
            node.gpu_pods,
        )
        for node in scheduled
    ]


def scheduling_order(piece: DemandPiece) -> tuple[bool, str, float, str]:
    """The scheduler's order within a group: oldest first (creation, then the longest wait), then by name.

    The order the plan's greedy check places pods in, and the one the controller's reconcile assumes
    when it works out which waiting pods the placeholders already asked for will hold.
    """
    return (piece.created is None, piece.created or "", -(piece.waiting_seconds or 0.0), piece.pod)


def summed_resources(each: Iterable[Resources]) -> Resources:
    """The sum of pods' other resources, as a placeholder asks for them."""
    total: dict[str, int] = {}
    for resources in each:
        for name, amount in resources:
            total[name] = total.get(name, 0) + amount
    return tuple(sorted(total.items()))


def _apply_cap(
    placeholders: list[tuple[Placeholder, tuple[tuple[str, ...], ...]]], waiting: Mapping[str, float], limit: Optional[int],
    resources_of: Mapping[str, Resources],
) -> tuple[list[Placeholder], Optional[CapReport]]:
    """Keep placeholders under the cap, those with the longest-waiting pods first; report what was cut.

    A placeholder that does not fit whole is trimmed to the GPUs left rather
    than dropped: its pods, longest-waiting first, keep the GPUs they sit on
    (a multi-device pod all of its own or none) while those fit. So eight pods
    of 0.9 on one 8-GPU placeholder under a cap of 5 still ask for 5 GPUs, and
    a cap smaller than one node never stops a group's scale-up.
    """
    requested = sum(p.gpus for p, _ in placeholders)
    if limit is None or requested <= limit:
        return [p for p, _ in placeholders], None

    def longest_wait(entry: tuple[Placeholder, tuple[tuple[str, ...], ...]]) -> float:
        return max((waiting.get(p, 0.0) for p in entry[0].pods), default=0.0)

    kept: dict[int, Placeholder] = {}  # by position in the plan
    trimmed: list[tuple[Optional[str], int, int]] = []
    served: set[str] = set()
    left = limit
    for index in sorted(range(len(placeholders)), key=lambda i: -longest_wait(placeholders[i])):
        placeholder, gpu_pods = placeholders[index]
        if placeholder.gpus <= left:
            kept[index] = placeholder
            served.update(placeholder.pods)
            left -= placeholder.gpus
            continue
        if left <= 0:
            continue
        on_gpus: dict[str, set[int]] = {}
        for gpu, pods in enumerate(gpu_pods):
            for pod in pods:
                on_gpus.setdefault(pod, set()).add(gpu)
        chosen: set[int] = set()
        pods_kept: list[str] = []
        for pod in sorted(placeholder.pods, key=lambda p: (-waiting.get(p, 0.0), p)):
            gpus = on_gpus.get(pod, set())
            if gpus and len(chosen | gpus) <= left:
                chosen |= gpus
                pods_kept.append(pod)
        if not pods_kept:
            continue
        kept[index] = replace(placeholder, gpus=len(chosen), pods=tuple(sorted(pods_kept)),
                              resources=summed_resources(resources_of.get(p, ()) for p in pods_kept))
        trimmed.append((placeholder.group, placeholder.gpus, len(chosen)))
        served.update(pods_kept)
        left -= len(chosen)
    report = CapReport(
        limit=limit,
        requested=requested,
        cut_gpus=requested - sum(p.gpus for p in kept.values()),
        cut_pods=tuple(sorted(pod for p, _ in placeholders for pod in p.pods if pod not in served)),
        trimmed=tuple(trimmed),
    )
    return [kept[i] for i in sorted(kept)], report


def _plan_kai(pods: Iterable[Pod], settings: AdjusterSettings) -> AdjusterPlan:
    from raybridge.kai.node_scale_adjuster import KAI_RESOURCE_KEY, kai_pass  # only for --policy kai

    # KAI's rule reads the objects its own way (kai/node_scale_adjuster.py), quirks included.
    result = kai_pass([pod.obj for pod in pods], settings.scheduler_name, float(settings.memory_fallback_fraction), settings.kai_namespace)
    placeholders = [
        Placeholder(
            gpus=s.devices,
            resource_key=KAI_RESOURCE_KEY,
            pods=(s.target,),
            node_selector=dict(s.node_selector),
            affinity=dict(s.affinity) if s.affinity else None,
            tolerations=tuple(s.tolerations),
            name=s.name,
            existing=s.existing,
        )
        for s in (*result.kept, *result.created)
    ]
    notes = []
    if settings.max_total_gpus is not None:
        notes.append("KAI's rule has no cap: --max-gpus does not apply to it")
    if result.in_cooldown:
        notes.append("KAI deleted a scaling pod in this pass, which starts its 60 s cooldown: nothing is created until it ends")
    return AdjusterPlan(
        policy="kai",
        total_gpus=sum(p.gpus for p in placeholders),
        placeholders=tuple(placeholders),
        ignored=tuple(IgnoredPod(pod, "kai-skipped", why) for pod, why in result.skipped),
        notes=tuple(notes),
        warnings=result.warnings,
        kai={
            "need": result.need,
            "created": [s.name for s in result.created],
            "deleted": [{"name": n, "reason": why} for n, why in result.deleted],
            "inCooldown": result.in_cooldown,
        },
    )
