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
per-pod warning (the controller posts a `ScaleUpIgnored` event for it). Pods of the scheduler whose GPUs come
through ResourceClaims are judged the same way, their devices counted by claims.py; which nodes a pod may land
on, and what those say, is groups.py's.

Pure: no I/O, no clock (the caller passes `now`), no ray or kubernetes
imports. It never raises on a malformed pod, node or annotation. How the
pieces become whole GPUs is `adjuster/decision/packing.py`'s business; KAI's own rule is
`kai/node_scale_adjuster.py`.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from raybridge.adjuster.decision.claims import CLAIM_UNPLANNABLE, CLAIMS_SEEN, ClaimDemand, ClaimReader, Claims, read_claims
from raybridge.adjuster.decision.groups import (  # noqa: F401 - ConstraintGroup, GroupShape, base_group_id: read from here too
    ConstraintGroup,
    FactsIndex,
    GroupShape,
    Groups,
    NodeFacts,
    base_group_id,
)
from raybridge.adjuster.decision.groups import node_facts as read_node_facts
from raybridge.adjuster.decision.host_spread import host_spread
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.core.consts import GPU_RESOURCE_KEYS, GPU_VENDOR_ANNOTATION, VENDORS
from raybridge.kai.names import KAI_GPU_MEMORY_LABEL
from raybridge.core.inventory import DeviceSources, format_milli, pod_gpu_requests, resource_requests_of
from raybridge.core.kubeobjects import as_dict, parse_rfc3339
from raybridge.core.quantity import format_fraction
from raybridge.core.views import Condition, Node, Pod, is_object, pod_fact, read_node, read_pods, scheduled_condition
from raybridge.kai.pod_group import PodGroup, index_pod_groups, pod_group_name, pod_group_of, says_queue_capacity
from raybridge.kai.share import KaiShare, asks_for_share, read_kai_share

#: No GPU node holds more GPUs than this (the largest GPU servers hold 8 or 16). Where the group's node size is not
#: known (a pool scaled from zero, no --node-gpus), a pod asking for more devices can never land, and the packer's
#: work grows with every device it asks for: it is refused before any work (a tenant pod cannot stall the pass).
MAX_NODE_GPUS = 64


_GPU_KEYS = tuple(GPU_RESOURCE_KEYS.values())


@dataclass(frozen=True)
class DemandPiece:
    """One pending pod's need: `fraction` of a GPU on each of `devices` distinct GPUs of one node."""

    pod: str
    fraction: Fraction
    devices: int
    group: ConstraintGroup
    #: "gpu-fraction", "gpu-memory" (converted with the group's GPU memory), "gpu-memory-fallback", or "claim"
    #: (whole devices of ResourceClaims, claims.py).
    source: str
    memory_mib: Optional[int] = None
    waiting_seconds: Optional[float] = None
    #: metadata.creationTimestamp as given (RFC 3339, so it sorts as text): the scheduler's order among equals.
    created: Optional[str] = None
    #: What else it requests of a node (CPU, memory, ...): (name, thousandths of its unit), sorted.
    resources: tuple[tuple[str, int], ...] = ()

    def share_on(self, gpu_memory_mib: Optional[int]) -> Optional[Fraction]:
        """Its fraction of each GPU of a node whose GPUs have `gpu_memory_mib` (KAI's reading; None: unknown): a
        gpu-memory pod's own memory of that node's GPU, as KAI fits it (node_info.go getGpuMemoryFractionalOnNode,
        gpu_sharing_node_info.go enoughResourcesOnGpu: the node's own MemoryOfEveryGpuOnNode), None where it does
        not fit one; `fraction` where the memory is unknown or the pod asks for a fraction."""
        if self.memory_mib is None or not gpu_memory_mib or self.source == "gpu-fraction":
            return self.fraction
        if self.memory_mib > gpu_memory_mib:
            return None
        return Fraction(self.memory_mib, gpu_memory_mib)

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
    #: `memories_of(shapes)`: what this pass saw of its groups' GPU memories, for a later one.
    memories: Mapping[tuple[tuple[str, str, str], str], int] = field(default_factory=dict)


