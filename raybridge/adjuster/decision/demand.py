"""Pending fractional-GPU pods -> exact demand pieces, grouped by the nodes they can use.

The first half of the node-scale-adjuster's decision. It reads Kubernetes Pod
and Node JSON (as `kubectl get -o json` prints it or a watch delivers it) and
decides, pod by pod, whether the pod is waiting for GPU capacity that does not
exist yet. Those become `DemandPiece`s: a fraction of a GPU (an exact
`Fraction`, never a float) on a number of distinct devices, in the
`ConstraintGroup` of nodes the pod may land on. Every other pod that carries a
KAI GPU-sharing annotation is reported in `ignored` with its reason; pods bound
to a node or finished are only counted in `skipped`, by code. That is
deliberate: they are the running workload, not pods that wait, a cluster
holds many more of them than pending ones, and each `ignored` entry is a
per-pod warning (the controller posts a `ScaleUpIgnored` event for it).

Pure: no I/O, no clock (the caller passes `now`), no ray or kubernetes
imports. It never raises on a malformed pod, node or annotation. How the
pieces become whole GPUs is `adjuster/decision/packing.py`'s business; KAI's own rule is
`kai/node_scale_adjuster.py`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Iterable, Mapping, Optional, Sequence

from raybridge.adjuster.decision.host_spread import HostSpread, host_spread
from raybridge.kai.pod_group import PodGroup, index_pod_groups, pod_group_name, pod_group_of, says_queue_capacity
from raybridge.kai.share import KaiShare, asks_for_share, kai_gpu_memory_mib, read_kai_share
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.core.consts import (
    GPU_RESOURCE_KEYS,
    GPU_VENDOR_ANNOTATION,
    VENDORS,
)
from raybridge.core.inventory import (
    format_milli,
    named_nodes,
    node_allocatable_resources,
    node_gpus_by_vendor,
    pod_gpu_requests,
    pod_resource_requests,
)
from raybridge.core.kubeobjects import as_dict, as_list, parse_rfc3339
from raybridge.core.views import Condition, Node, Pod, is_object, read_node, read_pod
from raybridge.core.placement import (
    admits,
    constraint_problem,
    is_default_not_ready_toleration,
    required_node_affinity_terms,
)
from raybridge.core.quantity import format_fraction

#: No GPU node holds more GPUs than this (the largest GPU servers hold 8 or 16). Where the group's node size is not
#: known (a pool scaled from zero, no --node-gpus), a pod asking for more devices can never land, and the packer's
#: work grows with every device it asks for: it is refused before any work (a tenant pod cannot stall the pass).
MAX_NODE_GPUS = 64


_GPU_KEYS = tuple(GPU_RESOURCE_KEYS.values())


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
    def affinity(self) -> Optional[dict[str, Any]]:
        """The affinity a placeholder carries: the group's required node affinity and the pods' required anti-affinity
        by hostname (host_spread.py), or None."""
        found: dict[str, Any] = {}
        terms = self.affinity_terms
        if terms:
            found["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        spread = self.host_spread
        anti = json.loads(spread.anti_affinity_terms) if spread is not None else []
        if anti:
            found["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
        return found or None

    @property
    def id(self) -> str:
        """A short stable name: the vendor and a digest of the constraints."""
        parts = (self.node_selector_json, self.affinity_terms_json, self.tolerations_json) + ((self.host_spread_json,) if self.host_spread_json else ())
        digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:8]
        return f"{self.vendor}-{digest}"

    def admits_node(self, node: Node) -> bool:
        """Whether the group's pods may land on the node: its GPUs' vendor, nodeSelector, required affinity, taints."""
        if node.cordoned or self.vendor not in node_gpus_by_vendor(node, []):
            return False
        return admits(self.node_selector, self.affinity_terms, self.tolerations, node.meta.labels, node.name, list(node.taints))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "vendor": self.vendor,
            "resourceKey": self.resource_key,
            "nodeSelector": self.node_selector,
            "affinity": self.affinity,
            "tolerations": self.tolerations,
            **({"perNode": self.per_node} if self.host_spread_json else {}),
        }


@dataclass(frozen=True)
class GroupShape:
    """What the known nodes of a group say: how many GPUs one node has, how much memory each GPU, and what
    else one node has room for (CPU, memory, ...; in thousandths, less its DaemonSet pods' requests)."""

    nodes: int = 0
    node_gpus: Optional[int] = None
    gpu_memory_mib: Optional[int] = None
    #: Of the group's nodes with `node_gpus` GPUs, the least of each resource (None: no node known).
    node_resources: Optional[tuple[tuple[str, int], ...]] = None


@dataclass(frozen=True)
class DemandPiece:
    """One pending pod's need: `fraction` of a GPU on each of `devices` distinct GPUs of one node."""

    pod: str
    fraction: Fraction
    devices: int
    group: ConstraintGroup
    #: "gpu-fraction", "gpu-memory" (converted with the group's GPU memory) or "gpu-memory-fallback".
    source: str
    memory_mib: Optional[int] = None
    waiting_seconds: Optional[float] = None
    #: metadata.creationTimestamp as given (RFC 3339, so it sorts as text): the scheduler's order among equals.
    created: Optional[str] = None
    #: What else it requests of a node (CPU, memory, ...): (name, thousandths of its unit), sorted.
    resources: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "fraction": format_fraction(self.fraction),
            "devices": self.devices,
            "group": self.group.id,
            "source": self.source,
            "memoryMiB": self.memory_mib,
            "waitingSeconds": self.waiting_seconds,
        }


