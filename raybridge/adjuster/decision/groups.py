"""Constraint groups: which nodes a pending pod may land on, and what those nodes say about one of them.

Pods that may share a node (the same vendor, nodeSelector, required node affinity, tolerations, host spread) are
one `ConstraintGroup`; a group's known nodes give its `GroupShape` (GPUs per node, their memories, the room one
node has besides GPUs). Pods whose GPU memory fits only some of a group's nodes, and pods whose GPUs come through
ResourceClaims of a DeviceClass, are groups of their own (`gpu_memory_floor_mib`, `device_class`), whose
placeholders say so. `Groups` computes each group once per pass and keeps the per-pass caches the selection uses.

Split from demand.py, which judges the pods; this module judges no pod and reads no annotation. Pure: no I/O.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping, Optional, Sequence, Iterable

from raybridge.adjuster.decision.host_spread import HostSpread
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.core.inventory import DeviceSources, named_nodes, node_allocatable_resources, node_gpus_by_vendor
from raybridge.core.kubeobjects import as_dict, as_list
from raybridge.core.node_index import NodeIndex, positions_of
from raybridge.core.placement import admits, constraint_problem, is_default_not_ready_toleration, required_node_affinity_terms
from raybridge.core.views import Node
from raybridge.kai.share import kai_gpu_memory_mib


def base_group_id(group_id: str) -> str:
    """The `ConstraintGroup.base_id` of a group's `id` (what a placeholder's group label holds)."""
    base, dash, floor = group_id.rpartition("-")
    return base if dash and floor.endswith("m") and floor[:-1].isdigit() else group_id


@dataclass(frozen=True)
class ConstraintGroup:
    """Pods that may share a node: same vendor, nodeSelector, required node affinity and tolerations.

    Canonical JSON inside (so equal constraints written in another order are one group);
    the placeholder for the group copies them.
    """

    vendor: str
    node_selector_json: str = "{}"
    affinity_terms_json: str = "[]"
    tolerations_json: str = "[]"
    #: Pods that must not share a host (host_spread.HostSpread as JSON); "" for pods any node may take together.
    host_spread_json: str = ""
    #: gpu-memory pods: only nodes whose GPUs have at least this many MiB, as KAI reads them (`kai_gpu_memory_mib`),
    #: hold them (0: any node). Pods of one constraint group that fit different node types are different groups.
    gpu_memory_floor_mib: int = 0
    #: The node label a placeholder requires that memory by (`AdjusterSettings.gpu_memory_label`; "": none).
    gpu_memory_label: str = ""
    #: Pods whose GPUs come through ResourceClaims of this DeviceClass ("": KAI's GPU sharing). Their nodes have the
    #: class's devices and the device plugin's resource, which the placeholder asks for (claims.py).
    device_class: str = ""

    @functools.cached_property
    def host_spread(self) -> Optional[HostSpread]:
        """Read once per group (plan, reconcile and the placeholders ask it for every pod and node)."""
        return HostSpread.from_json(self.host_spread_json)

    @property
    def per_node(self) -> Optional[int]:
        """At most this many of the group's pods on one node (None: no limit)."""
        spread = self.host_spread
        return spread.per_node if spread is not None else None

    @property
    def resource_key(self) -> str:
        return GPU_RESOURCE_KEYS[self.vendor]

    @property
    def node_selector(self) -> dict[str, str]:
        return json.loads(self.node_selector_json)

    @property
    def affinity_terms(self) -> list[dict[str, Any]]:
        return json.loads(self.affinity_terms_json)

    @property
    def tolerations(self) -> list[dict[str, Any]]:
        return json.loads(self.tolerations_json)

    @property
    def memory_requirement(self) -> Optional[dict[str, Any]]:
        """The node selector requirement that keeps a placeholder to nodes whose GPUs hold the group's pods: the memory
        label above the floor less one (`Gt` takes a whole number; KAI floors the label to a multiple of 100 MiB and the
        floor is one, so a label at the floor or above is a GPU that holds them), or None."""
        if not self.gpu_memory_floor_mib or not self.gpu_memory_label:
            return None
        return {"key": self.gpu_memory_label, "operator": "Gt", "values": [str(self.gpu_memory_floor_mib - 1)]}

    @property
    def affinity(self) -> Optional[dict[str, Any]]:
        """The affinity a placeholder carries: the group's required node affinity (with its GPU memory requirement in
        every term: terms are ORed, a term's expressions ANDed) and the pods' required anti-affinity by hostname
        (host_spread.py), or None."""
        found: dict[str, Any] = {}
        terms = self.affinity_terms
        memory = self.memory_requirement
        if memory is not None:
            terms = [{**term, "matchExpressions": [*term.get("matchExpressions", []), memory]} for term in terms] or [{"matchExpressions": [memory]}]
        if terms:
            found["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        spread = self.host_spread
        anti = json.loads(spread.anti_affinity_terms) if spread is not None else []
        if anti:
            found["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
        return found or None

    @functools.cached_property
    def base_id(self) -> str:
        """A short stable name of its constraints: the vendor and a digest of them (the same for every GPU memory)."""
        parts = (self.node_selector_json, self.affinity_terms_json, self.tolerations_json) + ((self.host_spread_json,) if self.host_spread_json else ())
        if self.device_class:
            parts += (f"claims:{self.device_class}",)
        digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:8]
        return f"{self.vendor}-{digest}"

    @property
    def id(self) -> str:
        """`base_id`, and the GPU memory its nodes have at least where that is set (`<base>-<MiB>m`)."""
        return f"{self.base_id}-{self.gpu_memory_floor_mib}m" if self.gpu_memory_floor_mib else self.base_id

    def admits_node(self, node: Node, ignoring_taints: frozenset[str] = frozenset()) -> bool:
        """Whether the group's pods may land on the node: its GPUs' vendor, nodeSelector, required affinity, taints
        (but those whose keys are in `ignoring_taints`). Never for pods whose GPUs come through claims: a node's devices
        are not in its Node object."""
        taints = [t for t in node.taints if t.get("key") not in ignoring_taints] if ignoring_taints else list(node.taints)
        return self.has_gpus_for(node) and admits(self.node_selector, self.affinity_terms, self.tolerations, node.meta.labels, node.name, taints)

    def has_gpus_for(self, node: Node, gpus: Optional[Mapping[str, tuple[int, Optional[int]]]] = None) -> bool:
        """`admits_node` less the constraints (which `NodeIndex.admitting` answers for many nodes at once): not cordoned,
        GPUs of the group's vendor with the group's GPU memory, and pods that do not claim their GPUs as devices.
        `gpus`: the node's `node_gpus_by_vendor`, where the caller asks for many groups and has read it once."""
        if self.device_class or node.cordoned:
            return False
        if gpus is None:
            gpus = node_gpus_by_vendor(node, [])
        if self.vendor not in gpus:
            return False
        return not self.gpu_memory_floor_mib or (kai_gpu_memory_mib(gpus[self.vendor][1], self.vendor) or 0) >= self.gpu_memory_floor_mib

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "vendor": self.vendor,
            "resourceKey": self.resource_key,
            "nodeSelector": self.node_selector,
            "affinity": self.affinity,
            "tolerations": self.tolerations,
            **({"perNode": self.per_node} if self.host_spread_json else {}),
            **({"gpuMemoryFloorMiB": self.gpu_memory_floor_mib} if self.gpu_memory_floor_mib else {}),
            **({"deviceClass": self.device_class} if self.device_class else {}),
        }