# --- small readers that never raise --------------------------------------------------------


def _aware(now: datetime) -> datetime:
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)


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

    def __init__(self, pods: Iterable[Pod], nodes: Optional[Iterable[Node]], now: datetime, pod_groups: Iterable[Any] = (),
                 devices: Optional[DeviceSources] = None, claims: Optional[Claims] = None,
                 memories_seen: Optional[Mapping[tuple[tuple[str, str, str], str], int]] = None) -> None:
        self.pods = list(pods)
        self.nodes = list(nodes) if nodes is not None else None
        self.now = _aware(now)
        self.pod_groups = list(pod_groups)
        #: The nodes' GPUs published as DRA devices, the classes that claim them, the devices allocated (core/inventory.py).
        self.devices = devices or DeviceSources()
        #: The ResourceClaims pods name (claims.py).
        self.claims = claims or Claims()
        #: Per constraints and vendor, the largest GPU memory of their nodes when one was last seen (`memories_of` of
        #: an earlier pass, the controller's to keep): a gpu-memory pod above it is refused while none is known.
        self.memories_seen = dict(memories_seen or {})

    @classmethod
    def read(cls, pods: Iterable[Any], nodes: Optional[Iterable[Any]], now: datetime, pod_groups: Iterable[Any] = (),
             slices: Iterable[Any] = (), classes: Iterable[Any] = (), claims: Optional[Iterable[Any]] = None,
             pod_views: Callable[[Iterable[Any]], list[Pod]] = read_pods) -> "ClusterSnapshot":
        """The snapshot of the objects as listed (`nodes` None: not known; `claims` None: ResourceClaims not known).
        `pod_views`: the pods' views (`core.views.read_pods`; the controller's keeps those of unchanged objects)."""
        classes = list(classes)
        claims = None if claims is None else list(claims)
        return cls(pod_views(pods),
                   None if nodes is None else [read_node(n) for n in nodes if is_object(n)], now, pod_groups,
                   DeviceSources.read(slices, classes, claims) if slices or claims else None,
                   read_claims(claims or (), classes) if claims else None)

    def with_pods(self, pods: Iterable[Pod]) -> "ClusterSnapshot":
        """The same cluster with only `pods` (the nodes, PodGroups and DRA objects as read here, not again)."""
        other = ClusterSnapshot(pods, None, self.now, self.pod_groups, self.devices, self.claims, self.memories_seen)
        other.nodes = self.nodes
        for name in ("node_facts", "facts_index", "pod_group_index"):
            if name in self.__dict__:
                other.__dict__[name] = self.__dict__[name]
        return other

    @functools.cached_property
    def node_facts(self) -> tuple[Optional[list[NodeFacts]], list[str]]:
        """Each node's name, labels, taints, GPUs and room (None: no nodes known), and what was wrong in them."""
        return read_node_facts(self.nodes, self.devices) if self.nodes is not None else (None, [])

    @functools.cached_property
    def facts_index(self) -> Optional[FactsIndex]:
        """The nodes' facts as bit sets, for every group of every demand the pass asks for (None: no nodes known)."""
        facts = self.node_facts[0]
        return FactsIndex(facts) if facts is not None else None

    @functools.cached_property
    def pod_group_index(self) -> dict[tuple[str, str], PodGroup]:
        return index_pod_groups(self.pod_groups)


def select_demand(
    pods: Iterable[Any],
    nodes: Optional[Iterable[Any]],
    settings: AdjusterSettings,
    now: datetime,
    pod_groups: Iterable[Any] = (),
    **dra: Any,
) -> DemandSelection:
    """Decide for every annotated pod (and every pod whose GPUs come through claims) whether it is demand for new GPUs,
    and how much. `dra`: the `slices`, `classes` and `claims` of `ClusterSnapshot.read`."""
    return demand_in(ClusterSnapshot.read(pods, nodes, now, pod_groups, **dra), settings)