#: The vendors whose GPUs KAI can share: its binder reserves a shared GPU with a pod that asks for `nvidia.com/gpu` and
#: whose image finds the GPU's index with NVML (kai-scheduler@v0.12.0 pkg/binder/binding/resourcereservation/
#: resource_reservation.go createResourceReservationPod, constants.GpuResource; v0.20.1 alike). A fractional pod meant
#: for another vendor's GPUs waits whatever nodes come.
KAI_SHARED_VENDORS = frozenset({"nvidia"})


@dataclass(frozen=True)
class IgnoredPod:
    """An annotated pod that is not counted, with a short code (for metrics) and a sentence (for people)."""

    pod: str
    code: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "code": self.code, "reason": self.reason}


@dataclass(frozen=True)
class DemandSelection:
    pieces: tuple[DemandPiece, ...]
    ignored: tuple[IgnoredPod, ...]
    #: Annotated pods that are bound to a node or finished, counted by code.
    skipped: Mapping[str, int]
    shapes: Mapping[ConstraintGroup, GroupShape]
    warnings: tuple[str, ...] = field(default=())


# --- small readers that never raise --------------------------------------------------------


def _aware(now: datetime) -> datetime:
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)


# --- nodes ---------------------------------------------------------------------------------


@dataclass
class _NodeFacts:
    name: str
    labels: dict[str, Any]
    taints: list[Any]
    #: vendor -> (GPUs, MiB per GPU or None)
    gpus: dict[str, tuple[int, Optional[int]]]
    #: allocatable besides GPUs, in thousandths
    resources: tuple[tuple[str, int], ...] = ()


def _node_facts(nodes: Iterable[Node]) -> tuple[list[_NodeFacts], list[str]]:
    warnings: list[str] = []
    facts = []
    for node in named_nodes(nodes, warnings):
        gpus = node_gpus_by_vendor(node, warnings)
        facts.append(_NodeFacts(node.name, node.text_labels, list(node.taints), gpus, node_allocatable_resources(node) if gpus else ()))
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


