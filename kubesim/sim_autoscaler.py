"""A simulated cluster-autoscaler (and its ProvisioningRequest classes) for the node-scale-adjuster's tests.

Why simulated: the Go module proxy serves no version of k8s.io/autoscaler/cluster-autoscaler (its list and every
tag tried are refused: docs/testing.md), so the real one cannot be built here. It runs as a client of the real
kube-apiserver (real_api.py), driven by sim_gpu.py's `GpuSim`.

Written from cluster-autoscaler@1.33.6 (tag cluster-autoscaler-1.33.6; paths under cluster-autoscaler/).
One `run_once` is one loop of core/static_autoscaler.go (RunOnce), recomputed
from scratch from the API's pods and nodes as the real one is:

1. Nodes whose scale-up was decided `provisioning_delay` ago register (the
   cloud's part; `register_due`, called by the driver before its schedulers run).
2. Every `scan_interval` (--scan-interval, 10 s real; 0.5 s here against the
   controllers' sub-second reactions), the unschedulable pods are listed:
   unbound, not being deleted, `PodScheduled=False` with reason
   `Unschedulable`, whatever their scheduler (utils/kubernetes/listers.go,
   isUnschedulable; --bypassed-scheduler-names is empty by default).
3. The nodes being added join the snapshot as empty template nodes
   (RunOnce: addUpcomingNodesToClusterSnapshot / getUpcomingNodeInfos).
4. The pod list processors, in their real order
   (core/podlistprocessor/pod_list_processor.go NewDefaultPodListProcessor):
   ClearTPURequests (nothing to do here), FilterOutExpendable (a pod with
   spec.priority below --expendable-pods-priority-cutoff, default -10,
   filter_out_expendable.go with core/utils/expendable.go IsExpendablePod),
   CurrentlyDrainedNodes (no node drains here), FilterOutSchedulable (pods
   taken highest priority first; a pod that fits a node of the snapshot,
   upcoming ones included, by its resource requests, selectors and taints,
   is hinted there and dropped:
   filter_out_schedulable.go; a KAI pod asks for a GPU share by annotation,
   which the autoscaler cannot read, so it fits any node with CPU and memory
   room), FilterOutDaemonSet (no DaemonSet pods here).
5. Scale-up (core/scaleup/orchestrator/orchestrator.go ScaleUp): only node
   groups below their max size; per group, the pods whose scheduling
   predicates pass on the group's template node (selector, required affinity,
   tolerations, every resource request with CPU and memory: never an invented
   group; ComputeExpansionOption / SchedulablePodGroups), and the binpacking
   estimator's node count for them (estimator/binpacking_estimator.go
   Estimate: pods ordered by estimator/decreasing_pod_orderer.go, the sum of
   their CPU and memory shares of the template, largest first, a stable sort
   here; each pod onto the first new node it fits, else a new node). The
   expander picks one option (the default `least-waste` since 1.33: the least
   CPU and memory left unrequested, GPUs not counted; ties by the group's name
   here, at random there); only that group grows this loop, capped at its max size.

Left out: scale-down (10 minutes of unneededness by default, longer than any
test; terminal pods do not block it: simulator/drainability/rules/terminal),
node group balancing, backoff after failed scale-ups (the sim's cloud never
fails), resource limits, the max-nodes-per-scale-up cap, equivalence groups
(each pod is its own group; the estimate is the same). Why none can hide an
adjuster bug: the adjuster reads only pods and nodes, and each of those changes
when and how many nodes come, never whether a pod that the real autoscaler
would ignore gets a node here.

ProvisioningRequests (`--enable-provisioning-requests`, the best-effort-atomic class), read at
kubernetes/autoscaler master under cluster-autoscaler/, inside the same loop:
- at the loop's start, a `Provisioned=True` request whose booking is older than `booking_time` (10 minutes,
  processors/provreq/processor.go defaultReservationTime) gets `BookingExpired` (CapacityReservationTimeExpired);
  `Failed` (Expired) is written only while `fail_requests` is set (the real one waits 7 days);
- after FilterOutSchedulable, the injector (processors/provreq/injector.go GetPodsFromNextRequest) takes ONE
  request a loop, the first neither `Failed` nor `Provisioned=True` (a `Provisioned=False` one at once, as
  IsAvailableForProvisioning reads there), marks it `Accepted` and adds its pods (provisioningrequest/pods/pods.go:
  `count` per podSet from its PodTemplate, annotated with the request's name; a missing PodTemplate is `Failed`,
  FailedToCreatePods, and the next request is taken);
- bookCapacity (processors/provreq/processor.go) then places the pods of every booked request (`Provisioned=True`,
  no `BookingExpired`) in the snapshot, and writes `BookingExpired` (CapacityBookingConsumed) once as many pods
  naming the request are bound;
- the scale-up serves the request's pods or the ordinary pods, one kind a loop, alternating where both wait
  (provisioningrequest/orchestrator/wrapper_orchestrator.go ScaleUp); the request's (besteffortatomic
  provisioning_class.go Provision): pods that fit the snapshot need nothing (`Provisioned=True`, CapacityIsFound),
  the rest go to the scale-up above with all-or-nothing (every pod helped or no option; the expander picks), whose
  nodes come as upcoming nodes (`Provisioned=True`, CapacityIsProvisioned), else `Provisioned=False`,
  CapacityIsNotFound (also while `shortage` is set).
A group's template comes from a live node only once it has been Ready for `template_stabilization` seconds
(processors/nodeinfosprovider/mixed_nodeinfos_processor.go isNodeGoodTemplateCandidate, stabilizationDelay 1
minute); before that, the cloud provider's template.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping, Optional

from kubesim.errors import ApiError
from kubesim.sim_common import now_rfc3339, parse_quantity
from kubesim.sim_nodes import GPU_KEY, allocatable_of, fits_resources, is_ready, matches_node, requests_of, tolerates_taints

PR_API = "autoscaling.x-k8s.io/v1"
NODE_GROUP_LABEL = "sim.autoscaler/node-group"
#: The annotation a request's pods carry, its name (apis/provisioningrequest/autoscaling.x-k8s.io/v1
#: ProvisioningRequestPodAnnotationKey), by which the scale-up tells them from ordinary pods.
REQUEST_POD_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
#: processors/provreq/processor.go defaultReservationTime; mixed_nodeinfos_processor.go stabilizationDelay.
BOOKING_SECONDS = 600.0
TEMPLATE_STABILIZATION_SECONDS = 60.0


@dataclass(frozen=True)
class NodeGroup:
    """A node group as the cloud provider describes it: its template node and its size bounds."""

    name: str
    gpus: int = 8
    cpu: str = "128"
    memory: str = "1024Gi"
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    max_size: int = 10_000

    def allocatable(self) -> dict[str, Decimal]:
        return {"cpu": parse_quantity(self.cpu), "memory": parse_quantity(self.memory), "pods": Decimal(110), GPU_KEY: Decimal(self.gpus)}

    def admits(self, pod_spec: Mapping[str, Any], labels: Optional[Mapping[str, str]] = None) -> bool:
        """The scheduling predicates on the template node: selector, required affinity, taints, resources.
        `labels`: the template's labels where a live node of the group gave them (`ClusterAutoscaler._templates`)."""
        labels = {**self.labels, NODE_GROUP_LABEL: self.name} if labels is None else labels
        return matches_node(pod_spec, labels) and tolerates_taints(pod_spec, self.taints) and fits_resources(requests_of(pod_spec), self.allocatable(), {})


