"""A simulated Karpenter (provisioning and empty-node consolidation), the adjuster's second autoscaler backend.

Written from kubernetes-sigs/karpenter@v1.14.1:

* Provisioning (pkg/controllers/provisioning/provisioner.go Schedule, with
  pkg/utils/pod/scheduling.go IsProvisionable): pods the scheduler marked
  `PodScheduled=False/Unschedulable`, unbound, not DaemonSet- or node-owned;
  **no priority cutoff** (a placeholder at any priority gets a node). Its
  scheduler (provisioning/scheduling/scheduler.go Solve) puts a pod that fits
  a node that exists or is being launched there, and packs the rest into new
  NodeClaims of the NodePool whose template admits them (requirements,
  taints, resources; queue.go orders pods by CPU then memory, largest
  first). Here: the same pipeline as the cluster-autoscaler simulation
  (sim_autoscaler.py), without the expendable filter; the batch window
  (--batch-idle-duration 1 s, --batch-max-duration 10 s) is `scan_interval`.
  Nodes carry `karpenter.sh/nodepool`.
* Disruption, empty nodes (pkg/controllers/disruption/controller.go, every
  pollingPeriod = 10 s, here `disruption_interval`; emptiness.go
  ShouldDisrupt / ComputeCommands): a node is a candidate when it is
  Karpenter's (`karpenter.sh/nodepool`), not annotated
  `karpenter.sh/do-not-disrupt: "true"` (state/statenode.go
  ValidateNodeDisruptable), none of its *active* pods (not terminal, not
  terminating) carries that annotation (ValidatePodsDisruptable with
  utils/pod IsDisruptable: a Succeeded placeholder protects nothing), and it
  is `Consolidatable`: `consolidateAfter` (the NodePool's; `0s` is common and
  is the default here) has passed since the last pod event on it, or since
  it registered (nodeclaim/disruption/consolidation.go Reconcile;
  nodeclaim/podevents: a pod bound there, or one there ending or deleted).
  It is empty when no reschedulable pod is bound there (utils/pod
  IsReschedulable: active). The command is validated again after
  commandValidationDelay = 15 s (consolidation.go; validation.go), here
  `validation_delay`, and the node is deleted; its pods go with it (the pod
  GC deletes pods bound to a node that is gone).

Left out: disruption budgets (default 10% of nodes; stricter only), drift,
expiration, multi- and single-node replacement consolidation (they move
running pods; the adjuster's nodes matter while empty), nomination of
existing nodes for pending pods (it protects a node only while some pending
pod fits it by its requests; leaving it out disrupts more, never less, so it
cannot make the adjuster look better than it is), instance types within a
NodePool (one template per NodePool; among NodePools the cheapest launch wins,
`_best_option`).
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any, Callable, Iterable

from kubesim.errors import ApiError
from kubesim.sim_autoscaler import ClusterAutoscaler, NodeGroup
from kubesim.sim_nodes import requests_of

NODEPOOL_LABEL = "karpenter.sh/nodepool"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


def _active(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


class Karpenter(ClusterAutoscaler):
    def __init__(self, server: Any, add_node: Callable[[NodeGroup, tuple[str, ...]], str], *, node_groups: Iterable[NodeGroup],
                 provisioning_delay: float = 0.5, scan_interval: float = 0.5, consolidate_after: float = 0.0,
                 disruption_interval: float = 0.5, validation_delay: float = 1.5, clock: Callable[[], float] = time.monotonic) -> None:
        groups = [NodeGroup(g.name, g.gpus, g.cpu, g.memory, {**g.labels, NODEPOOL_LABEL: g.name}, g.taints, g.max_size) for g in node_groups]
        # No expendable cutoff: every priority is provisioned for.
        super().__init__(server, add_node, node_groups=groups, provisioning_delay=provisioning_delay,
                         scan_interval=scan_interval, expendable_cutoff=-(2**31), clock=clock)
        self.consolidate_after = consolidate_after
        self.disruption_interval = disruption_interval
        self.validation_delay = validation_delay
        self._last_disruption = -float("inf")
        #: node -> (when its active pods last changed, the active pods then)
        self._pod_events: dict[str, tuple[float, frozenset[str]]] = {}
        #: node -> when it was first found an empty, consolidatable candidate (the command awaiting validation)
        self._candidates: dict[str, float] = {}
        #: Nodes consolidated away, in order.
        self.consolidated: list[str] = []

    def run_once(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        super().run_once(pods, nodes)
        self._disrupt(pods, nodes)

    @staticmethod
    def _queue_order(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """provisioning/scheduling/queue.go byCPUAndMemoryDescending: the most CPU first, then the most memory
        (no priority order): pods go onto the nodes in flight, and into new NodeClaims, in that order."""
        def most_first(pod: dict[str, Any]) -> tuple[Decimal, Decimal]:
            wanted = requests_of(pod["spec"])
            return -wanted.get("cpu", Decimal(0)), -wanted.get("memory", Decimal(0))

        return sorted(pods, key=most_first)

    def _templates(self, nodes: list[dict[str, Any]]) -> dict[str, Any]:
        """A NodePool's NodeClaims take its template's labels (and the instance type's), never a live node's."""
        return {}

    @staticmethod
    def _best_option(options: list[Any]) -> Any:
        """The cheapest launch (provisioning/scheduling/nodeclaim.go: a NodeClaim's instance types ordered by
        price, the cheapest launched; the kwok provider's prices are its instance types file's, generated from
        CPU and memory by kwok/tools/gen_instance_types.go priceFromResources): here the fewest GPUs, then
        CPUs, then the pool's name (the GPU nodes here grow in both together)."""
        return min(options, key=lambda o: (o[0].gpus * len(o[2]), o[0].allocatable()["cpu"] * len(o[2]), o[0].name))

    def _disrupt(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        now = self.clock()
        active: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if node and _active(pod):
                active.setdefault(node, []).append(pod)
        for node in nodes:
            name = node["metadata"]["name"]
            keys = frozenset(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in active.get(name, ()))
            seen = self._pod_events.get(name)
            if seen is None or seen[1] != keys:  # podevents: a pod bound, ended or deleted there
                self._pod_events[name] = (now, keys)
        if now - self._last_disruption < self.disruption_interval:
            return
        self._last_disruption = now
        candidates = set()
        for node in nodes:
            meta = node["metadata"]
            name = meta["name"]
            if NODEPOOL_LABEL not in (meta.get("labels") or {}) or (meta.get("annotations") or {}).get(DO_NOT_DISRUPT) == "true":
                continue
            on_node = active.get(name, [])
            if any((p["metadata"].get("annotations") or {}).get(DO_NOT_DISRUPT) == "true" for p in on_node):
                continue
            if on_node or now - self._pod_events[name][0] < self.consolidate_after:
                continue
            candidates.add(name)
        self._candidates = {n: self._candidates.get(n, now) for n in candidates}
        for name, since in sorted(self._candidates.items()):
            if now - since >= self.validation_delay:
                self._delete_node(name, pods)
                del self._candidates[name]

    def _delete_node(self, name: str, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            if pod["spec"].get("nodeName") == name:
                try:
                    self.server.delete_object("v1", "Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
                except ApiError as exc:
                    if exc.code != 404:
                        raise
        try:
            self.server.delete_object("v1", "Node", name)
        except ApiError as exc:
            if exc.code != 404:
                raise
        self.consolidated.append(name)
        self._pod_events.pop(name, None)
