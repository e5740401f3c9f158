"""A simulated GPU-sharing scheduler, kubelet and cluster autoscaler for the node-scale-adjuster's tests.

`GpuSim` runs one thread against a `KubeApiServer`:

* KAI's part: pods for `kai-scheduler` with `gpu-fraction` / `gpu-memory`
  (and `gpu-fraction-num-devices`) annotations are placed into free slices
  of GPUs (best fit, distinct GPUs of one node for multi-device pods) of
  Ready nodes whose labels match the pod's nodeSelector; a pod that does not
  fit gets `PodScheduled=False/Unschedulable` as KAI writes it
  (default_status_updater.go: reason Unschedulable, a "0/N nodes are
  available" message), once, with the time it started waiting.
* The default scheduler's part: pods without a schedulerName that request
  whole GPUs bind to a node with that many completely free GPUs, else get the
  same Unschedulable condition.
* The kubelet's part: a bound pod turns Running; a pod whose container runs
  `true` (the adjuster's placeholders) turns Succeeded, which frees its GPUs.
* The cluster autoscaler's part, recomputed from scratch on every step as
  the real one does each loop: unschedulable pods requesting whole GPUs are
  first fitted (first fit, in creation order) into the nodes it is already
  adding ("upcoming" nodes, entirely free in its view: the real autoscaler
  adds them to its cluster snapshot as template nodes before deciding,
  core/static_autoscaler.go `addUpcomingNodesToClusterSnapshot` /
  `getUpcomingNodeInfos`), and the rest are packed, largest first as its
  binpacking estimator orders them (estimator/decreasing_pod_orderer.go),
  first fit into new nodes of `node_gpus` GPUs carrying the pod's
  nodeSelector labels, which register `provisioning_delay` seconds later. It
  looks every `scan_interval` seconds (the real one's --scan-interval is 10 s;
  0.5 s by default here, against the controllers' sub-second reactions). A pod whose node came but went to
  another pod is still unschedulable, so the next step scales up for it
  again, as the real autoscaler would. A node once decided is added even if
  the pods it was for are gone meanwhile (a scale-up is not taken back).
  Pods requesting no GPU resource never trigger it (as the real
  autoscaler, which cannot read annotations).
  ProvisioningRequests (best-effort-atomic-scale-up) get `Accepted`, then,
  after the delay, all their podSets' nodes at once and `Provisioned=True`
  (or `Failed=True` while `fail_requests` is set, or when a PodTemplate is
  missing). The booking (BookingExpired) and CapacityRevoked are not
  simulated.

Where it is simpler than the real thing: no taints, tolerations or node
affinity are evaluated (nodeSelector only); no CPU or memory fit; no
preemption; binding writes `spec.nodeName` straight into the store (the test
server has no pods/binding subresource), in one MODIFIED event with the
PodScheduled=True condition, as the binding subresource would produce.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Optional

from tests.kubeapi.errors import ApiError
from tests.kubeapi.fixtures import make_gpu_node

KAI = "kai-scheduler"
PR_API = "autoscaling.x-k8s.io/v1"
GPU_KEY = "nvidia.com/gpu"


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def fraction_pod(name: str, namespace: str = "default", *, fraction: Optional[str] = None, memory_mib: Optional[int] = None,
                 devices: int = 1, node_selector: Optional[dict[str, str]] = None, scheduler: str = KAI) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if fraction is not None:
        annotations["gpu-fraction"] = fraction
    if memory_mib is not None:
        annotations["gpu-memory"] = str(memory_mib)
    if devices != 1:
        annotations["gpu-fraction-num-devices"] = str(devices)
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1d"]}]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations, "labels": {"kai.scheduler/queue": "q"}},
            "spec": spec}


@dataclass
class _Node:
    name: str
    labels: dict[str, str]
    gpus: int
    memory_mib: int
    used: list[Fraction] = field(default_factory=list)


class GpuSim:
    def __init__(self, server: Any, *, provisioning_delay: float = 0.5, node_gpus: int = 8, interval: float = 0.05,
                 node_labels: Optional[dict[str, str]] = None, scan_interval: float = 0.5,
                 expendable_cutoff: int = -10) -> None:
        self.server = server
        #: --expendable-pods-priority-cutoff (cluster-autoscaler@1.33.6 config/flags/flags.go, default -10).
        self.expendable_cutoff = expendable_cutoff
        self.provisioning_delay = provisioning_delay
        #: How often the autoscaler looks at the unschedulable pods (the real one: --scan-interval, 10 s by
        #: default, some ten times what a controller takes to react; here 0.5 s against a controller's 0.05
        #: to 0.2 s debounce and resync); 0: on every step. Nodes it decided on register when due either way.
        self.scan_interval = scan_interval
        self._last_scan = -float("inf")
        self.node_gpus = node_gpus
        self.interval = interval
        self.node_labels = dict(node_labels or {})
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="gpu-sim", daemon=True)
        #: Nodes the autoscaler added, in order, and the placeholder pods each was for.
        self.added_nodes: list[tuple[str, tuple[str, ...]]] = []
        self._first_seen: dict[str, float] = {}
        #: Nodes the autoscaler is adding: (registers at, nodeSelector, the pods it was decided for).
        self._upcoming: list[tuple[float, dict[str, str], tuple[str, ...]]] = []
        self._serial = 0
        self.errors: list[str] = []
        #: ProvisioningRequests are failed while this is set: what the real autoscaler does only after 7 days
        #: (reason Expired) or for a template it cannot build pods from (processors/provreq/processor.go).
        self.fail_requests = False
        #: The cloud has no capacity while this is set: Provisioned=False, reason CapacityIsNotFound, retried
        #: (cluster-autoscaler@1.33.6 provisioningrequest/besteffortatomic/provisioning_class.go, Provision;
        #: provisioningrequest/conditions/conditions.go). Never Failed for a shortage.
        self.shortage = False

    def __enter__(self) -> "GpuSim":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join(5)

    def _loop(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - a test reads .errors
                self.errors.append(f"{type(exc).__name__}: {exc}")

    # --- one step -------------------------------------------------------------------------

    def step(self) -> None:
        pods = self.server.list_objects("v1", "Pod")
        nodes = self._nodes(pods)
        self._kubelet(pods)
        pending = [p for p in pods if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
                   and p.get("status", {}).get("phase", "Pending") == "Pending"]
        pending.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["namespace"], p["metadata"]["name"]))
        unschedulable_whole: list[dict[str, Any]] = []
        for pod in pending:
            scheduler = pod["spec"].get("schedulerName") or "default-scheduler"
            whole = self._whole_gpus(pod)
            if scheduler == KAI and whole == 0:
                request = self._fraction(pod, nodes)
                if request is None:
                    continue
                placed = self._place_fraction(pod, nodes, *request)
            elif scheduler == "default-scheduler" and whole > 0:
                placed = self._place_whole(pod, nodes, whole)
                if not placed:
                    unschedulable_whole.append(pod)
            else:
                continue
            if not placed:
                self._mark_unschedulable(pod, len(nodes))
        self._autoscale(unschedulable_whole)
        self._provision_requests()

    def _nodes(self, pods: list[dict[str, Any]]) -> list[_Node]:
        nodes = []
        for node in self.server.list_objects("v1", "Node"):
            labels = node["metadata"].get("labels") or {}
            gpus = int((node.get("status") or {}).get("allocatable", {}).get(GPU_KEY, "0"))
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in node.get("status", {}).get("conditions") or [])
            if ready and not node.get("spec", {}).get("unschedulable"):
                nodes.append(_Node(node["metadata"]["name"], labels, gpus, int(labels.get("nvidia.com/gpu.memory", "81920")),
                                   [Fraction(0)] * gpus))
        by_name = {n.name: n for n in nodes}
        for pod in pods:
            node = by_name.get(pod["spec"].get("nodeName") or "")
            if node is None or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            alloc = (pod["metadata"].get("annotations") or {}).get("sim.kai/gpus")
            if alloc:  # "i,j:fraction"
                indices, amount = alloc.split(":")
                for i in indices.split(","):
                    node.used[int(i)] += Fraction(amount)
            else:
                need = self._whole_gpus(pod)
                for i in range(node.gpus):
                    if need and node.used[i] == 0:
                        node.used[i] = Fraction(1)
                        need -= 1
        return nodes

    @staticmethod
    def _whole_gpus(pod: dict[str, Any]) -> int:
        total = 0
        for c in pod["spec"].get("containers") or []:
            total += int(((c.get("resources") or {}).get("requests") or {}).get(GPU_KEY, "0"))
        return total

    @staticmethod
    def _fraction(pod: dict[str, Any], nodes: list[_Node]) -> Optional[tuple[Fraction, int]]:
        ann = pod["metadata"].get("annotations") or {}
        devices = int(ann.get("gpu-fraction-num-devices", "1"))
        if "gpu-fraction" in ann:
            return Fraction(ann["gpu-fraction"]), devices
        if "gpu-memory" in ann:
            memory = min((n.memory_mib for n in nodes), default=81920)
            return min(Fraction(1), Fraction(int(ann["gpu-memory"]), memory)), devices
        return None

    @staticmethod
    def _fits(pod: dict[str, Any], node: _Node) -> bool:
        return all(node.labels.get(k) == v for k, v in (pod["spec"].get("nodeSelector") or {}).items())

    def _place_fraction(self, pod: dict[str, Any], nodes: list[_Node], fraction: Fraction, devices: int) -> bool:
        best: Optional[tuple[Fraction, _Node, list[int]]] = None
        for node in nodes:
            if not self._fits(pod, node):
                continue
            free = sorted((1 - u, i) for i, u in enumerate(node.used) if 1 - u >= fraction)
            if len(free) >= devices:
                chosen = free[:devices]
                waste = sum((f - fraction for f, _ in chosen), Fraction(0))
                if best is None or waste < best[0]:
                    best = (waste, node, [i for _, i in chosen])
        if best is None:
            return False
        _, node, indices = best
        for i in indices:
            node.used[i] += fraction
        self._bind(pod, node.name, {"sim.kai/gpus": f"{','.join(map(str, indices))}:{fraction}"})
        return True

    def _place_whole(self, pod: dict[str, Any], nodes: list[_Node], gpus: int) -> bool:
        for node in nodes:
            free = [i for i, u in enumerate(node.used) if u == 0]
            if self._fits(pod, node) and len(free) >= gpus:
                for i in free[:gpus]:
                    node.used[i] = Fraction(1)
                self._bind(pod, node.name, {})
                return True
        return False

    def _bind(self, pod: dict[str, Any], node: str, annotations: dict[str, str]) -> None:
        """What POST pods/<name>/binding does: nodeName and PodScheduled=True in one write."""
        store = self.server.store
        resource = self.server._resource("v1", "Pod")
        meta = pod["metadata"]
        with store.lock:
            current = store._bucket(resource).get((meta["namespace"], meta["name"]))
            if current is None or current["metadata"].get("uid") != meta.get("uid") or current["spec"].get("nodeName"):
                return
            updated = copy.deepcopy(current)
            updated["spec"]["nodeName"] = node
            if annotations:
                updated["metadata"].setdefault("annotations", {}).update(annotations)
            status = updated.setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            status["conditions"].append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()})
            store._store(resource, updated, "MODIFIED", current)
            store.changed.notify_all()

    def _mark_unschedulable(self, pod: dict[str, Any], node_count: int) -> None:
        conditions = pod.get("status", {}).get("conditions") or []
        if any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions):
            return
        status = dict(pod.get("status") or {})
        status["conditions"] = [c for c in conditions if c.get("type") != "PodScheduled"] + [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
            "message": f"0/{node_count} nodes are available: {node_count} node(s) didn't have enough resources: GPU.",
        }]
        try:
            self.server.update_status({**pod, "status": status})
        except ApiError as exc:  # the pod changed or went away meanwhile; the next step retries
            if exc.code not in (404, 409):
                raise

    def _kubelet(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            phase = pod.get("status", {}).get("phase", "Pending")
            if not pod["spec"].get("nodeName") or phase != "Pending" or pod["metadata"].get("deletionTimestamp"):
                continue
            exits = any((c.get("command") or [""])[-1].endswith("true") for c in pod["spec"].get("containers") or [])
            status = dict(pod.get("status") or {}, phase="Succeeded" if exits else "Running", startTime=now_rfc3339())
            try:
                self.server.update_status({**pod, "status": status})
            except ApiError as exc:  # changed or gone meanwhile; the next step retries
                if exc.code not in (404, 409):
                    raise

    def _autoscale(self, pods: list[dict[str, Any]]) -> None:
        """One loop of the autoscaler over the pods the scheduler could not place in this step."""
        now = time.monotonic()
        registered = [(selector, members) for due, selector, members in self._upcoming if due <= now]
        self._upcoming = [u for u in self._upcoming if u[0] > now]
        for selector, members in registered:
            self._add_node(selector, members)
        if now - self._last_scan < self.scan_interval:
            return
        self._last_scan = now
        # Capacity in the autoscaler's view: nodes registered in this step (the scheduler has not
        # seen them yet) and the upcoming ones, all entirely free; then new nodes.
        bins: list[tuple[dict[str, str], list[int]]] = [(sel, [0]) for sel, _ in registered]
        bins += [(sel, [0]) for _, sel, _ in self._upcoming]
        new: list[tuple[dict[str, str], list[int], list[str]]] = []
        rest = []
        # cluster-autoscaler@1.33.6 core/podlistprocessor/filter_out_expendable.go (Process) with
        # core/utils/expendable.go (IsExpendablePod): a pod whose spec.priority is below the cutoff
        # never causes a scale-up; a pod without a priority is not expendable.
        pods = [p for p in pods if p["spec"].get("priority") is None or int(p["spec"]["priority"]) >= self.expendable_cutoff]
        for pod in pods:
            selector = dict(pod["spec"].get("nodeSelector") or {})
            gpus = self._whole_gpus(pod)
            if gpus > self.node_gpus:
                continue
            room = next((used for sel, used in bins if sel == selector and used[0] + gpus <= self.node_gpus), None)
            if room is not None:  # it will fit a node already coming
                room[0] += gpus
            else:
                rest.append((selector, gpus, pod))
        # New nodes: the binpacking estimator takes the pods largest first (estimator/decreasing_pod_orderer.go).
        for selector, gpus, pod in sorted(rest, key=lambda r: -r[1]):
            for sel, used, members in new:
                if sel == selector and used[0] + gpus <= self.node_gpus:
                    used[0] += gpus
                    members.append(pod["metadata"]["name"])
                    break
            else:
                new.append((selector, [gpus], [pod["metadata"]["name"]]))
        for selector, _, members in new:
            self._upcoming.append((now + self.provisioning_delay, selector, tuple(members)))

    def _add_node(self, selector: dict[str, str], reason: tuple[str, ...]) -> None:
        self._serial += 1
        name = f"sim-gpu-node-{self._serial}"
        node = make_gpu_node(self.server, name, gpus=self.node_gpus)
        labels = dict(node["metadata"].get("labels") or {}, **self.node_labels, **selector)
        self.server.patch_object("v1", "Node", name, {"metadata": {"labels": labels}})
        self.added_nodes.append((name, reason))

    # --- ProvisioningRequests (best-effort-atomic-scale-up: all nodes or none) ----------------

    def _provision_requests(self) -> None:
        now = time.monotonic()
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
            added = []
            for pod_set in request["spec"]["podSets"]:
                template = self.server.get_object("v1", "PodTemplate", pod_set["podTemplateRef"]["name"], meta["namespace"])
                if template is None:
                    self._set_conditions(request, [("Failed", "PodTemplateNotFound", "a PodTemplate of the request is missing")])
                    return
                gpus = self._whole_gpus({"spec": template["template"]["spec"]})
                selector = dict(template["template"]["spec"].get("nodeSelector") or {})
                added += [(selector, gpus)] * pod_set["count"]
            planned: list[tuple[dict[str, str], int]] = []
            for selector, gpus in added:
                for i, (sel, used) in enumerate(planned):
                    if sel == selector and used + gpus <= self.node_gpus:
                        planned[i] = (sel, used + gpus)
                        break
                else:
                    planned.append((selector, gpus))
            for selector, _ in planned:
                self._add_node(selector, (meta["name"],))
            self._set_conditions(request, [("Provisioned", "Provisioned", f"{len(planned)} nodes added")])

    def _set_conditions(self, request: dict[str, Any], new: list[tuple[str, str, str]], status: str = "True") -> None:
        """Set conditions as the autoscaler's conditions.AddOrUpdateCondition does: one per type, replaced."""
        conditions = [c for c in (request.get("status") or {}).get("conditions") or [] if c.get("type") not in {k for k, _, _ in new}]
        for kind, reason, message in new:
            conditions.append({"type": kind, "status": status, "reason": reason, "message": message,
                               "lastTransitionTime": now_rfc3339()})
        try:
            self.server.update_status({**request, "status": {**(request.get("status") or {}), "conditions": conditions}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    # --- what tests read ---------------------------------------------------------------------

    def pods_running(self, namespace: str) -> int:
        return sum(1 for p in self.server.list_objects("v1", "Pod", namespace) if p.get("status", {}).get("phase") == "Running")