def is_unschedulable(pod: Mapping[str, Any]) -> bool:
    """utils/kubernetes/listers.go isUnschedulable: unbound, not deleted, PodScheduled False/Unschedulable."""
    if (pod.get("spec") or {}).get("nodeName") or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    condition = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    return condition is not None and condition.get("status") == "False" and condition.get("reason") == "Unschedulable"


@dataclass
class _Snapshot:
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]
    allocatable: dict[str, Decimal]
    requested: dict[str, Decimal]

    def hint(self, pod_spec: Mapping[str, Any]) -> bool:
        wanted = requests_of(pod_spec)
        if not (matches_node(pod_spec, self.labels) and tolerates_taints(pod_spec, self.taints)
                and fits_resources(wanted, self.allocatable, self.requested)):
            return False
        for name, amount in wanted.items():
            self.requested[name] = self.requested.get(name, Decimal(0)) + amount
        return True


#: Taints that make a node not ready for cluster-autoscaler whatever its Ready condition says (utils/kubernetes/ready.go
#: GetNodeReadiness notReadyTaints): the API server's admission puts `not-ready` on every node it registers, and the
#: node lifecycle controller takes it off once the node reports Ready.
NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/disk-pressure", "node.kubernetes.io/network-unavailable"})


def _ready_for_autoscaler(node: Mapping[str, Any]) -> bool:
    """Ready as cluster-autoscaler reads a node: its Ready condition True and none of `NOT_READY_TAINTS`."""
    conditions = (node.get("status") or {}).get("conditions") or []
    taints = (node.get("spec") or {}).get("taints") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) and not any(t.get("key") in NOT_READY_TAINTS for t in taints)


