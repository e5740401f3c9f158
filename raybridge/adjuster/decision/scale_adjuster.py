"""One pass of the adjuster: the cached pods, nodes and PodGroups -> what to create and delete, and the objects.

Sits between the controller (which owns the cache and the clock) and the pure
decision (`adjuster/decision/reconcile.py`): it tells the adjuster's own placeholder pods
apart from the workload (by label), reads their state, and writes the
placeholder pod manifest. It does no I/O; the scaler acts on what it returns.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Iterable, Mapping, Optional, Sequence

from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.settings import RunSettings
from raybridge.adjuster.decision.host_spread import HOSTNAME_KEY
from raybridge.adjuster.decision.plan import Placeholder
from raybridge.autoscalers.provisioning_request import (
    BOOKING_EXPIRED,
    CAPACITY_REVOKED,
    FAILED,
    PROVISIONED,
    read_provisioning_state,
)
from raybridge.core.kubeobjects import parse_rfc3339
from raybridge.core.inventory import format_milli, pod_resource_requests
from raybridge.adjuster.decision.batch_window import BatchWindow
from raybridge.adjuster.decision.placeholders import FINISHED, PENDING, PROVIDED, TERMINATING, ExistingPlaceholder, PlannedPlaceholder, Reconcile
from raybridge.adjuster.decision.reconcile import reconcile_in
from raybridge.adjuster.decision.demand import ClusterSnapshot
from raybridge.core.views import Meta, Node, Pod, read_meta, read_node


def is_placeholder(pod: Pod, namespace: str) -> bool:
    labels = pod.meta.labels
    return (
        pod.meta.namespace == namespace
        and labels.get(consts.MANAGED_BY_LABEL) == consts.MANAGED_BY_VALUE
        and labels.get(consts.COMPONENT_LABEL) == consts.PLACEHOLDER_COMPONENT
    )


def read_placeholder(pod: Pod) -> Optional[ExistingPlaceholder]:
    """The placeholder's state, or None when its labels are not ours (never raises)."""
    identity = _signal_identity(pod.meta)
    if identity is None:
        return None
    name, group, gpus, pods = identity
    uid = pod.meta.uid
    if pod.meta.deleting:
        return ExistingPlaceholder(name, group, gpus, TERMINATING, pods, uid=uid)
    if pod.bound:
        return ExistingPlaceholder(name, group, gpus, PROVIDED, pods, _scheduled_at(pod), pod.spec.get("nodeName"), uid=uid)
    if pod.finished:
        return ExistingPlaceholder(name, group, gpus, FINISHED, pods, uid=uid)
    # The pods' requests it recorded; one made before they were recorded asked for them (its spec says them)
    resources = recorded_pod_requests(pod.meta.annotations)
    return ExistingPlaceholder(name, group, gpus, PENDING, pods, resources=pod_resource_requests(pod.spec) if resources is None else resources,
                               packed_onto_nodes=True, uid=uid)


def _signal_identity(meta: Meta) -> Optional[tuple[str, str, int, tuple[str, ...]]]:
    """(name, group, GPUs, pods) from a placeholder's or request's labels and annotation; None without a name.

    What our own objects say of themselves, read without trusting them: a GPU count that is not a number is
    0, a pods annotation that is not a JSON list of names is no pods.
    """
    if not meta.name:
        return None
    labels = meta.labels
    try:
        gpus = int(labels.get(consts.GPUS_LABEL, ""))
    except (ValueError, TypeError):
        gpus = 0
    try:
        listed = json.loads(meta.annotations.get(consts.PODS_ANNOTATION) or "[]")
        pods = tuple(p for p in listed if isinstance(p, str)) if isinstance(listed, list) else ()
    except (ValueError, TypeError):
        pods = ()
    return meta.name, meta.label(consts.GROUP_LABEL), gpus, pods


def _scheduled_at(pod: Pod) -> Optional[datetime]:
    for condition in pod.conditions:
        if condition.type == "PodScheduled" and condition.true:
            found = condition.transitioned_at
            if found:
                return found
    return parse_rfc3339(pod.status.get("startTime")) or pod.meta.created_at


@dataclass(frozen=True)
class Pass:
    decision: Reconcile
    placeholders: tuple[ExistingPlaceholder, ...]


