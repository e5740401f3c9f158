"""A simulated cluster-autoscaler (and its ProvisioningRequest classes) for the node-scale-adjuster's tests.

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

ProvisioningRequests (provisioningrequest/besteffortatomic/provisioning_class.go
Provision, with provisioningrequest/conditions/conditions.go): a new request is
`Accepted`; after the delay all its podSets' nodes are added at once and it is
`Provisioned=True` (the scale-up was requested); while `shortage` is set it is
`Provisioned=False`, reason `CapacityIsNotFound`, and retried; `Failed` only
while `fail_requests` is set (the real one: after 7 days, reason Expired, or
for a template it cannot build pods from, processors/provreq/processor.go) or
for a missing PodTemplate. BookingExpired and CapacityRevoked are not written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping, Optional

from kubesim.errors import ApiError
from kubesim.sim_common import now_rfc3339, parse_quantity
from kubesim.sim_nodes import GPU_KEY, allocatable_of, fits_resources, is_ready, matches_node, requests_of, tolerates_taints

PR_API = "autoscaling.x-k8s.io/v1"
NODE_GROUP_LABEL = "sim.autoscaler/node-group"


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


class ClusterAutoscaler:
    """What `GpuSim` calls: `register_due`, then `run_once` after its schedulers ran."""

    def __init__(self, server: Any, add_node: Callable[[NodeGroup, tuple[str, ...]], str], *, node_groups: Iterable[NodeGroup],
                 provisioning_delay: float = 0.5, scan_interval: float = 0.5, expendable_cutoff: int = -10,
                 clock: Callable[[], float] = time.monotonic) -> None:
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
        self.fail_requests = False
        self.shortage = False
        self._first_seen: dict[str, float] = {}

    def register_due(self) -> None:
        now = self.clock()
        due = [u for u in self.upcoming if u[0] <= now]
        self.upcoming = [u for u in self.upcoming if u[0] > now]
        for _, group, pods in due:
            self.add_node(group, pods)

    def run_once(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        now = self.clock()
        self._provision_requests(now)
        if now - self._last_scan < self.scan_interval:
            return
        self._last_scan = now
        unschedulable = [p for p in pods if is_unschedulable(p)]
        snapshot = self._snapshot(pods, nodes)
        # FilterOutExpendable: a pod without a priority is not expendable.
        unschedulable = [p for p in unschedulable if p["spec"].get("priority") is None or int(p["spec"]["priority"]) >= self.expendable_cutoff]
        # FilterOutSchedulable (filterOutSchedulableByPacking): highest priority first, each hinted onto the
        # snapshot's nodes (existing and upcoming); what fits is dropped.
        unschedulable = self._queue_order(unschedulable)
        unschedulable = [p for p in unschedulable if not any(node.hint(p["spec"]) for node in snapshot)]
        if unschedulable:
            self._scale_up(unschedulable, now, nodes)

    @staticmethod
    def _queue_order(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """filterOutSchedulableByPacking's order: highest priority first (a stable sort here; the real one's
        `sort.Slice` leaves pods of one priority in any order)."""
        return sorted(pods, key=lambda p: -int(p["spec"].get("priority") or 0))

    def _snapshot(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> list[_Snapshot]:
        found: dict[str, _Snapshot] = {}
        for node in nodes:
            if is_ready(node):
                meta = node["metadata"]
                found[meta["name"]] = _Snapshot(meta.get("labels") or {}, tuple((node.get("spec") or {}).get("taints") or ()),
                                                allocatable_of(node), {})
        for pod in pods:
            node = found.get(pod["spec"].get("nodeName") or "")
            if node is not None and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                for name, amount in requests_of(pod["spec"]).items():
                    node.requested[name] = node.requested.get(name, Decimal(0)) + amount
        upcoming = [_Snapshot({**group.labels, NODE_GROUP_LABEL: group.name}, group.taints, group.allocatable(), {})
                    for _, group, _ in self.upcoming]
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
            if group and group not in templates and is_ready(node) and not (node.get("spec") or {}).get("unschedulable"):
                templates[group] = {k: v for k, v in labels.items() if k != "kubernetes.io/hostname"}
        return templates

    def _scale_up(self, pods: list[dict[str, Any]], now: float, nodes: Optional[list[dict[str, Any]]] = None) -> None:
        options: list[tuple[NodeGroup, list[dict[str, Any]], list[list[str]]]] = []
        sizes = self._group_sizes()
        templates = self._templates(nodes or [])
        for group in self.node_groups:
            room = group.max_size - sizes.get(group.name, 0)
            if room <= 0:
                continue
            fitting = [p for p in pods if group.admits(p["spec"], templates.get(group.name))]
            if not fitting:
                continue
            new_nodes = self._estimate(group, fitting)[:room]
            helped = {name for members in new_nodes for name in members}
            options.append((group, [p for p in fitting if p["metadata"]["name"] in helped], new_nodes))
        if not options:
            return
        group, _, new_nodes = self._best_option(options)
        for members in new_nodes:
            self.upcoming.append((now + self.provisioning_delay, group, tuple(members)))

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

    def _provision_requests(self, now: float) -> None:
        for request in self.server.list_objects(PR_API, "ProvisioningRequest"):
            meta = request["metadata"]
            conditions = {c["type"]: c for c in (request.get("status") or {}).get("conditions") or []}
            if meta.get("deletionTimestamp") or (conditions.get("Provisioned") or {}).get("status") == "True" or "Failed" in conditions:
                continue
            first = self._first_seen.setdefault(meta["uid"], now)
            if "Accepted" not in conditions:
                self._set_conditions(request, [("Accepted", "Accepted", "ProvisioningRequest is accepted")])
                continue
            if now - first < self.provisioning_delay:
                continue
            if self.fail_requests:
                self._set_conditions(request, [("Failed", "Expired", "ProvisioningRequest is expired")])
                continue
            if self.shortage:
                if (conditions.get("Provisioned") or {}).get("reason") != "CapacityIsNotFound":
                    self._set_conditions(request, [("Provisioned", "CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")],
                                         status="False")
                continue
            pods: list[dict[str, Any]] = []
            for pod_set in request["spec"]["podSets"]:
                template = self.server.get_object("v1", "PodTemplate", pod_set["podTemplateRef"]["name"], meta["namespace"])
                if template is None:
                    # processors/provreq/injector.go: pods it cannot build from the request are MarkAsFailed,
                    # reason FailedToCreatePods (provisioningrequest/conditions/conditions.go FailedToCreatePodsReason).
                    self._set_conditions(request, [("Failed", "FailedToCreatePods", f"podtemplates \"{pod_set['podTemplateRef']['name']}\" not found")])
                    return
                # provisioningrequest/pods/pods.go PodsForProvisioningRequest: count pods from the template.
                pods += [{"metadata": {"name": f"{meta['name']}-{len(pods) + i}"}, "spec": template["template"]["spec"]}
                         for i in range(pod_set["count"])]
            group = next((g for g in self.node_groups if all(g.admits(p["spec"]) for p in pods)), None)
            if group is None:
                if (conditions.get("Provisioned") or {}).get("reason") != "CapacityIsNotFound":
                    self._set_conditions(request, [("Provisioned", "CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")],
                                         status="False")
                continue
            planned = self._estimate(group, pods)
            for _ in planned:
                self.add_node(group, (meta["name"],))
            self._set_conditions(request, [("Provisioned", "Provisioned", f"{len(planned)} nodes added")])

    def _set_conditions(self, request: dict[str, Any], new: list[tuple[str, str, str]], status: str = "True") -> None:
        """Set conditions as conditions.go AddOrUpdateCondition does: one per type, replaced."""
        conditions = [c for c in (request.get("status") or {}).get("conditions") or [] if c.get("type") not in {k for k, _, _ in new}]
        for kind, reason, message in new:
            conditions.append({"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now_rfc3339()})
        try:
            self.server.update_status({**request, "status": {**(request.get("status") or {}), "conditions": conditions}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise


def default_node_group(gpus: int = 8, labels: Optional[Mapping[str, str]] = None) -> NodeGroup:
    return NodeGroup("gpu-8x", gpus=gpus, labels=dict(labels or {}))