class ClusterAutoscaler:
    """What `GpuSim` calls: `register_due`, then `run_once` after its schedulers ran."""

    def __init__(self, server: Any, add_node: Callable[[NodeGroup, tuple[str, ...]], str], *, node_groups: Iterable[NodeGroup],
                 provisioning_delay: float = 0.5, scan_interval: float = 0.5, expendable_cutoff: int = -10,
                 clock: Callable[[], float] = time.monotonic, booking_time: float = BOOKING_SECONDS,
                 template_stabilization: float = TEMPLATE_STABILIZATION_SECONDS) -> None:
        """`clock`: the seconds the scan interval and the provisioning delay are measured in (a test pauses it to
        keep every decided node from coming, whatever the machine's speed)."""
        self.server = server
        self.clock = clock
        self.add_node = add_node
        self.node_groups = list(node_groups)
        self.provisioning_delay = provisioning_delay
        self.scan_interval = scan_interval
        #: --expendable-pods-priority-cutoff (config/flags/flags.go, default -10).
        self.expendable_cutoff = expendable_cutoff
        self._last_scan = -float("inf")
        #: Nodes decided and not registered yet: (due, group, the pods they were for).
        self.upcoming: list[tuple[float, NodeGroup, tuple[str, ...]]] = []
        #: Nodes registered and not ready yet for the autoscaler (`_still_starting`), by name: their groups.
        self._starting: dict[str, NodeGroup] = {}
        self.fail_requests = False
        self.shortage = False
        self.booking_time = booking_time
        self.template_stabilization = template_stabilization
        #: ProvisioningRequestScaleUpMode: which kind of pods the last loop served (wrapper_orchestrator.go).
        self.request_mode = False
        #: When each request was found `Provisioned=True`, on this autoscaler's clock (its booking's start).
        self._booked_at: dict[str, float] = {}

    def register_due(self) -> None:
        now = self.clock()
        due = [u for u in self.upcoming if u[0] <= now]
        self.upcoming = [u for u in self.upcoming if u[0] > now]
        for _, group, pods in due:
            self._starting[self.add_node(group, pods)] = group

    def scan_due(self) -> bool:
        """Whether `run_once` scans now (its scan interval has passed since the last scan): a caller lists the
        cluster for it only then, as the real autoscaler lists nothing between its loops (static_autoscaler.go
        RunOnce every --scan-interval)."""
        return self.clock() - self._last_scan >= self.scan_interval

    def run_once(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        if not self.scan_due():
            return
        now = self._last_scan = self.clock()
        requests = self._refresh_requests(now)
        unschedulable = [p for p in pods if is_unschedulable(p)]
        templates = self._templates(nodes)  # once a loop: the snapshot's upcoming nodes and the scale-up share them
        snapshot = self._snapshot(pods, nodes, templates)
        # FilterOutExpendable: a pod without a priority is not expendable.
        unschedulable = [p for p in unschedulable if p["spec"].get("priority") is None or int(p["spec"]["priority"]) >= self.expendable_cutoff]
        # FilterOutSchedulable (filterOutSchedulableByPacking): highest priority first, each hinted onto the
        # snapshot's nodes (existing and upcoming); what fits is dropped.
        unschedulable = self._queue_order(unschedulable)
        unschedulable = [p for p in unschedulable if not any(node.hint(p["spec"]) for node in snapshot)]
        request, request_pods = self._next_request(requests)
        self._book_capacity(requests, pods, snapshot)
        # wrapper_orchestrator.go ScaleUp: one kind a loop, the other the next; a kind alone every loop.
        if not request_pods:
            self.request_mode = False
        elif not unschedulable:
            self.request_mode = True
        if self.request_mode and request is not None:
            self._provision(request, request_pods, snapshot, now, templates)
        elif unschedulable:
            self._scale_up(unschedulable, now, templates)
        self.request_mode = not self.request_mode

    @staticmethod
    def _queue_order(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """filterOutSchedulableByPacking's order: highest priority first (a stable sort here; the real one's
        `sort.Slice` leaves pods of one priority in any order)."""
        return sorted(pods, key=lambda p: -int(p["spec"].get("priority") or 0))

    def _snapshot(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]], templates: Mapping[str, Mapping[str, str]]) -> list[_Snapshot]:
        found: dict[str, _Snapshot] = {}
        starting: list[NodeGroup] = []
        for node in nodes:
            name = node["metadata"]["name"]
            if not _ready_for_autoscaler(node):
                if name in self._starting:
                    starting.append(self._starting[name])
                continue
            self._starting.pop(name, None)
            if is_ready(node):
                meta = node["metadata"]
                found[meta["name"]] = _Snapshot(meta.get("labels") or {}, tuple((node.get("spec") or {}).get("taints") or ()),
                                                allocatable_of(node), {})
        for pod in pods:
            node = found.get(pod["spec"].get("nodeName") or "")
            if node is not None and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                for name, amount in requests_of(pod["spec"]).items():
                    node.requested[name] = node.requested.get(name, Decimal(0)) + amount
        # getUpcomingNodeInfos: copies of the group's template node, a live node's labels where it gave them
        # and a node it added that registered but is not ready yet counts as one of them (clusterstate.go
        # GetUpcomingNodes: "instances that have registered with k8s but aren't ready yet", readiness.NotStarted)
        upcoming = [_Snapshot(templates.get(group.name) or {**group.labels, NODE_GROUP_LABEL: group.name}, group.taints, group.allocatable(), {})
                    for group in [*(g for _, g, _ in self.upcoming), *starting]]
        return list(found.values()) + upcoming

    def _templates(self, nodes: list[dict[str, Any]]) -> dict[str, Mapping[str, str]]:
        """Each node group's template labels: a live node's, where the group has a ready one.

        processors/nodeinfosprovider/mixed_nodeinfos_processor.go Process takes the template of a group
        from one of its ready, schedulable nodes when it has one (cloud provider's template otherwise), and
        simulator/node_info_utils.go SanitizedTemplateNodeInfoFromNodeInfo keeps every label of that node but
        the hostname: a label an operator put on a live node (the adjuster's hold, say) is on the template."""
        templates: dict[str, Mapping[str, str]] = {}
        for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
            labels = node["metadata"].get("labels") or {}
            group = labels.get(NODE_GROUP_LABEL)
            if group and group not in templates and self._stable(node) and not (node.get("spec") or {}).get("unschedulable"):
                templates[group] = {k: v for k, v in labels.items() if k != "kubernetes.io/hostname"}
        return templates

    def _stable(self, node: Mapping[str, Any]) -> bool:
        """Ready (and schedulable) for `template_stabilization` seconds of wall time (the Ready condition's
        lastTransitionTime), as a template candidate must be."""
        if not is_ready(node):
            return False
        ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
        try:
            since = datetime.fromisoformat(str(ready.get("lastTransitionTime")).replace("Z", "+00:00"))
        except ValueError:
            return False
        return (datetime.now(timezone.utc) - since).total_seconds() >= self.template_stabilization

    def _scale_up(self, pods: list[dict[str, Any]], now: float, templates: Mapping[str, Mapping[str, str]], all_or_nothing: bool = False) -> bool:
        """The scale-up orchestrator: True when some group grows. With `all_or_nothing`, an option must help every pod."""
        options: list[tuple[NodeGroup, list[dict[str, Any]], list[list[str]]]] = []
        sizes = self._group_sizes()
        for group in self.node_groups:
            room = group.max_size - sizes.get(group.name, 0)
            if room <= 0:
                continue
            fitting = [p for p in pods if group.admits(p["spec"], templates.get(group.name))]
            if not fitting:
                continue
            new_nodes = self._estimate(group, fitting)[:room]
            helped = {name for members in new_nodes for name in members}
            if all_or_nothing and len(helped) < len(pods):
                continue
            options.append((group, [p for p in fitting if p["metadata"]["name"] in helped], new_nodes))
        if not options:
            return False
        group, _, new_nodes = self._best_option(options)
        for members in new_nodes:
            self.upcoming.append((now + self.provisioning_delay, group, tuple(members)))
        return True

    @staticmethod
    def _best_option(options: list[tuple[NodeGroup, list[dict[str, Any]], list[list[str]]]]) -> tuple[NodeGroup, list[dict[str, Any]], list[list[str]]]:
        """The default expander, `least-waste` (config/flags/flags.go: --expander defaults to
        expander.LeastWasteExpanderName from 1.33 on; expander/waste/waste.go BestOptions): the option whose
        nodes leave the least CPU and memory unrequested by the option's pods, as fractions of the nodes'
        capacity summed (GPUs do not count). Ties, broken at random by the real one (expander/random), go to
        the group's name here."""

        def waste(option: tuple[NodeGroup, list[dict[str, Any]], list[list[str]]]) -> tuple[Decimal, str]:
            group, helped, new_nodes = option
            capacity = group.allocatable()
            wasted = Decimal(0)
            for resource in ("cpu", "memory"):
                available = capacity[resource] * len(new_nodes)
                requested = sum((requests_of(p["spec"]).get(resource, Decimal(0)) for p in helped), Decimal(0))
                wasted += (available - requested) / available
            return wasted, group.name

        return min(options, key=waste)

    @staticmethod
    def _estimate(group: NodeGroup, pods: list[dict[str, Any]]) -> list[list[str]]:
        """estimator/binpacking_estimator.go Estimate with decreasing_pod_orderer.go's CPU + memory score."""
        template = group.allocatable()

        def score(pod: dict[str, Any]) -> Decimal:
            wanted = requests_of(pod["spec"])
            return sum((wanted.get(r, Decimal(0)) / template[r] for r in ("cpu", "memory") if template.get(r)), Decimal(0))

        nodes: list[tuple[dict[str, Decimal], list[str]]] = []
        for pod in sorted(pods, key=score, reverse=True):
            wanted = requests_of(pod["spec"])
            # tryToScheduleOnExistingNodes: any new node of this estimate that fits (first fit); else
            # tryToScheduleOnNewNodes: a new template node.
            for used, members in nodes:
                if fits_resources(wanted, template, used):
                    break
            else:
                used, members = {}, []
                nodes.append((used, members))
            for name, amount in wanted.items():
                used[name] = used.get(name, Decimal(0)) + amount
            members.append(pod["metadata"]["name"])
        return [members for _, members in nodes]

    def _group_sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for node in self.server.list_objects("v1", "Node"):
            group = (node["metadata"].get("labels") or {}).get(NODE_GROUP_LABEL)
            if group:
                sizes[group] = sizes.get(group, 0) + 1
        for _, group, _ in self.upcoming:
            sizes[group.name] = sizes.get(group.name, 0) + 1
        return sizes

    # --- ProvisioningRequests (best-effort-atomic-scale-up: all nodes or none) ----------------

    def _refresh_requests(self, now: float) -> list[dict[str, Any]]:
        """The requests, after processor.go refresh: a booking past `booking_time` expired, `Failed` while
        `fail_requests` is set for those not provisioned; each as stored after what was written to it (gone: left
        out)."""
        refreshed = []
        for request in self.server.list_objects(PR_API, "ProvisioningRequest"):
            if request["metadata"].get("deletionTimestamp"):
                continue
            conditions = _conditions(request)
            if _true(conditions, "BookingExpired") or _true(conditions, "Failed"):
                pass
            elif _true(conditions, "Provisioned"):
                booked = self._booked_at.setdefault(request["metadata"]["uid"], now)
                if now - booked >= self.booking_time:
                    request = self._set_conditions(request, [("BookingExpired", "CapacityReservationTimeExpired", "Capacity reservation time is expired")])
            elif self.fail_requests:
                request = self._set_conditions(request, [("Failed", "Expired", "ProvisioningRequest is expired")])
            if request is not None:
                refreshed.append(request)
        return refreshed

    def _request_pods(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], Optional[str]]:
        """pods.go PodsForProvisioningRequest: `count` pods per podSet, annotated with the request's name; and the
        name of the first PodTemplate missing (then no pods)."""
        meta = request["metadata"]
        pods: list[dict[str, Any]] = []
        for pod_set in request["spec"]["podSets"]:
            name = pod_set["podTemplateRef"]["name"]
            template = self.server.get_object("v1", "PodTemplate", name, meta["namespace"])
            if template is None:
                return [], name
            pods += [{"metadata": {"name": f"{meta['name']}-{len(pods) + i}", "namespace": meta["namespace"],
                                   "annotations": {REQUEST_POD_ANNOTATION: meta["name"]}},
                      "spec": template["template"]["spec"]} for i in range(pod_set["count"])]  # fmt: skip
        return pods, None

    def _next_request(self, requests: list[dict[str, Any]]) -> tuple[Optional[dict[str, Any]], list[dict[str, Any]]]:
        """injector.go GetPodsFromNextRequest: the first request available for provisioning, `Accepted`, and its pods."""
        for request in requests:
            conditions = _conditions(request)
            if _true(conditions, "Failed") or _true(conditions, "Provisioned"):
                continue
            pods, missing = self._request_pods(request)
            if missing is not None:
                self._set_conditions(request, [("Failed", "FailedToCreatePods", f'podtemplates "{missing}" not found')])
                continue
            accepted = self._set_conditions(request, [("Accepted", "Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler")])
            if accepted is None:
                continue
            return accepted, pods
        return None, []

    def _book_capacity(self, requests: list[dict[str, Any]], pods: list[dict[str, Any]], snapshot: list[_Snapshot]) -> None:
        """processor.go bookCapacity: the pods of each booked request placed in the snapshot, or the booking
        ended where as many pods naming the request are bound."""
        bound: dict[tuple[str, str], int] = {}
        for pod in pods:
            name = ((pod.get("metadata") or {}).get("annotations") or {}).get(REQUEST_POD_ANNOTATION)
            if name and pod["spec"].get("nodeName"):
                key = (pod["metadata"].get("namespace", ""), name)
                bound[key] = bound.get(key, 0) + 1
        for request in requests:
            conditions = _conditions(request)
            if not _true(conditions, "Provisioned") or _true(conditions, "Failed") or _true(conditions, "BookingExpired"):
                continue
            meta = request["metadata"]
            if bound.get((meta["namespace"], meta["name"]), 0) >= sum(p["count"] for p in request["spec"]["podSets"]):
                self._set_conditions(request, [("BookingExpired", "CapacityBookingConsumed", "Capacity booking is consumed")])
                continue
            for pod in self._request_pods(request)[0]:
                any(node.hint(pod["spec"]) for node in snapshot)

    def _provision(self, request: dict[str, Any], pods: list[dict[str, Any]], snapshot: list[_Snapshot], now: float,
                   templates: Mapping[str, Mapping[str, str]]) -> None:  # fmt: skip
        """besteffortatomic provisioning_class.go Provision, on a copy of the snapshot (it forks and reverts)."""
        trial = [_Snapshot(n.labels, n.taints, n.allocatable, dict(n.requested)) for n in snapshot]
        unplaced = [p for p in pods if not any(node.hint(p["spec"]) for node in trial)]
        if not unplaced and not self.shortage:
            self._booked_at[request["metadata"]["uid"]] = now
            self._set_conditions(request, [("Provisioned", "CapacityIsFound", "Capacity is found in the cluster")])
        elif not self.shortage and self._scale_up(unplaced, now, templates, all_or_nothing=True):
            self._booked_at[request["metadata"]["uid"]] = now
            self._set_conditions(request, [("Provisioned", "CapacityIsProvisioned", "Capacity is found in the cluster")])
        else:
            self._set_conditions(request, [("Provisioned", "CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")], status="False")

    def _set_conditions(self, request: dict[str, Any], new: list[tuple[str, str, str]], status: str = "True") -> Optional[dict[str, Any]]:
        """Set conditions as conditions.go AddOrUpdateCondition does: one per type, replaced in place. The request
        as stored, or None where it is gone or changed meanwhile (the real one logs and goes on)."""
        kinds = {k for k, _, _ in new}
        fresh = {kind: {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now_rfc3339()}
                 for kind, reason, message in new}  # fmt: skip
        old = (request.get("status") or {}).get("conditions") or []
        conditions = [fresh[c["type"]] if c.get("type") in kinds else c for c in old]
        conditions += [fresh[k] for k in fresh if k not in {c.get("type") for c in old}]
        try:
            return self.server.update_status({**request, "status": {**(request.get("status") or {}), "conditions": conditions}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
            return None


def _conditions(request: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {c.get("type"): c for c in (request.get("status") or {}).get("conditions") or []}


def _true(conditions: Mapping[str, Mapping[str, Any]], kind: str) -> bool:
    return (conditions.get(kind) or {}).get("status") == "True"