class _Groups:
    """Constraint groups and what the known nodes say about each (computed once per distinct constraints)."""

    def __init__(self, nodes: Optional[list[_NodeFacts]], settings: AdjusterSettings) -> None:
        self.nodes = nodes
        self.settings = settings
        self._candidates: dict[tuple[str, str, str], list[_NodeFacts]] = {}
        self._constraints: dict[Any, tuple[Optional[str], tuple[str, str, str]]] = {}
        self._vendors: dict[tuple[str, str, str], str] = {}
        self._groups: dict[tuple[tuple[str, str, str], str, str], tuple[ConstraintGroup, GroupShape]] = {}
        self.shapes: dict[ConstraintGroup, GroupShape] = {}
        self.memory_fractions: dict[tuple[int, int], Fraction] = {}
        #: Per distinct text (pods repeat them): parsed annotations, the wait since a transition time, quota verdicts.
        self.parsed_texts: dict[Any, Any] = {}
        self.waits: dict[Any, Optional[float]] = {}
        self.quota_messages: dict[str, Optional[str]] = {}
        #: Per node, what its DaemonSet pods request (set by select_demand before any group is made).
        self.daemon_requests: dict[str, dict[str, int]] = {}

    def candidates(self, key: tuple[str, str, str]) -> list[_NodeFacts]:
        if key not in self._candidates:
            selector, terms, tolerations = json.loads(key[0]), json.loads(key[1]), json.loads(key[2])
            found = []
            for node in self.nodes or []:
                if node.gpus and admits(selector, terms, tolerations, node.labels, node.name, node.taints):
                    found.append(node)
            self._candidates[key] = found
        return self._candidates[key]

    def _room_of(self, members: list[_NodeFacts]) -> tuple[tuple[str, int], ...]:
        """What a new node like `members` has for the group's pods: the least of each resource, less what the
        DaemonSet pods on that node request (the autoscaler's template node carries them too:
        cluster-autoscaler@1.33 simulator/node_info_utils.go, SanitizedTemplateNodeInfoFromNodeInfo)."""
        room: Optional[dict[str, int]] = None
        for node in members:
            mine = dict(node.resources)
            for name, amount in self.daemon_requests.get(node.name, {}).items():
                mine[name] = mine.get(name, 0) - amount
            room = mine if room is None else {k: min(v, mine.get(k, 0)) for k, v in room.items()}
        return tuple(sorted((room or {}).items()))

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
        vendors = {v for node in self.candidates(key) for v in node.gpus}
        if len(vendors) == 1:
            return vendors.pop()
        if not vendors:
            from_keys = _vendor_from_keys(json.loads(key[0]), json.loads(key[1]))
            if from_keys:
                return from_keys
        return self.settings.default_vendor

    def group(self, key: tuple[str, str, str], vendor: str, spread: str = "") -> tuple[ConstraintGroup, GroupShape]:
        found = self._groups.get((key, vendor, spread))
        if found is not None:
            return found
        group = ConstraintGroup(vendor, *key, host_spread_json=spread)
        if group not in self.shapes:
            members = [node for node in self.candidates(key) if vendor in node.gpus]
            sizes = [node.gpus[vendor] for node in members]
            memories = [m for m in (kai_gpu_memory_mib(m, vendor) for _, m in sizes) if m]  # as KAI fits gpu-memory pods
            node_gpus = max((g for g, _ in sizes), default=None)
            self.shapes[group] = GroupShape(
                nodes=len(sizes),
                node_gpus=node_gpus,
                gpu_memory_mib=min(memories, default=None),
                node_resources=self._room_of([n for n in members if n.gpus[vendor][0] == node_gpus]) if members else None,
            )
        self._groups[(key, vendor, spread)] = (group, self.shapes[group])
        return group, self.shapes[group]


# --- quota ------------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    """`text` cut at the last space within `limit` characters, with " ..." added; never mid-word."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit + 1)
    return text if cut <= 0 else text[:cut].rstrip() + " ..."


def quota_block_reason(pod: Pod, pod_groups: Mapping[tuple[str, str], PodGroup]) -> Optional[str]:
    """Why KAI says the pod waits for its queue rather than for nodes, or None."""
    cond = pod.condition("PodScheduled")
    return _quota_in_message(cond.message if cond is not None else None) or _quota_in_pod_group(pod, pod_groups)


def _quota_in_message(message: Any) -> Optional[str]:
    if says_queue_capacity(message):
        first_line = message.strip().splitlines()[0] if message.strip() else message
        return f"its queue is out of quota, not out of nodes (KAI: {_clip(first_line, 200)})"
    return None


def _quota_in_pod_group(pod: Pod, pod_groups: Mapping[tuple[str, str], PodGroup]) -> Optional[str]:
    pod_group = pod_group_of(pod, pod_groups)
    reason = pod_group.quota_reason if pod_group is not None else None
    return f"its queue is out of quota, not out of nodes (PodGroup {pod_group_name(pod)}: {reason})" if reason else None


# --- selection ------------------------------------------------------------------------------


def _mentions_gpu_resources(spec: Mapping[str, Any]) -> bool:
    """Whether any container names a GPU resource at all (the full count is inventory's pod_gpu_requests)."""
    keys = _GPU_KEYS
    for containers in (spec.get("containers"), spec.get("initContainers")):
        if not isinstance(containers, list):
            continue
        for container in containers:
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for part in (resources.get("requests"), resources.get("limits")):
                if isinstance(part, dict) and (keys[0] in part or keys[1] in part):
                    return True
    return False