@dataclass(frozen=True)
class GroupShape:
    """What the known nodes of a group say: how many GPUs one node has, how much memory each GPU, and what
    else one node has room for (CPU, memory, ...; in thousandths, less its DaemonSet pods' requests)."""

    nodes: int = 0
    node_gpus: Optional[int] = None
    gpu_memory_mib: Optional[int] = None
    #: The GPU memories of its nodes that are known, as KAI reads them, distinct and ascending.
    gpu_memories: tuple[int, ...] = ()
    #: Of the group's nodes with `node_gpus` GPUs, the least of each resource (None: no node known).
    node_resources: Optional[tuple[tuple[str, int], ...]] = None


# --- nodes ---------------------------------------------------------------------------------


@dataclass
class NodeFacts:
    name: str
    labels: dict[str, Any]
    taints: list[Any]
    #: vendor -> (GPUs, MiB per GPU or None)
    gpus: dict[str, tuple[int, Optional[int]]]
    #: allocatable besides GPUs, in thousandths
    resources: tuple[tuple[str, int], ...] = ()
    #: vendor -> MiB per GPU as KAI reads it (kai_gpu_memory_mib; None: unknown)
    kai_memory: dict[str, Optional[int]] = field(default_factory=dict)
    #: vendor -> its whole GPUs published as DRA devices of a class that claims them (core/inventory.py)
    dra: dict[str, int] = field(default_factory=dict)