def demand_in(snapshot: ClusterSnapshot, settings: AdjusterSettings, pods: Optional[Iterable[Pod]] = None) -> DemandSelection:
    """`select_demand` on a pass's snapshot, for its pods or the subset `pods` of them."""
    node_facts, warnings = snapshot.node_facts
    groups = Groups(node_facts, settings, snapshot.facts_index)
    groups.memories_seen = snapshot.memories_seen
    pods = snapshot.pods if pods is None else list(pods)
    if node_facts:
        groups.daemon_requests = _daemon_set_requests(pods)
    pg_index = snapshot.pod_group_index
    now = snapshot.now
    pieces: list[DemandPiece] = []
    ignored: list[IgnoredPod] = []
    skipped: dict[str, int] = {}
    claimed: list[Pod] = []
    scheduler = settings.scheduler_name

    for pod in pods:
        annotations = pod.meta.annotations
        if not annotations or not asks_for_share(annotations):
            if pod.spec.get("resourceClaims") and pod.scheduler_name == scheduler:
                claimed.append(pod)
            continue
        outcome = _judge(pod, groups, settings, now, pg_index)
        if isinstance(outcome, DemandPiece):
            pieces.append(outcome)
        elif outcome.code in ("bound", "finished"):
            skipped[outcome.code] = skipped.get(outcome.code, 0) + 1
        else:
            ignored.append(outcome)
    if claimed:  # in the scheduler's order, so that a claim several pods share counts for the first
        reader = ClaimReader(snapshot.claims)
        for pod in sorted(claimed, key=lambda p: (p.meta.created is None, p.meta.created or "", p.key)):
            found = _judge_claims(pod, groups, settings, now, pg_index, reader)
            if isinstance(found, DemandPiece):
                pieces.append(found)
            elif found is not None and found.code in ("bound", "finished"):
                skipped[found.code] = skipped.get(found.code, 0) + 1
            elif found is not None:
                ignored.append(found)
    if settings.gpu_memory_label:
        pieces = _memory_for_unknown_nodes(pieces, groups)
    return DemandSelection(
        pieces=tuple(pieces),
        ignored=tuple(ignored),
        skipped=skipped,
        shapes=dict(groups.shapes),
        warnings=tuple(warnings),
        memories=memories_of(groups.shapes),
    )


#: KAI floors a GPU's memory to a multiple of this many MiB (`kai_gpu_memory_mib`).
KAI_MEMORY_STEP_MIB = 100