def decide(snapshot: ClusterSnapshot, settings: RunSettings, held_back: Optional[Mapping[str, str]] = None) -> Pass:
    """One pass over the cluster as the caller read it (`ClusterSnapshot.read`: every pod, placeholders included; the
    PodGroups, whose scheduling conditions tell quota-blocked pods, where it has them). `held_back`: groups that get no
    new placeholder, and why (`reconcile_in`)."""
    workload: list[Pod] = []
    placeholders: list[ExistingPlaceholder] = []
    for pod in snapshot.pods:
        if is_placeholder(pod, settings.namespace):
            found = read_placeholder(pod)
            if found is not None:
                placeholders.append(found)
        else:
            workload.append(pod)
    decision = reconcile_in(
        snapshot.with_pods(workload),
        placeholders,
        settings.planner,
        provision_timeout_seconds=settings.provision_timeout,
        name_prefix=consts.NAME_PREFIX,
        batch=batch_window(settings),
        held_back=held_back,
    )
    return Pass(decision, tuple(placeholders))


def batch_window(settings: RunSettings) -> Optional[BatchWindow]:
    """The controller's batch window (None: `--batch-max-duration 0`, placeholders at once)."""
    return BatchWindow(settings.batch_idle, settings.batch_max) if settings.batch_max > 0 else None


@dataclass(frozen=True)
class NodeHolds:
    """Nodes to mark held (our label, and the hold annotations no one else set) and to release (what we set removed);
    `ours`: per node of either, the annotations that are ours to set or remove (the rest are someone else's)."""

    hold: tuple[str, ...]
    release: tuple[str, ...]
    ours: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def node_holds(nodes: Iterable[Node], held: Iterable[str]) -> NodeHolds:
    """What to change so that exactly the `held` nodes carry our hold.

    The hold keeps Karpenter from consolidating, and cluster-autoscaler from scaling down, a node whose placeholder
    has exited before KAI's pods are there (consts.HOLD_ANNOTATIONS); the label says the hold is ours (`kubectl get
    nodes -l raybridge.io/adjuster-hold`) and which annotations are ours (consts.HOLD_VALUES). No placeholder
    requires the label absent: cluster-autoscaler copies a live node's labels into its node group's template
    (cluster-autoscaler-1.36.1 processors/nodeinfosprovider/mixed_nodeinfos_processor.go, simulator/
    node_info_utils.go), so such a requirement kept every placeholder off the template while a node of the
    group was held, and the group never grew. An annotation someone else set (a NodePool template, an admin) is
    left as it is, set or released; a node held before the second annotation existed gets it added."""
    wanted = set(held)
    hold: list[str] = []
    release: list[str] = []
    ours: dict[str, tuple[str, ...]] = {}
    for node in nodes:
        name = node.name
        if not name:
            continue
        label = node.meta.labels.get(consts.HOLD_LABEL)
        mine = consts.HOLD_VALUES.get(label) if isinstance(label, str) else None
        annotations = node.meta.annotations
        if name in wanted:
            missing = tuple(a for a in consts.HOLD_ANNOTATIONS if a not in (mine or ()) and annotations.get(a) != "true")
            if mine is None or missing:
                hold.append(name)
                ours[name] = tuple(a for a in consts.HOLD_ANNOTATIONS if a in (mine or ()) or a in missing)
        elif mine is not None:
            release.append(name)
            ours[name] = mine
    return NodeHolds(tuple(sorted(hold)), tuple(sorted(release)), ours)


def hold_patch(hold: bool, ours: Sequence[str] = consts.HOLD_ANNOTATIONS) -> dict[str, Any]:
    """The merge patch that sets (or removes) the hold on a node: our label, saying which annotations are ours, and
    those annotations (`ours`; the others are someone else's, left as they are)."""
    value = next(v for v, annotations in consts.HOLD_VALUES.items() if set(annotations) == set(ours))
    metadata: dict[str, Any] = {"labels": {consts.HOLD_LABEL: value if hold else None}}
    if ours:
        metadata["annotations"] = {a: "true" if hold else None for a in consts.HOLD_ANNOTATIONS if a in ours}
    return {"metadata": metadata}


#: What a pass's decision rests on of one node: its name and uid, Ready or not, cordoned or not, and what it offers.
NodeCapacity = tuple[str, str, bool, bool, tuple[tuple[str, str], ...]]