class ClusterSnapshot:
    """One pass's cluster as the decision reads it: the pods, nodes and PodGroups, and `now`, each read once.

    The pods and nodes are their typed views (`core/views.py`); objects that are not objects at all are left
    out. A pass asks for demand several times (the whole plan, and the pods each placeholder on a node holds);
    each of those reads the nodes' GPUs, labels, taints and room and the PodGroups from here, not again
    from the objects. A new input of the decision is one field here and one reader.
    """

    def __init__(self, pods: Iterable[Pod], nodes: Optional[Iterable[Node]], now: datetime, pod_groups: Iterable[Any] = ()) -> None:
        self.pods = list(pods)
        self.nodes = list(nodes) if nodes is not None else None
        self.now = _aware(now)
        self.pod_groups = list(pod_groups)

    @classmethod
    def read(cls, pods: Iterable[Any], nodes: Optional[Iterable[Any]], now: datetime, pod_groups: Iterable[Any] = ()) -> "ClusterSnapshot":
        """The snapshot of the objects as listed (`nodes` None: not known)."""
        return cls([read_pod(p) for p in pods if is_object(p)],
                   None if nodes is None else [read_node(n) for n in nodes if is_object(n)], now, pod_groups)

    def with_pods(self, pods: Iterable[Pod]) -> "ClusterSnapshot":
        """The same cluster with only `pods` (the nodes and PodGroups as read here, not again)."""
        other = ClusterSnapshot(pods, None, self.now, self.pod_groups)
        other.nodes = self.nodes
        for name in ("node_facts", "pod_group_index"):
            if name in self.__dict__:
                other.__dict__[name] = self.__dict__[name]
        return other

    @functools.cached_property
    def node_facts(self) -> tuple[Optional[list[_NodeFacts]], list[str]]:
        """Each node's name, labels, taints, GPUs and room (None: no nodes known), and what was wrong in them."""
        return _node_facts(self.nodes) if self.nodes is not None else (None, [])

    @functools.cached_property
    def pod_group_index(self) -> dict[tuple[str, str], PodGroup]:
        return index_pod_groups(self.pod_groups)


def select_demand(
    pods: Iterable[Any],
    nodes: Optional[Iterable[Any]],
    settings: AdjusterSettings,
    now: datetime,
    pod_groups: Iterable[Any] = (),
) -> DemandSelection:
    """Decide for every annotated pod whether it is demand for new GPUs, and how much."""
    return demand_in(ClusterSnapshot.read(pods, nodes, now, pod_groups), settings)


def demand_in(snapshot: ClusterSnapshot, settings: AdjusterSettings, pods: Optional[Iterable[Pod]] = None) -> DemandSelection:
    """`select_demand` on a pass's snapshot, for its pods or the subset `pods` of them."""
    node_facts, warnings = snapshot.node_facts
    groups = _Groups(node_facts, settings)
    pods = snapshot.pods if pods is None else list(pods)
    if node_facts:
        groups.daemon_requests = _daemon_set_requests(pods)
    pg_index = snapshot.pod_group_index
    now = snapshot.now
    pieces: list[DemandPiece] = []
    ignored: list[IgnoredPod] = []
    skipped: dict[str, int] = {}

    for pod in pods:
        annotations = pod.meta.annotations
        if not annotations or not asks_for_share(annotations):
            continue
        outcome = _judge(pod, groups, settings, now, pg_index)
        if isinstance(outcome, DemandPiece):
            pieces.append(outcome)
        elif outcome.code in ("bound", "finished"):
            skipped[outcome.code] = skipped.get(outcome.code, 0) + 1
        else:
            ignored.append(outcome)
    return DemandSelection(
        pieces=tuple(pieces),
        ignored=tuple(ignored),
        skipped=skipped,
        shapes=dict(groups.shapes),
        warnings=tuple(warnings),
    )


def _daemon_set_requests(pods: Sequence[Pod]) -> dict[str, dict[str, int]]:
    """Per node, the sum of what the DaemonSet pods bound there request (every node of the group runs them)."""
    found: dict[str, dict[str, int]] = {}
    for pod in pods:
        if not pod.node_name or pod.finished or not pod.meta.owned_by_kind("DaemonSet"):
            continue
        mine = found.setdefault(pod.node_name, {})
        for name, amount in pod_resource_requests(pod.spec):
            mine[name] = mine.get(name, 0) + amount
    return found


#: Why a pod is not demand: (code, reason).
_Verdict = tuple[str, str]