def _dra_gpus(node: str, devices: DeviceSources) -> dict[str, int]:
    """vendor -> the node's whole GPUs published as DRA devices, where a DeviceClass claims them."""
    found: dict[str, int] = {}
    for gpu in devices.by_node.get(node, ()):
        if gpu.whole and devices.device_classes.get(gpu.vendor):
            found[gpu.vendor] = found.get(gpu.vendor, 0) + 1
    return found


class FactsIndex:
    """A pass's nodes as bit sets (bit i for `nodes[i]`, core/node_index.py): which of them admit each set of
    constraints, and which have each vendor's GPUs, GPU count, GPU memory (as KAI reads it) and DRA devices.

    Built once per pass (`ClusterSnapshot.facts_index`) and shared by every demand the pass asks for, so a group's
    nodes cost a few operations on sets, not a look at every node: a shared cluster's thousand groups on 2,000 nodes
    asked `admits` 2.5 million times."""

    def __init__(self, nodes: Sequence[NodeFacts]) -> None:
        self.nodes = list(nodes)
        self.index = NodeIndex([n.labels for n in self.nodes], [n.name for n in self.nodes], [n.taints for n in self.nodes])
        #: nodes a group may take: GPUs of the device plugin or as DRA devices (`Groups.candidates`)
        self.with_gpus = 0
        self.vendor: dict[str, int] = {}
        #: vendor -> GPUs per node -> nodes; vendor -> MiB per GPU as KAI reads it (known ones) -> nodes
        self.counts: dict[str, dict[int, int]] = {}
        self.memories: dict[str, dict[int, int]] = {}
        self.dra: dict[str, int] = {}
        for position, node in enumerate(self.nodes):
            bit = 1 << position
            if node.gpus or node.dra:
                self.with_gpus |= bit
            for vendor, (count, _) in node.gpus.items():
                self.vendor[vendor] = self.vendor.get(vendor, 0) | bit
                by_count = self.counts.setdefault(vendor, {})
                by_count[count] = by_count.get(count, 0) | bit
                memory = node.kai_memory.get(vendor)
                if memory:
                    by_memory = self.memories.setdefault(vendor, {})
                    by_memory[memory] = by_memory.get(memory, 0) | bit
            for vendor, count in node.dra.items():
                if count:
                    self.dra[vendor] = self.dra.get(vendor, 0) | bit
        self._admitting: dict[tuple[str, str, str], int] = {}
        self._rooms: dict[Any, tuple[list[tuple[dict[str, int], int]], dict[int, int]]] = {}

    def admitting(self, key: tuple[str, str, str]) -> int:
        """The nodes with GPUs that `placement.admits` admits for the canonical constraints `key`."""
        found = self._admitting.get(key)
        if found is None:
            selector, terms, tolerations = json.loads(key[0]), json.loads(key[1]), json.loads(key[2])
            found = self._admitting[key] = self.index.admitting(selector, terms, tolerations, key[2], among=self.with_gpus)
        return found

    def rooms(self, daemon_requests: Mapping[str, Mapping[str, int]]) -> tuple[list[tuple[dict[str, int], int]], dict[int, int]]:
        """Each distinct room a node with GPUs has for pods (its allocatable less what its DaemonSet pods request) and
        its nodes, and each node's room by position; kept per distinct `daemon_requests` (a pass asks for the demand of
        a placeholder's few pods many times, with none)."""
        key = tuple(sorted((node, tuple(sorted(requests.items()))) for node, requests in daemon_requests.items()))
        found = self._rooms.get(key)
        if found is not None:
            return found
        rooms: list[tuple[dict[str, int], int]] = []
        by_room: dict[tuple[tuple[str, int], ...], int] = {}
        of_node: dict[int, int] = {}
        for position, node in enumerate(self.nodes):
            if not node.gpus:
                continue
            mine = dict(node.resources)
            for name, amount in daemon_requests.get(node.name, {}).items():
                mine[name] = mine.get(name, 0) - amount
            spelled = tuple(sorted(mine.items()))
            at = by_room.get(spelled)
            if at is None:
                at = by_room[spelled] = len(rooms)
                rooms.append((mine, 0))
            rooms[at] = (rooms[at][0], rooms[at][1] | (1 << position))
            of_node[position] = at
        found = self._rooms[key] = (rooms, of_node)
        return found

    def with_memory(self, vendor: str, floor: int) -> int:
        """The nodes of `vendor` whose GPUs have at least `floor` MiB as KAI reads them."""
        found = 0
        for memory, nodes in self.memories.get(vendor, {}).items():
            if memory >= floor:
                found |= nodes
        return found