def node_capacity(obj: Any) -> NodeCapacity:
    """What a pass's decision rests on of one node (a Node view or object): which node it is (a node replaced under
    the same name is another), whether it is Ready and schedulable, and its allocatable resources. Labels and
    annotations are left out: the adjuster's own hold changes them and no room. Never raises on a malformed node (it
    reads as one that offers nothing)."""
    node = obj if isinstance(obj, Node) else read_node(obj)
    offered = tuple(sorted((str(k), str(v)) for k, v in node.allocatable.items()))
    return (node.name, node.meta.uid, node.not_ready_reason() is None, node.cordoned, offered)


#: What a placeholder asks for at least, and may use at most, of CPU and memory (in thousandths): enough to run
#: `true`. The CPU grows by a thousandth of a core per GPU (`placeholder_resources`).
_LEAST_REQUESTS = {"cpu": 1, "memory": 8 * 2**20 * 1000}
_LEAST_LIMITS = {"cpu": 10, "memory": 16 * 2**20 * 1000}


def placeholder_resources(ph: Placeholder, carried: Optional[Mapping[str, int]] = None) -> dict[str, dict[str, str]]:
    """Whole GPUs, and the least CPU and memory `true` needs: not its pods' CPU, memory or other requests.

    Both autoscalers also place the waiting pods themselves, whatever their scheduler: cluster-autoscaler takes
    every pod marked PodScheduled=False/Unschedulable (utils/kubernetes/listers.go), Karpenter every such pod
    not yet bound (karpenter@v1.14.1 pkg/utils/pod/scheduling.go IsProvisionable), and KAI marks the pods it
    cannot place so. Those pods carry their own CPU and memory but no GPU (their share is an annotation), so
    the GPUs are what only the placeholder can say: asking for the pods' CPU again doubled it (4 pods of 0.5
    GPU and 20 CPU on 96-CPU nodes got two nodes where one holds them). KAI's own scaling pod does add the
    pod's CPU and memory (kai-scheduler@v0.12.0 pkg/nodescaleadjuster/scaler/scaling_pod.go) and so asks
    twice too. The pods' requests are recorded on the placeholder (consts.POD_REQUESTS_ANNOTATION) for the
    room its node must have. Limits equal the requests for the GPUs (extended resources must).

    The CPU request is one thousandth of a core per GPU: both autoscalers pack pending pods onto new nodes in
    the order of their CPU (and memory) requests, largest first (cluster-autoscaler
    estimator/decreasing_pod_orderer.go, a score of CPU and memory only; Karpenter
    provisioning/scheduling/queue.go), and with equal requests that order is arbitrary: placeholders of
    2, 3, 5, 6, 6 and 8 GPUs packed smallest first take five nodes of 8 where four hold them. Growing with the
    GPUs, the order is largest first and the packing the plan made is the one the autoscaler finds.

    `carried` (thousandths of CPU and memory): asked for where it is more, as a ProvisioningRequest's pod asks for
    its pods' (`request_pod_resources`)."""
    least = dict(_LEAST_REQUESTS, cpu=_LEAST_REQUESTS["cpu"] * max(ph.gpus, 1))
    wanted = {name: max(amount, (carried or {}).get(name, 0)) for name, amount in least.items()}
    most = {name: max(_LEAST_LIMITS[name], amount) for name, amount in wanted.items()}
    requests = {ph.resource_key: str(ph.gpus), **{name: format_milli(name, amount) for name, amount in wanted.items()}}
    limits = {ph.resource_key: str(ph.gpus), **{name: format_milli(name, amount) for name, amount in most.items()}}
    return {"requests": requests, "limits": limits}


#: What a ProvisioningRequest's pod carries of its pods' requests (docs/adjuster.md, "what a request must carry").
REQUEST_CARRIES = ("cpu", "memory")


def request_pod_resources(ph: Placeholder) -> dict[str, dict[str, str]]:
    """A ProvisioningRequest's pod: the placeholder's whole GPUs and its pods' CPU and memory too.

    cluster-autoscaler serves a request's pods and ordinary pending pods in alternate loops
    (provisioningrequest/orchestrator/wrapper_orchestrator.go ScaleUp), so KAI's pods are never sized with the
    request, as they are with a placeholder pod: the loop that serves the request must pick a node type that holds
    their CPU and memory, which the expander (least-waste, CPU and memory only) can do only if the request asks for
    them. The next ordinary loop hints KAI's pods onto the node coming before the booking is placed
    (processors/provreq/processor.go runs after FilterOutSchedulable), so their CPU is not asked for twice."""
    return placeholder_resources(ph, {name: amount for name, amount in ph.resources if name in REQUEST_CARRIES})