def _judge(pod: Pod, groups: _Groups, settings: AdjusterSettings, now: datetime,
           pod_groups: Mapping[tuple[str, str], PodGroup]) -> DemandPiece | IgnoredPod:
    """The pod's demand piece, or why it is not one: each step below may say why not."""
    key = pod.key
    verdict = _not_pending_here(pod, settings)
    if verdict is not None:
        return IgnoredPod(key, *verdict)
    spec = pod.spec
    verdict, share, vendor = _what_it_asks(pod.meta.annotations, groups)
    if verdict is None:
        problem, constraints = groups.constraints(spec)
        verdict = ("bad-constraints", problem) if problem else None
    if verdict is not None:
        return IgnoredPod(key, *verdict)
    verdict, waited = _waiting_for_nodes(pod, groups, settings, now, pod_groups)
    if verdict is not None:
        return IgnoredPod(key, *verdict)
    assert share is not None and share.devices is not None  # _what_it_asks refuses a share it cannot read
    spread = host_spread(pod) if (spec.get("topologySpreadConstraints") or as_dict(spec.get("affinity")).get("podAntiAffinity")) else None
    group, shape = groups.group(constraints, groups.vendor_for(constraints, vendor), spread.to_json() if spread is not None else "")
    if group.vendor not in KAI_SHARED_VENDORS:
        return IgnoredPod(key, "vendor-not-shared", f"KAI shares NVIDIA GPUs only (its binder reserves each shared GPU with a pod "
                          f"asking for nvidia.com/gpu and finds its index with NVML): a node with {group.resource_key} "
                          "would not let this pod run, so none is asked for")
    verdict, fraction, source = _share_of_a_gpu(share, group, shape, groups, settings)
    if verdict is not None:
        return IgnoredPod(key, *verdict)
    resources = pod_resource_requests(spec)
    verdict = _too_large(resources, shape)
    if verdict is not None:
        return IgnoredPod(key, *verdict)
    return DemandPiece(
        pod=key,
        fraction=fraction,
        devices=share.devices,
        group=group,
        source=source,
        memory_mib=share.memory_mib,
        waiting_seconds=waited,
        created=pod.meta.created,
        resources=resources,
    )


def _not_pending_here(pod: Pod, settings: AdjusterSettings) -> Optional[_Verdict]:
    """Why the pod is not a pending pod of our scheduler that shares GPUs (malformed, landed, whole GPUs), or None."""
    if not pod.meta.name:
        return "malformed", "the pod has no metadata.name"
    if not pod.has_spec:
        return "malformed", "the pod has no spec"
    if pod.finished:
        return "finished", f"phase {pod.phase}"
    if pod.bound:
        return "bound", f"bound to node {pod.spec.get('nodeName')}"
    if pod.meta.deleting:
        return "deleting", "the pod is being deleted"
    scheduler = pod.scheduler_name
    if scheduler != settings.scheduler_name:
        return "other-scheduler", f"scheduled by {scheduler:.63}, not {settings.scheduler_name}: its GPU-sharing annotation has no effect"
    whole = pod_gpu_requests(pod) if _mentions_gpu_resources(pod.spec) else None
    if whole:
        asked = ", ".join(f"{n} {k}" for k, n in sorted(whole.items()))
        return "whole-gpu-request", f"requests whole GPUs ({asked}): the cluster autoscaler sees those itself"
    return None


def _what_it_asks(annotations: Mapping[str, Any], groups: _Groups) -> tuple[Optional[_Verdict], Optional[KaiShare], Optional[str]]:
    """(why its annotations are not a request, the share it asks for, the vendor it names). The share is read by
    kai/share.py, as for pods that landed."""
    share = read_kai_share(annotations, groups.parsed_texts)
    if share.problem or share.devices is None:
        return ("bad-annotation", share.problem or "bad gpu-fraction-num-devices"), None, None
    vendor_annotation = annotations.get(GPU_VENDOR_ANNOTATION)
    vendor: Optional[str] = None
    if vendor_annotation is not None:
        vendor = vendor_annotation.lower() if isinstance(vendor_annotation, str) else None
        if vendor not in VENDORS:
            return ("bad-annotation", f"{GPU_VENDOR_ANNOTATION} {vendor_annotation!r} is not one of {', '.join(VENDORS)}"), None, None
    return None, share, vendor