def node_facts(nodes: Iterable[Node], devices: DeviceSources) -> tuple[list[NodeFacts], list[str]]:
    warnings: list[str] = list(devices.warnings)
    facts = []
    for node in named_nodes(nodes, warnings):
        gpus = node_gpus_by_vendor(node, warnings)
        dra = _dra_gpus(node.name, devices) if devices.by_node else {}
        facts.append(NodeFacts(node.name, node.text_labels, list(node.taints), gpus, node_allocatable_resources(node) if gpus else (),
                                {vendor: kai_gpu_memory_mib(mib, vendor) for vendor, (_, mib) in gpus.items()}, dra))
    return facts, list(dict.fromkeys(warnings))


# --- constraints -----------------------------------------------------------------------------


def _canonical_terms(terms: list[dict[str, Any]]) -> str:
    canon = []
    for term in terms:
        c: dict[str, Any] = {}
        for part in ("matchExpressions", "matchFields"):
            exprs = []
            for expr in as_list(term.get(part)):
                e: dict[str, Any] = {"key": expr["key"], "operator": expr["operator"]}
                if expr.get("values"):
                    e["values"] = sorted(set(expr["values"]))
                exprs.append(e)
            if exprs:
                c[part] = sorted(exprs, key=lambda e: json.dumps(e, sort_keys=True))
        canon.append(c)
    unique = sorted({json.dumps(c, sort_keys=True) for c in canon})
    return "[" + ",".join(unique) + "]"


def _canonical_tolerations(tolerations: list[dict[str, Any]]) -> str:
    canon = set()
    for tol in tolerations:
        if is_default_not_ready_toleration(tol):
            continue
        c = {k: tol[k] for k in ("key", "operator", "value", "effect") if tol.get(k)}
        canon.add(json.dumps(c, sort_keys=True))
    return "[" + ",".join(sorted(canon)) + "]"


def _constraints_of(spec: Mapping[str, Any]) -> tuple[str, str, str]:
    selector = as_dict(spec.get("nodeSelector"))
    return (
        json.dumps(selector, sort_keys=True),
        _canonical_terms(required_node_affinity_terms(spec) or []),
        _canonical_tolerations(as_list(spec.get("tolerations"))),
    )


def _vendor_from_keys(selector: Mapping[str, Any], terms: Sequence[Mapping[str, Any]]) -> Optional[str]:
    """A vendor named by the label keys a pod selects on (amd.com/..., nvidia.com/...), when only one is."""
    keys = set(selector)
    for term in terms:
        keys.update(e.get("key") for e in as_list(term.get("matchExpressions")) if e.get("operator") in ("In", "Exists", "Gt", "Lt"))
    found = set()
    for key in keys:
        domain = str(key).split("/", 1)[0] if "/" in str(key) else ""
        if domain.endswith("amd.com"):
            found.add("amd")
        elif domain.endswith("nvidia.com"):
            found.add("nvidia")
    return found.pop() if len(found) == 1 else None