def recorded_pod_requests(annotations: Mapping[str, Any]) -> Optional[tuple[tuple[str, int], ...]]:
    """The pods' requests a placeholder recorded (resource, thousandths), or None when it recorded none readable."""
    try:
        recorded = json.loads(annotations.get(consts.POD_REQUESTS_ANNOTATION) or "null")
    except (ValueError, TypeError):
        return None
    if not isinstance(recorded, dict):
        return None
    kept = [(name, amount) for name, amount in recorded.items()
            if isinstance(name, str) and isinstance(amount, int) and not isinstance(amount, bool) and 0 < amount < 2**63]
    return tuple(sorted(kept))


def placeholder_manifest(planned: PlannedPlaceholder, settings: RunSettings) -> dict[str, Any]:
    """A pod that asks for whole GPUs where the group's pods may run (their CPU and memory recorded, not asked for
    again), below every real workload but not below the autoscaler's expendable cutoff, and exits."""
    ph = planned.placeholder
    gpus = str(ph.gpus)
    spec: dict[str, Any] = {
        "priorityClassName": settings.priority_class,
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 0,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": consts.PLACEHOLDER_UID,
            "runAsGroup": consts.PLACEHOLDER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "placeholder",
                "image": settings.placeholder_image,
                "command": list(consts.KEEP_APART_COMMAND if ph.keep_apart else consts.PLACEHOLDER_COMMAND),
                "resources": placeholder_resources(ph),
                # No readOnlyRootFilesystem: the NVIDIA container toolkit's CDI hooks write into the container's
                # root at create time, and with a read-only root one fails the create on a GPU node (toolkit
                # v1.20.0 cmd/nvidia-cdi-hook/update-application-profile: MkdirAll of /etc/nvidia/... in the
                # container root, EROFS is an error; nvidia-container-toolkit issue 2026, kserve PR 5711), so
                # the placeholder would never start and never free its node. KAI's scaling pod sets no
                # security context at all (kai-scheduler@v0.13.0 scaling_pod.go); the rest of this one stays.
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    }
    if ph.node_selector:
        spec["nodeSelector"] = dict(ph.node_selector)
    affinity = json.loads(json.dumps(dict(ph.affinity))) if ph.affinity else {}  # the plan's own value is not shared
    if ph.keep_apart:
        # Its pods must not share a host (host_spread.py): nor may the group's placeholders, so that the autoscaler
        # adds a node for each (it simulates inter-pod anti-affinity on its template nodes) and no two bind together.
        # Not by the pods' terms against their own kind: the placeholder runs a while on its node
        # (consts.KEEP_APART_SECONDS), and a running pod's required anti-affinity keeps every pod it selects off that
        # node, the replica it was made for too (kube-scheduler v1.34 interpodaffinity/filtering.go
        # satisfyExistingPodsAntiAffinity; KAI v0.12.0 runs that plugin, k8s_internal/predicates); with them, Karpenter launched a CPU
        # node for each replica it could not put beside a placeholder. The nodes where the replicas run are kept off
        # by hostname instead (`avoid_nodes`, reconcile.py `_kind_nodes`). Their terms against other kinds stay.
        anti = affinity.get("podAntiAffinity")
        if ph.kind is not None and isinstance(anti, dict):
            kept = [t for t in anti.get("requiredDuringSchedulingIgnoredDuringExecution", []) if not ph.kind.selects_own_kind(t)]
            anti["requiredDuringSchedulingIgnoredDuringExecution"] = kept
        apart = {"labelSelector": {"matchLabels": {consts.MANAGED_BY_LABEL: consts.MANAGED_BY_VALUE, consts.GROUP_LABEL: ph.group or "default"}},
                 "topologyKey": HOSTNAME_KEY}
        anti = affinity.setdefault("podAntiAffinity", {})
        anti["requiredDuringSchedulingIgnoredDuringExecution"] = [*anti.get("requiredDuringSchedulingIgnoredDuringExecution", []), apart]
    if ph.avoid_nodes:
        _keep_off(affinity, ph.avoid_nodes)
    if affinity:
        spec["affinity"] = affinity
    if ph.tolerations:
        spec["tolerations"] = [dict(t) for t in ph.tolerations]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": planned.name,
            "namespace": settings.namespace,
            "labels": {
                consts.MANAGED_BY_LABEL: consts.MANAGED_BY_VALUE,
                consts.COMPONENT_LABEL: consts.PLACEHOLDER_COMPONENT,
                consts.GROUP_LABEL: ph.group or "default",
                consts.GPUS_LABEL: gpus,
                **({consts.KEEP_APART_LABEL: "true"} if ph.keep_apart else {}),
            },
            "annotations": {consts.PODS_ANNOTATION: json.dumps(sorted(ph.pods), separators=(",", ":")),
                            consts.POD_REQUESTS_ANNOTATION: json.dumps(dict(sorted(ph.resources)), separators=(",", ":"))},
        },
        "spec": spec,
    }