def _waiting_for_nodes(pod: Pod, groups: _Groups, settings: AdjusterSettings, now: datetime,
                       pod_groups: Mapping[tuple[str, str], PodGroup]) -> tuple[Optional[_Verdict], Optional[float]]:
    """(why it does not wait for nodes: not Unschedulable, within the grace period, out of quota; seconds it waited)."""
    cond: Optional[Condition] = pod.condition("PodScheduled")  # KAI and kube-scheduler keep one
    if cond is None or cond.status != "False" or cond.reason != "Unschedulable":
        shown = "no PodScheduled condition" if cond is None else f"PodScheduled {cond.status or '-'}/{cond.reason or '-'}"
        return ("not-unschedulable", f"not marked Unschedulable ({shown})"), None
    waited = _waited(cond.last_transition_time, groups, now)
    if settings.grace_period_seconds > 0:
        if waited is None:
            return ("grace-period", "PodScheduled has no valid lastTransitionTime: how long it has waited is unknown"), None
        if waited < settings.grace_period_seconds:
            return ("grace-period", f"unschedulable for {max(waited, 0):.1f} s, under the {settings.grace_period_seconds:g} s grace period"), None
    message = cond.message
    if message:
        if message in groups.quota_messages:
            blocked = groups.quota_messages[message]
        else:
            blocked = _quota_in_message(message)
            if len(groups.quota_messages) < 10_000:
                groups.quota_messages[message] = blocked
    else:
        blocked = None
    blocked = blocked or _quota_in_pod_group(pod, pod_groups)
    if blocked:
        return ("quota-blocked", blocked), None
    return None, waited


def _waited(stamp: Any, groups: _Groups, now: datetime) -> Optional[float]:
    """Seconds since the transition time `stamp` (None: not a time), once per distinct text."""
    if isinstance(stamp, str) and stamp in groups.waits:
        return groups.waits[stamp]
    waited = None
    since = parse_rfc3339(stamp) if isinstance(stamp, str) else None
    if since is not None:
        waited = (now - since).total_seconds()
    if isinstance(stamp, str) and len(groups.waits) < 100_000:
        groups.waits[stamp] = waited
    return waited


def _share_of_a_gpu(share: KaiShare, group: ConstraintGroup, shape: GroupShape, groups: _Groups,
                    settings: AdjusterSettings) -> tuple[Optional[_Verdict], Fraction, str]:
    """(why it fits no node of its group, the fraction of each GPU it asks for, where that fraction came from)."""
    devices, memory_mib = share.devices or 1, share.memory_mib
    node_gpus = shape.node_gpus or settings.node_gpus
    if node_gpus is not None and devices > node_gpus:
        where = "the largest node it may land on has" if shape.node_gpus else "nodes have (--node-gpus)"
        return ("too-many-devices", f"asks for {devices} devices, but {where} {node_gpus} {group.resource_key}"), Fraction(0), ""
    if node_gpus is None and devices > MAX_NODE_GPUS:
        return ("too-many-devices", f"asks for {devices} devices, but no GPU node holds more than {MAX_NODE_GPUS} "
                                    "(no node of its group is known: pass --node-gpus to say what yours hold)"), Fraction(0), ""
    if share.fraction is not None:
        return None, share.fraction, "gpu-fraction"
    if not shape.gpu_memory_mib:
        return None, settings.memory_fallback_fraction, "gpu-memory-fallback"
    if (memory_mib or 0) > shape.gpu_memory_mib:  # the fraction is above 1, compared without Fraction arithmetic
        return ("memory-exceeds-gpu", f"asks for {memory_mib} MiB per GPU, but the GPUs it may land on have {shape.gpu_memory_mib} MiB"), Fraction(0), ""
    fraction = groups.memory_fractions.get((memory_mib or 0, shape.gpu_memory_mib))
    if fraction is None:
        fraction = Fraction(memory_mib or 0, shape.gpu_memory_mib)
        groups.memory_fractions[(memory_mib or 0, shape.gpu_memory_mib)] = fraction
    return None, fraction, "gpu-memory"


def _too_large(resources: tuple[tuple[str, int], ...], shape: GroupShape) -> Optional[_Verdict]:
    """Why what the pod requests besides GPUs fits no node of its group (allocatable less DaemonSet pods), or None."""
    if not resources or shape.node_resources is None:
        return None
    room = dict(shape.node_resources)
    short = [(name, amount) for name, amount in resources if amount > room.get(name, 0)]
    if not short:
        return None
    said = ", ".join(f"{format_milli(name, amount)} {name}" for name, amount in short)
    has = ", ".join(f"{format_milli(name, room.get(name, 0))}" for name, _ in short)
    return "too-large", f"requests {said}, but a node it may land on has room for {has} (allocatable less its DaemonSet pods)"