_items = dict.items


def _spelling(spec: Mapping[str, Any]) -> Any:
    """A key for a spec's nodeSelector, affinity and tolerations exactly as written (cheaper than repr).

    Without an affinity, and with a selector and tolerations shaped as they should be, the key is their items as
    tuples (unhashable where a value is a list or a dict: `_spelling_repr` is the key then); anything else gets
    the repr. Values equal as Python values but of other types (1, 1.0, True) share a key, which is safe:
    constraint_problem and the canonical form treat every non-string value alike.
    """
    selector, affinity, tolerations = spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")
    if affinity is None and (selector is None or type(selector) is dict) and (tolerations is None or type(tolerations) is list):
        try:
            return (
                None if selector is None else tuple(_items(selector)),
                None if tolerations is None else tuple(map(tuple, map(_items, tolerations))),
            )
        except TypeError:  # an element that is not a dict
            pass
    return _spelling_repr(spec)


def _spelling_repr(spec: Mapping[str, Any]) -> str:
    return repr((spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")))


class Groups:
    """Constraint groups and what the known nodes say about each (computed once per distinct constraints)."""

    def __init__(self, nodes: Optional[list[NodeFacts]], settings: AdjusterSettings, index: Optional[FactsIndex] = None) -> None:
        """`index`: `nodes` as bit sets, where the pass has built it already (one is built when first needed)."""
        self.nodes = nodes
        self.settings = settings
        self._index = index
        #: Per distinct room a node has for pods (allocatable less its DaemonSet pods): the room and its nodes (`_room_of`).
        self._rooms: Optional[tuple[list[tuple[dict[str, int], int]], dict[int, int]]] = None
        self._candidates: dict[tuple[str, str, str], list[NodeFacts]] = {}
        self._constraints: dict[Any, tuple[Optional[str], tuple[str, str, str]]] = {}
        self._vendors: dict[tuple[str, str, str], str] = {}
        self._groups: dict[tuple[tuple[str, str, str], str, str, int, str], tuple[ConstraintGroup, GroupShape]] = {}
        self.shapes: dict[ConstraintGroup, GroupShape] = {}
        self.memory_fractions: dict[tuple[int, int], Fraction] = {}
        #: Per distinct text (pods repeat them): parsed annotations, the wait since a transition time, quota verdicts.
        self.parsed_texts: dict[Any, Any] = {}
        self.waits: dict[Any, Optional[float]] = {}
        self.quota_messages: dict[str, Optional[str]] = {}
        #: Per node, what its DaemonSet pods request (set by select_demand before any group is made).
        self.daemon_requests: dict[str, dict[str, int]] = {}
        #: Per constraints and vendor, the largest GPU memory of their nodes when one was last seen (ClusterSnapshot).
        self.memories_seen: Mapping[tuple[tuple[str, str, str], str], int] = {}

    @property
    def index(self) -> FactsIndex:
        if self._index is None:
            self._index = FactsIndex(self.nodes or [])
        return self._index

    def candidates(self, key: tuple[str, str, str]) -> list[NodeFacts]:
        """The nodes with GPUs that pods of constraints `key` may land on, in the nodes' order."""
        if key not in self._candidates:
            index = self.index
            self._candidates[key] = [index.nodes[i] for i in positions_of(index.admitting(key))]
        return self._candidates[key]

    def _room_of(self, members: int) -> tuple[tuple[str, int], ...]:
        """What a new node like the nodes `members` (bits) has for the group's pods: the least of each resource the first
        of them has, less what the DaemonSet pods on that node request (the autoscaler's template node carries them too:
        cluster-autoscaler@1.33 simulator/node_info_utils.go, SanitizedTemplateNodeInfoFromNodeInfo). Worked per
        distinct room, not per node."""
        if self._rooms is None:
            self._rooms = self.index.rooms(self.daemon_requests)
        rooms, of_node = self._rooms
        first = (members & -members).bit_length() - 1
        room = dict(rooms[of_node[first]][0])  # its keys are the first node's, as each node's room was taken in order
        for mine, nodes in rooms:
            if nodes & members:
                room = {k: min(v, mine.get(k, 0)) for k, v in room.items()}
        return tuple(sorted(room.items()))

    def constraints(self, spec: Mapping[str, Any]) -> tuple[Optional[str], tuple[str, str, str]]:
        """(what is malformed, canonical constraints key), computed once per distinct spelling."""
        raw = _spelling(spec)
        try:  # the tuple's hash is computed here once, not checked beforehand as well
            found = self._constraints.get(raw)
        except TypeError:  # a value that is a list or a dict
            raw = _spelling_repr(spec)
            found = self._constraints.get(raw)
        if found is None:
            problem = constraint_problem(spec)
            found = (problem, ("", "", "") if problem else _constraints_of(spec))
            self._constraints[raw] = found
        return found

    def vendor_for(self, key: tuple[str, str, str], annotated: Optional[str]) -> str:
        if annotated:
            return annotated
        if key not in self._vendors:
            self._vendors[key] = self._vendor_from_nodes(key)
        return self._vendors[key]

    def _vendor_from_nodes(self, key: tuple[str, str, str]) -> str:
        candidates = self.index.admitting(key)
        vendors = {v for v, nodes in self.index.vendor.items() if nodes & candidates}
        if len(vendors) == 1:
            return vendors.pop()
        if not vendors:
            from_keys = _vendor_from_keys(json.loads(key[0]), json.loads(key[1]))
            if from_keys:
                return from_keys
        return self.settings.default_vendor

    def group(self, key: tuple[str, str, str], vendor: str, spread: str = "", memory_floor: int = 0,
              device_class: str = "") -> tuple[ConstraintGroup, GroupShape]:
        """The group of pods with constraints `key` (and `spread`) on `vendor`'s GPUs, of at least `memory_floor` MiB
        each (0: any), or claimed as devices of `device_class`, and what its known nodes say: the nodes with the
        device plugin's GPUs (and, for claims, the class's devices too: the placeholder asks for the former)."""
        found = self._groups.get((key, vendor, spread, memory_floor, device_class))
        if found is not None:
            return found
        label = self.settings.gpu_memory_label if memory_floor else ""
        group = ConstraintGroup(vendor, *key, host_spread_json=spread, gpu_memory_floor_mib=memory_floor, gpu_memory_label=label,
                                device_class=device_class)
        if group not in self.shapes:
            index = self.index
            members = index.admitting(key) & index.vendor.get(vendor, 0)
            if memory_floor:
                members &= index.with_memory(vendor, memory_floor)
            if device_class:
                members &= index.dra.get(vendor, 0)
            by_count = {count: nodes & members for count, nodes in index.counts.get(vendor, {}).items() if nodes & members}
            node_gpus = max(by_count, default=None)
            memories = sorted(memory for memory, nodes in index.memories.get(vendor, {}).items() if nodes & members)  # as KAI fits gpu-memory pods
            self.shapes[group] = GroupShape(
                nodes=members.bit_count(),
                node_gpus=node_gpus,
                gpu_memory_mib=memories[0] if memories else None,
                gpu_memories=tuple(memories),
                node_resources=self._room_of(by_count[node_gpus]) if node_gpus is not None else None,
            )
        self._groups[(key, vendor, spread, memory_floor, device_class)] = (group, self.shapes[group])
        return group, self.shapes[group]

    def gpus_elsewhere(self, key: tuple[str, str, str], vendor: str) -> tuple[list[str], list[str]]:
        """Of the nodes pods with constraints `key` may land on: those with `vendor`'s GPUs as DRA devices alone, and
        those with them from the device plugin alone (names, in order)."""
        candidates = self.candidates(key)
        return ([n.name for n in candidates if n.dra.get(vendor) and vendor not in n.gpus],
                [n.name for n in candidates if vendor in n.gpus and not n.dra.get(vendor)])