def _memory_for_unknown_nodes(pieces: list[DemandPiece], groups: Groups) -> list[DemandPiece]:
    """The gpu-memory pods of a group with no node known (a pool scaled from zero) in the group of nodes whose GPUs hold
    the largest of them: their placeholders then ask for that memory, so the autoscaler brings a node type that holds
    every one (a cheaper type of smaller GPUs held only some, and the rest waited for good). Their share stays the
    fallback fraction: which of the fitting types comes is the autoscaler's choice."""
    largest: dict[ConstraintGroup, int] = {}
    for piece in pieces:
        if piece.source == "gpu-memory-fallback" and piece.memory_mib and not groups.shapes[piece.group].nodes:
            largest[piece.group] = max(largest.get(piece.group, 0), piece.memory_mib)
    if not largest:
        return pieces
    moved: dict[ConstraintGroup, ConstraintGroup] = {}
    for group, memory in largest.items():
        floor = -(-memory // KAI_MEMORY_STEP_MIB) * KAI_MEMORY_STEP_MIB  # a label at least this is a GPU KAI fits it on
        key = (group.node_selector_json, group.affinity_terms_json, group.tolerations_json)
        moved[group] = groups.group(key, group.vendor, group.host_spread_json, floor)[0]
    return [replace(p, group=moved[p.group]) if p.source == "gpu-memory-fallback" and p.group in moved else p for p in pieces]


def _daemon_set_requests(pods: Sequence[Pod]) -> dict[str, dict[str, int]]:
    """Per node, the sum of what the DaemonSet pods bound there request (every node of the group runs them)."""
    found: dict[str, dict[str, int]] = {}
    for pod in pods:
        if not pod.node_name or pod.finished or not pod.meta.owned_by_kind("DaemonSet"):
            continue
        mine = found.setdefault(pod.node_name, {})
        for name, amount in pod_fact(pod, resource_requests_of):
            mine[name] = mine.get(name, 0) + amount
    return found


#: Why a pod is not demand: (code, reason).
_Verdict = tuple[str, str]


def _judge(pod: Pod, groups: Groups, settings: AdjusterSettings, now: datetime,
           pod_groups: Mapping[tuple[str, str], PodGroup]) -> DemandPiece | IgnoredPod:
    """The pod's demand piece, or why it is not one: each step below may say why not."""
    key = pod.key
    verdict = _not_pending_here(pod, settings)
    if verdict is not None:
        return IgnoredPod(key, *verdict)
    spec = pod.spec
    verdict, share, vendor = pod_fact(pod, _what_it_asks, groups)
    if verdict is None:
        problem, constraints = pod_fact(pod, _constraints_of_pod, groups)
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
    if not shape.nodes:
        dra_only, _ = groups.gpus_elsewhere(constraints, group.vendor)
        if dra_only:
            return IgnoredPod(key, DRA_ONLY_NODES, _dra_only_reason(dra_only))
    verdict, fraction, source = _share_of_a_gpu(share, group, shape, settings)
    if verdict is None and source == "gpu-memory":  # the nodes its memory fits: its group and the share of their GPUs
        verdict, fraction, group, shape = _memory_class(share, constraints, group, shape, groups)
        if verdict is None:
            verdict, _, _ = _share_of_a_gpu(share, group, shape, settings)  # their node size
    if verdict is None and source == "gpu-memory-fallback":
        verdict = _exceeds_memory_seen(share.memory_mib, groups.memories_seen.get((constraints, group.vendor)))
    if verdict is not None:
        return IgnoredPod(key, *verdict)
    resources = pod_fact(pod, resource_requests_of)
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


#: A GPU-sharing pod whose nodes publish their GPUs as DRA devices alone (IgnoredPod code).
DRA_ONLY_NODES = "dra-only-nodes"


def _dra_only_reason(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
    return (f"the nodes it may land on ({shown}) publish their GPUs as DRA devices alone, no device plugin counts them: KAI "
            "shares device-plugin GPUs only (v0.12.0 counts a node's GPUs from its allocatable, node_info.go), and newer KAI "
            "refuses the pod there (\"fractional/shared GPU pods are not yet supported on DRA-only nodes\", v0.17.0 node_info.go "
            "PredicateByNodeResourcesType), so no placeholder is made for it")


def _judge_claims(pod: Pod, groups: Groups, settings: AdjusterSettings, now: datetime,
                  pod_groups: Mapping[tuple[str, str], PodGroup], reader: ClaimReader) -> DemandPiece | IgnoredPod | None:
    """The demand piece of a pod whose GPUs come through ResourceClaims (claims.py), why it is not one, or None where
    its claims ask for no GPU."""
    key = pod.key
    problem, wanted = reader.gpu_requests(pod)
    if problem is None and not wanted:
        return None
    constraints: tuple[str, str, str] = ("", "", "")
    waited: Optional[float] = None
    demand: Optional[ClaimDemand] = None
    verdict = _not_pending_here(pod, settings)
    if verdict is None and problem is not None:
        verdict = problem
    if verdict is None:
        bad, constraints = pod_fact(pod, _constraints_of_pod, groups)
        verdict = ("bad-constraints", bad) if bad else None
    if verdict is None:
        verdict, waited = _waiting_for_nodes(pod, groups, settings, now, pod_groups)
    if verdict is None and settings.autoscaler_reads_dra:
        verdict = (CLAIMS_SEEN, "its GPUs come through ResourceClaims, which the autoscaler reads itself (--autoscaler-reads-dra): "
                                "a placeholder would ask for them twice")
    if verdict is None:
        verdict, demand = reader.count(pod, wanted)
    if verdict is not None or demand is None:
        return IgnoredPod(key, *(verdict or ("malformed", "its claims could not be read")))
    group, shape = groups.group(constraints, demand.vendor, "", 0, demand.device_class)
    if not shape.nodes:
        dra_only, plugin_only = groups.gpus_elsewhere(constraints, demand.vendor)
        if dra_only:
            return IgnoredPod(key, DRA_ONLY_NODES, f"its claims ask for {demand.device_class} devices and the nodes it may land on "
                              f"({', '.join(dra_only[:3])}{' and more' if len(dra_only) > 3 else ''}) have them as DRA devices alone: "
                              f"the autoscaler reads no DRA, and a placeholder asking for {group.resource_key} would not fit them")
        if plugin_only:
            return IgnoredPod(key, CLAIM_UNPLANNABLE, f"its claims ask for {demand.device_class} devices, and no node it may land on "
                              f"publishes any ({', '.join(plugin_only[:3])}{' and more' if len(plugin_only) > 3 else ''} count "
                              f"{group.resource_key} through the device plugin alone)")
    node_gpus = shape.node_gpus or settings.node_gpus or MAX_NODE_GPUS
    if demand.devices > node_gpus:
        return IgnoredPod(key, "too-many-devices", f"its claims ask for {demand.devices} {demand.device_class} devices, but a node "
                          f"it may land on has {node_gpus} at most")
    resources = pod_fact(pod, resource_requests_of)
    verdict = _too_large(resources, shape)
    if verdict is not None:
        return IgnoredPod(key, *verdict)
    return DemandPiece(pod=key, fraction=Fraction(1), devices=demand.devices, group=group, source="claim",
                       waiting_seconds=waited, created=pod.meta.created, resources=resources)


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
    whole = pod_fact(pod, _whole_gpus)
    if whole:
        asked = ", ".join(f"{n} {k}" for k, n in sorted(whole.items()))
        return "whole-gpu-request", f"requests whole GPUs ({asked}): the cluster autoscaler sees those itself"
    return None


def _whole_gpus(pod: Pod) -> Optional[dict[str, int]]:
    """The whole GPUs the pod's containers request (None: none names a GPU resource at all)."""
    return pod_gpu_requests(pod) if _mentions_gpu_resources(pod.spec) else None


def _constraints_of_pod(pod: Pod, groups: Groups) -> tuple[Optional[str], tuple[str, str, str]]:
    """`Groups.constraints` of the pod's spec (a function of the spec alone, `groups` only keeps it per spelling)."""
    return groups.constraints(pod.spec)


def _what_it_asks(pod: Pod, groups: Groups) -> tuple[Optional[_Verdict], Optional[KaiShare], Optional[str]]:
    """(why its annotations are not a request, the share it asks for, the vendor it names). The share is read by
    kai/share.py, as for pods that landed; `groups` keeps what each distinct text parsed to."""
    annotations = pod.meta.annotations
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


def _waiting_for_nodes(pod: Pod, groups: Groups, settings: AdjusterSettings, now: datetime,
                       pod_groups: Mapping[tuple[str, str], PodGroup]) -> tuple[Optional[_Verdict], Optional[float]]:
    """(why it does not wait for nodes: not Unschedulable, within the grace period, out of quota; seconds it waited)."""
    cond: Optional[Condition] = pod_fact(pod, scheduled_condition)  # KAI and kube-scheduler keep one
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


def _waited(stamp: Any, groups: Groups, now: datetime) -> Optional[float]:
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


def _share_of_a_gpu(share: KaiShare, group: ConstraintGroup, shape: GroupShape,
                    settings: AdjusterSettings) -> tuple[Optional[_Verdict], Fraction, str]:
    """(why it fits no node of its group, the fraction of each GPU it asks for, where that fraction came from:
    "gpu-memory" when its nodes' GPU memory is known, the fraction then `_memory_class`'s)."""
    devices = share.devices or 1
    node_gpus = shape.node_gpus or settings.node_gpus
    if node_gpus is not None and devices > node_gpus:
        where = "the largest node it may land on has" if shape.node_gpus else "nodes have (--node-gpus)"
        return ("too-many-devices", f"asks for {devices} devices, but {where} {node_gpus} {group.resource_key}"), Fraction(0), ""
    if node_gpus is None and devices > MAX_NODE_GPUS:
        return ("too-many-devices", f"asks for {devices} devices, but no GPU node holds more than {MAX_NODE_GPUS} "
                                    "(no node of its group is known: pass --node-gpus to say what yours hold)"), Fraction(0), ""
    if share.fraction is not None:
        return None, share.fraction, "gpu-fraction"
    if not shape.gpu_memories:
        return None, settings.memory_fallback_fraction, "gpu-memory-fallback"
    return None, Fraction(0), "gpu-memory"


def _memory_class(share: KaiShare, constraints: tuple[str, str, str], group: ConstraintGroup, shape: GroupShape,
                  groups: Groups) -> tuple[Optional[_Verdict], Fraction, ConstraintGroup, GroupShape]:
    """(why no GPU of its nodes holds it, its fraction, its group, that group's shape) for a gpu-memory pod whose nodes'
    GPU memory is known.

    KAI fits a gpu-memory pod on each node by that node's own GPU memory (kai-scheduler@v0.12.0
    pkg/scheduler/api/node_info/node_info.go: MemoryOfEveryGpuOnNode from the node's label, isValidGpuPortion;
    gpu_sharing_node_info.go enoughResourcesOnGpu), so one group of nodes with GPUs of several sizes is, for it, only
    the nodes whose GPUs hold it: the group of nodes of at least the smallest such memory, its share of each GPU of
    that memory. The placeholder then asks for that memory (`ConstraintGroup.memory_requirement`), so that an
    autoscaler with a cheaper type of smaller GPUs brings one that holds the pod. Where every GPU of the group's nodes
    holds it, it stays in the group (its share of the smallest GPU), beside the pods it may share GPUs with, and its
    placeholder requires nothing of memory: no node type known is too small, and an autoscaler that does not know
    the memory label would find no node type for a placeholder that requires it.
    """
    memory = share.memory_mib or 0
    memories = shape.gpu_memories
    if memory > memories[-1]:
        return (("memory-exceeds-gpu", f"asks for {memory} MiB per GPU, but the GPUs of the nodes it may land on have at most "
                                       f"{memories[-1]} MiB (as KAI reads their {KAI_GPU_MEMORY_LABEL} label)"), Fraction(0), group, shape)
    smallest = memories[bisect.bisect_left(memories, memory)]
    fraction = groups.memory_fractions.get((memory, smallest))
    if fraction is None:
        fraction = Fraction(memory, smallest)
        groups.memory_fractions[(memory, smallest)] = fraction
    if smallest == memories[0]:  # every GPU of its nodes holds it: their group, with the pods it may share GPUs with
        return None, fraction, group, shape
    fitting_group, fitting_shape = groups.group(constraints, group.vendor, group.host_spread_json, smallest)
    return None, fraction, fitting_group, fitting_shape


def _exceeds_memory_seen(memory: Optional[int], seen: Optional[int]) -> Optional[_Verdict]:
    """Why a gpu-memory pod of a pool with no node now is refused where the GPUs of the pool's nodes, when one was last
    seen, were all smaller (`ClusterSnapshot.memories_seen`): the node a placeholder brought would hold it no more
    than the last did (a pod larger than every GPU of a pool scaled from zero cost an empty node, and once that node
    was consolidated, another), or None."""
    if not memory or not seen or memory <= seen:
        return None
    return ("memory-exceeds-gpu", f"asks for {memory} MiB per GPU, but the GPUs of the nodes it may land on had at most {seen} MiB "
                                  f"(as KAI reads their {KAI_GPU_MEMORY_LABEL} label) when one was last seen: no node of theirs holds it")


def memories_of(shapes: Mapping[ConstraintGroup, GroupShape]) -> dict[tuple[tuple[str, str, str], str], int]:
    """Per constraints and vendor, the largest GPU memory (as KAI reads it) of the nodes the pass knows: what a later pass
    that knows none of them is given as `ClusterSnapshot.memories_seen`."""
    found: dict[tuple[tuple[str, str, str], str], int] = {}
    for group, shape in shapes.items():
        if shape.gpu_memories and not group.device_class:
            key = ((group.node_selector_json, group.affinity_terms_json, group.tolerations_json), group.vendor)
            found[key] = max(found.get(key, 0), shape.gpu_memories[-1])
    return found


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