def _keep_off(affinity: dict[str, Any], nodes: Sequence[str]) -> None:
    """A required `kubernetes.io/hostname NotIn nodes` in every node selector term (terms are ORed; a new one where
    there is none)."""
    avoid = {"key": HOSTNAME_KEY, "operator": "NotIn", "values": list(nodes)}
    required = affinity.setdefault("nodeAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        term["matchExpressions"] = [*term.get("matchExpressions", []), dict(avoid)]


# --- --mode provisioning-request ---------------------------------------------------------------
# One autoscaling.x-k8s.io/v1 ProvisioningRequest per constraint group, with one PodTemplate per
# placeholder size (a podSet of `count` placeholders each). Its spec is immutable (CEL
# `self == oldSelf`), so when a group's demand changes while its request is still waiting, a new
# request for the whole new demand is created and the old one deleted once the new one exists:
# never two waiting requests for one group (a crash between the two leaves both; the next pass
# keeps the one matching the demand and deletes the other). The demand changes when it needs more
# GPUs than the waiting request asks for (pods its room cannot hold) or fewer (pods deleted or
# landed elsewhere: the autoscaler would otherwise bring up GPUs nobody needs); other pods for the
# same GPUs keep the request (no churn for nothing). A request already Provisioned is not
# replaced: its capacity is up and counts for its pods until they land. A request whose demand is
# gone is deleted with its templates.


def is_request(obj: Mapping[str, Any], namespace: str) -> bool:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (meta.get("namespace") == namespace and labels.get(consts.MANAGED_BY_LABEL) == consts.MANAGED_BY_VALUE
            and labels.get(consts.COMPONENT_LABEL) == consts.REQUEST_COMPONENT)


def request_state(obj: Mapping[str, Any]) -> str:
    """One word for logs and metrics (`autoscalers.provisioning_request`: failed, capacity-revoked,
    booking-expired, provisioned, accepted or waiting)."""
    return read_provisioning_state(obj).state


def read_request(obj: Mapping[str, Any], now: datetime, failed_backoff: float) -> Optional[ExistingPlaceholder]:
    """A ProvisioningRequest as the reconcile core sees a placeholder (never raises)."""
    meta = read_meta(obj)
    identity = _signal_identity(meta)
    if identity is None:
        return None
    name, group, gpus, pods = identity
    if meta.deleting:
        return ExistingPlaceholder(name, group, gpus, TERMINATING, pods)
    found = read_provisioning_state(obj)  # one reading of the conditions, Kueue's (a failed request first)
    if found.state in (CAPACITY_REVOKED, BOOKING_EXPIRED):
        # The capacity (or its booking) is gone: the request is spent; pods still waiting are planned again.
        return ExistingPlaceholder(name, group, gpus, FINISHED, pods)
    if found.state == PROVISIONED:
        # Provisioned=True means the scale-up was *requested* ("CapacityIsProvisionedReason is added when capacity
        # was requested successfully": cluster-autoscaler@1.33.6 provisioningrequest/conditions/conditions.go;
        # provisioningrequest/besteffortatomic/provisioning_class.go), not that the nodes exist: the provision
        # timeout does not start there. The autoscaler books the capacity for 10 minutes and then sets
        # BookingExpired (processors/provreq/processor.go, defaultReservationTime; only pods annotated
        # autoscaling.x-k8s.io/consume-provisioning-request end it early, and KAI's never are): that ends it.
        return ExistingPlaceholder(name, group, gpus, PROVIDED, pods, None)
    failed = (found.since or now) if found.state == FAILED else None
    if failed and (now - failed).total_seconds() >= failed_backoff:
        return ExistingPlaceholder(name, group, gpus, FINISHED, pods)
    # Waiting, accepted, short of capacity (Provisioned=False, reason CapacityIsNotFound: the autoscaler retries it with
    # a backoff of minutes; Failed comes only after 7 days or for a broken template, processors/provreq/processor.go),
    # or failed within the backoff: it still covers its pods.
    return ExistingPlaceholder(name, group, gpus, PENDING, pods)


@dataclass(frozen=True)
class PlannedRequest:
    name: str
    templates: tuple[dict[str, Any], ...]
    request: dict[str, Any]
    gpus: int
    resource_key: str
    pods: tuple[str, ...]
    #: Waiting requests of the same group this one replaces: deleted once this one exists.
    replaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class RequestPass:
    decision: Reconcile
    requests: tuple[ExistingPlaceholder, ...]
    create: tuple[PlannedRequest, ...]
    #: PodTemplates whose request is gone (left by a crash between the two creates).
    orphan_templates: tuple[str, ...]
    #: Waiting requests superseded by one that already exists (a crash between create and delete): delete now.
    superseded: tuple[str, ...] = ()


def decide_requests(
    snapshot: ClusterSnapshot,
    requests: Iterable[Mapping[str, Any]],
    templates: Iterable[Mapping[str, Any]],
    settings: RunSettings,
) -> RequestPass:
    """One pass of --mode provisioning-request over the cluster as the caller read it, and the ProvisioningRequests and
    PodTemplates it listed."""
    now = snapshot.now
    ours = [obj for obj in requests if is_request(obj, settings.namespace)]
    existing = [r for r in (read_request(obj, now, settings.failed_backoff) for obj in ours) if r is not None]
    # Failed, still within the backoff: neither replaced nor joined by a new request until it ends.
    backing_off = {(obj.get("metadata") or {}).get("name") for obj in ours if request_state(obj) == "failed"}
    decision = reconcile_in(
        snapshot, existing, settings.planner,
        provision_timeout_seconds=settings.provision_timeout, name_prefix=consts.REQUEST_NAME_PREFIX,
        batch=batch_window(settings),
    )  # fmt: skip
    by_group: dict[str, list[PlannedPlaceholder]] = {}
    for planned in decision.create:
        by_group.setdefault(planned.placeholder.group or "default", []).append(planned)
    waiting = _waiting_by_group(existing, set(decision.keep))
    whole_demand: dict[str, list[PlannedPlaceholder]] = {}
    for wanted in decision.plan.placeholders:
        whole_demand.setdefault(wanted.group or "default", []).append(PlannedPlaceholder("", wanted))
    taken = {r.name for r in existing}
    create = []
    superseded: list[str] = []
    for group in sorted(set(by_group) | set(waiting)):
        old = sorted(waiting.get(group, ()), key=lambda r: r.name)
        if any(r.name in backing_off for r in old):
            continue
        planned = _to_request(by_group.get(group, []), old, whole_demand.get(group, []), superseded)
        if not planned:
            continue
        name = _request_name(group, planned, taken)
        objects = _request_objects(name, group, planned, settings)
        create.append(replace(objects, replaces=tuple(r.name for r in old)))
    orphans = _orphan_templates(templates, taken, settings.namespace)
    return RequestPass(decision, tuple(existing), tuple(create), orphans, tuple(superseded))


def _waiting_by_group(existing: list[ExistingPlaceholder], kept: set[str]) -> dict[str, list[ExistingPlaceholder]]:
    """The waiting requests kept, by group: a group with one gets its whole demand in one new request."""
    waiting: dict[str, list[ExistingPlaceholder]] = {}
    for r in existing:
        if r.state == PENDING and r.name in kept:
            waiting.setdefault(r.group or "default", []).append(r)
    return waiting


def _to_request(
    planned: list[PlannedPlaceholder], old: list[ExistingPlaceholder], wanted: list[PlannedPlaceholder], superseded: list[str]
) -> list[PlannedPlaceholder]:
    """What one group's new request holds: the placeholders to create, its whole demand, or nothing.

    With waiting requests (`old`) the new one, if any, asks for the whole demand (`wanted`) and
    replaces them; a waiting one that already asks for it is kept and the others go to `superseded`.
    """
    if not old:
        return planned
    wanted_pods = tuple(sorted(p for item in wanted for p in item.placeholder.pods))
    current = next((r for r in old if tuple(sorted(r.pods)) == wanted_pods), None)
    if current is not None or not wanted_pods:
        # The demand is what a waiting request asks for: keep it, drop any other (a crash left it).
        superseded.extend([r.name for r in old if r is not current] if current is not None else [])
        return []
    wanted_gpus = sum(item.placeholder.gpus for item in wanted)
    if not planned and len(old) == 1 and wanted_gpus >= old[0].gpus:
        return []  # other pods, not fewer GPUs: the request under way still covers them all, no churn
    return wanted  # more GPUs than it holds, or fewer than it asks for: one request for the demand


def _request_name(group: str, planned: list[PlannedPlaceholder], taken: set[str]) -> str:
    """A name from the group and a digest of its pods, numbered past those `taken`; adds it to `taken`."""
    pods_of_group = tuple(sorted(p for item in planned for p in item.placeholder.pods))
    digest = hashlib.sha256("\n".join(pods_of_group).encode()).hexdigest()[:10]
    name, n = f"{consts.REQUEST_NAME_PREFIX}-{group}-{digest}", 1
    while name in taken:
        name, n = f"{consts.REQUEST_NAME_PREFIX}-{group}-{digest}-{n}", n + 1
    taken.add(name)
    return name


def _orphan_templates(templates: Iterable[Mapping[str, Any]], live: set[str], namespace: str) -> tuple[str, ...]:
    """The PodTemplates in `namespace` whose request is not among the `live` ones."""
    return tuple(sorted(
        (t.get("metadata") or {}).get("name") for t in templates
        if ((t.get("metadata") or {}).get("labels") or {}).get(consts.REQUEST_LABEL) not in live
        and (t.get("metadata") or {}).get("namespace") == namespace
    ))  # fmt: skip


def _request_objects(name: str, group: str, planned: list[PlannedPlaceholder], settings: RunSettings) -> PlannedRequest:
    """The request and its PodTemplates: one podSet per shape of placeholder (its GPUs, and the CPU and memory of
    its pods, `request_pod_resources`), largest first, named by the GPUs (`-2g`, then `-2g-2` for another shape)."""
    by_shape: dict[tuple[int, tuple[tuple[str, int], ...]], list[PlannedPlaceholder]] = {}
    for item in planned:
        carried = tuple((k, v) for k, v in sorted(item.placeholder.resources) if k in REQUEST_CARRIES)
        by_shape.setdefault((item.placeholder.gpus, carried), []).append(item)
    labels = {
        consts.MANAGED_BY_LABEL: consts.MANAGED_BY_VALUE,
        consts.COMPONENT_LABEL: consts.REQUEST_COMPONENT,
        consts.GROUP_LABEL: group,
    }
    templates = []
    pod_sets = []
    shapes_of_size: dict[int, int] = {}
    for (size, _), items in sorted(by_shape.items(), reverse=True):
        shapes_of_size[size] = shapes_of_size.get(size, 0) + 1
        template_name = f"{name}-{size}g" + (f"-{shapes_of_size[size]}" if shapes_of_size[size] > 1 else "")
        pod = placeholder_manifest(PlannedPlaceholder(template_name, items[0].placeholder), settings)
        pod["spec"]["containers"][0]["resources"] = request_pod_resources(items[0].placeholder)
        pod_labels = {k: v for k, v in pod["metadata"]["labels"].items() if k != consts.GPUS_LABEL}
        templates.append({
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": template_name, "namespace": settings.namespace,
                         "labels": {**labels, consts.REQUEST_LABEL: name}},
            "template": {"metadata": {"labels": {**pod_labels, consts.REQUEST_LABEL: name}}, "spec": pod["spec"]},
        })  # fmt: skip
        pod_sets.append({"podTemplateRef": {"name": template_name}, "count": len(items)})
    gpus = sum(item.placeholder.gpus for item in planned)
    pods = tuple(sorted(p for item in planned for p in item.placeholder.pods))
    request = {
        "apiVersion": f"{consts.PROVISIONING_GROUP}/{consts.PROVISIONING_VERSION}",
        "kind": "ProvisioningRequest",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": {**labels, consts.GPUS_LABEL: str(gpus)},
            "annotations": {consts.PODS_ANNOTATION: json.dumps(list(pods), separators=(",", ":"))},
        },
        "spec": {"provisioningClassName": settings.provisioning_class, "podSets": pod_sets},
    }
    return PlannedRequest(name, tuple(templates), request, gpus, planned[0].placeholder.resource_key, pods)
