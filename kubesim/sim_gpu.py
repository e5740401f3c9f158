"""KAI's scheduler and binder past v0.12, and a cluster-autoscaler, simulated for the node-scale-adjuster's tests.

Why simulated: cluster-autoscaler cannot be built here (the module proxy refuses it, by tag and by commit), nor KAI
past v0.12 (not served); the real KAI v0.12 runs in testcluster (tests/e2e/test_adjuster_real.py). `GpuSim` runs
them as clients of the real kube-apiserver (real_api.py), beside the real kube-scheduler, which binds every
default-scheduler pod (the placeholders, whole-GPU pods), and kwok, which runs every bound pod (a placeholder's
`true` exits by a kwok Stage). One thread; each step, in order:

1. The autoscaler's nodes that are due register (sim_autoscaler.py's cluster-autoscaler: a kubelet registering
   its Node, `register_gpu_node`).
2. KAI's binder cleans up (kai-scheduler@v0.13.0
   pkg/binder/binding/resourcereservation/resource_reservation.go, syncForPods): a reservation pod whose GPU group
   no Pending or Running pod carries any more is deleted.
3. A session of KAI's scheduler (pods for `kai-scheduler` with `gpu-fraction` / `gpu-memory`,
   `gpu-fraction-num-devices`): nodes that pass sim_nodes.py's filters (selector, required affinity, taints, the
   pod's CPU and memory, every pod bound there counted, whoever bound it); a share goes on a shared GPU of the
   node with room (its GPU group), or on a free whole GPU, best fit (least room left), distinct GPUs for a
   multi-device pod. A share on a free GPU needs the binder to reserve it: a reservation pod
   `gpu-reservation-<node>-<5 chars>` in `kai-resource-reservation`, labels `app: kai-resource-reservation` and
   `runai-gpu-group: <group>`, annotation `karpenter.sh/do-not-disrupt: "true"`, `nodeName` set, requesting one
   whole `nvidia.com/gpu` (createGPUReservationPod, createResourceReservationPod). The binder creates none while
   any pod of KAI's scaling namespace (`kai-scale-adjust`) has a `PodScheduled` condition that is not True
   (isScalingUp): such a pod is not bound this step. The bound pod gets `runai-gpu-group: <group>` (one GPU) or
   `runai-gpu-group/<group>: <group>` per GPU (updatePodGPUGroup), then the binding subresource. A pod that fits
   nowhere gets `PodScheduled=False/Unschedulable` as KAI writes it
   (pkg/scheduler/cache/status_updater/default_status_updater.go), once.
4. The autoscaler's loop (`run_once`) over what the schedulers left.

Where it is simpler than the real thing: no preemption (KAI preempts only its own pods, and the placeholders are
not KAI's); the reservation pod's GPU index annotation (written by its own container) is not written; a shared pod
found without a reservation is not deleted (the binder's deleteNonReservedPods repairs a state the sim never
produces); KAI's session takes its pods oldest first (its real order is by queue fair share and priority; which KAI
pod lands first is not what the adjuster decides on); KAI and kube-scheduler race for a new node's GPUs as two
real schedulers do, and kwok admits whatever is bound where a kubelet would refuse the loser.
What it deliberately does not do: schedule default-scheduler pods or run pods (the real programs do), or talk to
anything but `server`'s few methods (real_api.py).
"""

from __future__ import annotations

import random
import string
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable, Iterable, Optional

from kubesim.errors import ApiError
from kubesim.sim_autoscaler import NODE_GROUP_LABEL, ClusterAutoscaler, NodeGroup
from kubesim.sim_common import now_rfc3339
from kubesim.sim_nodes import GPU_KEY, allocatable_of, is_ready, pod_fits_node, requests_of

__all__ = ["KAI", "GPU_KEY", "GpuSim", "NodeGroup", "fraction_pod", "register_gpu_node", "RESERVATION_NAMESPACE", "SCALING_NAMESPACE"]

KAI = "kai-scheduler"
#: kai-scheduler@v0.13.0 pkg/common/constants/constants.go DefaultResourceReservationName, and the binder's
#: --resource-reservation-namespace / --resource-reservation-app-label defaults (cmd/binder/app/options.go).
RESERVATION_NAMESPACE = "kai-resource-reservation"
RESERVATION_APP = "kai-resource-reservation"
#: The binder's --scale-adjust-namespace default (kai-scheduler@v0.12.0 cmd/binder/app/options.go, constants.DefaultScaleAdjustName).
SCALING_NAMESPACE = "kai-scale-adjust"
GPU_GROUP_LABEL = "runai-gpu-group"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


def _kai_gpu_memory(label: Optional[str]) -> int:
    """A GPU's memory in MiB as KAI reads it (kai-scheduler@v0.12.0 pkg/scheduler/api/node_info/node_info.go
    getNodeGpuMemory): the label, taken as bytes from a tebibyte in MiB up (GPU feature discovery's bug), floored to
    100 MiB; no label or an unreadable one is DefaultGpuMemory, 100."""
    try:
        mib = int(label or "")
    except ValueError:
        return 100
    if mib >= 1024 * 1024:
        mib //= 1024 * 1024
    return mib - mib % 100


def fraction_pod(name: str, namespace: str = "default", *, fraction: Optional[str] = None, memory_mib: Optional[int] = None,
                 devices: int = 1, node_selector: Optional[dict[str, str]] = None, scheduler: str = KAI,
                 cpu: Optional[str] = None, memory: Optional[str] = None) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if fraction is not None:
        annotations["gpu-fraction"] = fraction
    if memory_mib is not None:
        annotations["gpu-memory"] = str(memory_mib)
    if devices != 1:
        annotations["gpu-fraction-num-devices"] = str(devices)
    container: dict[str, Any] = {"name": "c", "image": "busybox", "command": ["sleep", "1d"]}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if requests:
        container["resources"] = {"requests": requests}
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [container]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations, "labels": {"kai.scheduler/queue": "q"}},
            "spec": spec}


@dataclass
class _Node:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    allocatable: dict[str, Decimal]
    gpus: int
    memory_mib: int
    #: What the pods bound here and not finished request (reservation pods' whole GPUs included).
    requested: dict[str, Decimal] = field(default_factory=dict)
    #: KAI's shared GPUs here: GPU group -> the share its pods hold.
    shared: dict[str, Fraction] = field(default_factory=dict)

    def free_gpus(self) -> int:
        return self.gpus - int(self.requested.get(GPU_KEY, 0))

    def add(self, wanted: dict[str, Decimal]) -> None:
        for name, amount in wanted.items():
            self.requested[name] = self.requested.get(name, Decimal(0)) + amount


def _system_node(server: Any) -> None:
    """A Ready node with CPU and memory and no GPU, labelled as kubelet labels every node."""
    _register_node(server, "system-0", {"cpu": "16", "memory": "64Gi", "pods": "110"}, {})


#: What GPU Feature Discovery labels an H100 node with (gpu-feature-discovery's `nvidia.com/gpu.*` labels).
H100, H100_MEMORY_MIB = "NVIDIA-H100-80GB-HBM3", 81559


def register_gpu_node(server: Any, name: str, gpus: int = 8, *, cpu: str = "128", memory: str = "1024Gi",
                      taints: Iterable[dict[str, str]] = ()) -> dict:
    """A Ready node of `gpus` H100s as its kubelet registers it (the NVIDIA device plugin's `nvidia.com/gpu` in
    capacity and allocatable) and GPU Feature Discovery labels it."""
    gfd = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": str(gpus),
           "nvidia.com/gpu.memory": str(H100_MEMORY_MIB)}  # fmt: skip
    return _register_node(server, name, {"cpu": cpu, "memory": memory, "pods": "110", GPU_KEY: str(gpus)}, gfd, taints)


def _register_node(server: Any, name: str, capacity: dict[str, str], labels: dict[str, str],
                   taints: Iterable[dict[str, str]] = ()) -> dict:
    """A kubelet's Node, as it registers: the well-known labels, Ready, its capacity all allocatable."""
    spec = {"taints": [dict(t) for t in taints]} if taints else {}
    well_known = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    status = {"capacity": dict(capacity), "allocatable": dict(capacity),
              "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                              "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()}],
              "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
              "nodeInfo": {"architecture": "amd64", "bootID": "", "containerRuntimeVersion": "containerd://1.7.0", "kernelVersion": "6.8.0",
                           "kubeProxyVersion": "", "kubeletVersion": "v1.33.0", "machineID": "", "operatingSystem": "linux",
                           "osImage": "Ubuntu 24.04 LTS", "systemUUID": ""}}  # fmt: skip
    return server.create_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {**well_known, **labels}},
                                 "spec": spec, "status": status})  # fmt: skip


def _gpu_groups(labels: dict[str, str]) -> list[str]:
    groups = [labels[GPU_GROUP_LABEL]] if labels.get(GPU_GROUP_LABEL) else []
    return groups + [v for k, v in labels.items() if k.startswith(GPU_GROUP_LABEL + "/") and v]


class GpuSim:
    """KAI's scheduler and binder and the cluster-autoscaler, one `step()` at a time: by hand, or every `interval`
    seconds on a thread of its own (`with GpuSim(...) as sim:`), whose errors land in `errors`."""

    def __init__(self, server: Any, *, provisioning_delay: float = 0.5, node_gpus: int = 8, interval: float = 0.05,
                 node_labels: Optional[dict[str, str]] = None, scan_interval: float = 0.5,
                 expendable_cutoff: int = -10, node_groups: Optional[Iterable[NodeGroup]] = None, system_node: bool = True,
                 autoscaler_clock: Callable[[], float] = time.monotonic) -> None:
        """`server`: the simulations' API (real_api.py `RealApi`). `system_node`: a CPU node (`system-0`, 16 CPUs,
        64 GiB, no GPU) as every real cluster has one besides its GPU nodes: a KAI pod asks for its GPU share by
        annotation, so the autoscaler sees it fit there by its requests and does not scale up for it; on a cluster
        with no node at all the real autoscaler would. `node_groups`: the autoscaler's node groups; by default one of
        `node_gpus`-GPU nodes with 128 CPUs and 1 TiB, labelled `node_labels`. `autoscaler_clock`: the autoscaler's
        clock (sim_autoscaler.ClusterAutoscaler)."""
        self.server = server
        self.interval = interval
        groups = list(node_groups) if node_groups is not None else [NodeGroup("gpu-8x", gpus=node_gpus, labels=dict(node_labels or {}))]
        self.autoscaler = ClusterAutoscaler(server, self._add_node, node_groups=groups, provisioning_delay=provisioning_delay,
                                            scan_interval=scan_interval, expendable_cutoff=expendable_cutoff, clock=autoscaler_clock)
        if system_node and server.get_object("v1", "Node", "system-0") is None:
            _system_node(server)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="gpu-sim", daemon=True)
        #: Nodes the autoscaler added, in order, and the pods (or ProvisioningRequest) each was for.
        self.added_nodes: list[tuple[str, tuple[str, ...]]] = []
        #: Every reservation pod KAI's binder created, in order.
        self.reservations: list[str] = []
        #: Shares the binder did not bind while a scaling pod was unscheduled (pod keys, once each).
        self.held_by_scaling: list[str] = []
        #: KAI's sessions do not run while this is set (a session at scale takes seconds; its binder can wait on
        #: scaling pods): what leaves a node a placeholder brought up empty for a while after it exited.
        self.kai_paused = False
        self._serial = 0
        self._random = random.Random(0)
        self.errors: list[str] = []

    # The autoscaler's knobs, as the tests set them on the sim.
    @property
    def provisioning_delay(self) -> float:
        return self.autoscaler.provisioning_delay

    @provisioning_delay.setter
    def provisioning_delay(self, value: float) -> None:
        self.autoscaler.provisioning_delay = value

    @property
    def fail_requests(self) -> bool:
        return self.autoscaler.fail_requests

    @fail_requests.setter
    def fail_requests(self, value: bool) -> None:
        self.autoscaler.fail_requests = value

    @property
    def shortage(self) -> bool:
        return self.autoscaler.shortage

    @shortage.setter
    def shortage(self, value: bool) -> None:
        self.autoscaler.shortage = value

    @property
    def scan_interval(self) -> float:
        return self.autoscaler.scan_interval

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

    def step(self, autoscaler: bool = True) -> None:
        """One round: nodes due register, KAI's session, then (unless `autoscaler` is False, for a test that must keep
        the autoscaler from deciding in this round) one loop of the autoscaler."""
        self.autoscaler.register_due()
        # A session runs on the snapshot it takes: one whose lists were taken while paused does not run, even when the
        # pause ends before it would place (its pods list can predate a bind another scheduler made meanwhile).
        session_paused = self.kai_paused
        pods = self._binder_sync(self.server.list_objects("v1", "Pod"))
        nodes = self._nodes(self.server.list_objects("v1", "Node"), pods)
        scaling_up = self._scaling_up(pods)
        pending = [p for p in pods if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
                   and p.get("status", {}).get("phase", "Pending") == "Pending"]
        pending.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["namespace"], p["metadata"]["name"]))
        for pod in () if session_paused else pending:
            if pod["spec"].get("schedulerName") == KAI and int(requests_of(pod["spec"]).get(GPU_KEY, 0)) == 0:
                if self._place_fraction(pod, nodes, scaling_up) is False:
                    self._mark_unschedulable(pod, len(nodes))
        if autoscaler and self.autoscaler.scan_due():  # the lists only for a loop that scans: 1 step in 10 by default
            self.autoscaler.run_once(self.server.list_objects("v1", "Pod"), self.server.list_objects("v1", "Node"))

    def _nodes(self, node_objects: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[_Node]:
        nodes = []
        for node in node_objects:
            if is_ready(node):
                labels = node["metadata"].get("labels") or {}
                allocatable = allocatable_of(node)
                nodes.append(_Node(node["metadata"]["name"], labels, list((node.get("spec") or {}).get("taints") or []), allocatable,
                                   int(allocatable.get(GPU_KEY, 0)), _kai_gpu_memory(labels.get("nvidia.com/gpu.memory"))))
        by_name = {n.name: n for n in nodes}
        for pod in pods:
            node = by_name.get(pod["spec"].get("nodeName") or "")
            if node is None or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            node.add(requests_of(pod["spec"]))
            if pod["metadata"]["namespace"] == RESERVATION_NAMESPACE:
                continue
            share = self._share(pod, node)
            if share is not None:
                for group in _gpu_groups(pod["metadata"].get("labels") or {}):
                    node.shared[group] = node.shared.get(group, Fraction(0)) + share[0]
        return nodes

    @staticmethod
    def _share(pod: dict[str, Any], node: _Node) -> Optional[tuple[Fraction, int]]:
        """(fraction of one GPU, devices) a KAI pod asks for on `node` (its GPU memory share for gpu-memory)."""
        ann = pod["metadata"].get("annotations") or {}
        devices = int(ann.get("gpu-fraction-num-devices", "1"))
        if "gpu-fraction" in ann:
            return Fraction(ann["gpu-fraction"]), devices
        if "gpu-memory" in ann:
            # more than a GPU holds: a share that fits on no GPU (KAI: enoughResourcesOnGpu is false everywhere)
            if node.memory_mib <= 0:
                return Fraction(2), devices
            return Fraction(int(ann["gpu-memory"]), node.memory_mib), devices
        return None

    @staticmethod
    def _scaling_up(pods: list[dict[str, Any]]) -> bool:
        """resource_reservation.go isScalingUp: a pod of the scaling namespace with PodScheduled not True."""
        return any(c.get("type") == "PodScheduled" and c.get("status") != "True"
                   for p in pods if p["metadata"]["namespace"] == SCALING_NAMESPACE
                   for c in (p.get("status") or {}).get("conditions") or [])

    def _place_fraction(self, pod: dict[str, Any], nodes: list[_Node], scaling_up: bool) -> Optional[bool]:
        """True: bound; False: fits nowhere (Unschedulable); None: placed, but the binder may not reserve a GPU now."""
        best: Optional[tuple[Fraction, _Node, list[Optional[str]], Fraction]] = None
        wanted = requests_of(pod["spec"])
        for node in nodes:
            share = self._share(pod, node)
            if share is None:
                return None
            fraction, devices = share
            if fraction <= 0 or fraction > 1 or not pod_fits_node(pod["spec"], node.labels, node.taints, node.allocatable, node.requested, wanted):
                continue
            # Room left after placing it: on each shared GPU with room, and on each free whole GPU (None).
            options: list[tuple[Fraction, Optional[str]]] = sorted(
                ((1 - used - fraction, group) for group, used in node.shared.items() if 1 - used >= fraction), key=lambda o: (o[0], o[1]))
            options += [(1 - fraction, None)] * node.free_gpus()
            if len(options) < devices:
                continue
            chosen = options[:devices]
            waste = sum((w for w, _ in chosen), Fraction(0))
            if best is None or waste < best[0]:
                best = (waste, node, [g for _, g in chosen], fraction)
        if best is None:
            return False
        _, node, groups, fraction = best
        if None in groups and scaling_up:
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            if key not in self.held_by_scaling:
                self.held_by_scaling.append(key)
            return None
        labels: dict[str, str] = {}
        named = []
        for group in groups:
            if group is None:
                group = self._reserve(node)
            named.append(group)
            node.shared[group] = node.shared.get(group, Fraction(0)) + fraction
        if len(named) == 1:
            labels[GPU_GROUP_LABEL] = named[0]
        else:
            labels.update({f"{GPU_GROUP_LABEL}/{g}": g for g in named})
        node.add(requests_of(pod["spec"]))
        self._bind(pod, node.name, labels)
        return True

    def _reserve(self, node: _Node) -> str:
        """The binder's reservation pod for one free GPU of `node`: its GPU group."""
        if self.server.get_object("v1", "Namespace", RESERVATION_NAMESPACE) is None:  # KAI's chart creates it
            self.server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RESERVATION_NAMESPACE}})
        suffix = "".join(self._random.choice(string.ascii_lowercase + string.digits) for _ in range(5))
        group = f"{node.name}-gpu-{suffix}"
        name = f"gpu-reservation-{node.name}-{suffix}"
        self.server.create_object({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": RESERVATION_NAMESPACE,
                         "labels": {"app": RESERVATION_APP, GPU_GROUP_LABEL: group},
                         "annotations": {DO_NOT_DISRUPT: "true"}},
            "spec": {"nodeName": node.name, "serviceAccountName": "kai-resource-reservation",
                     "containers": [{"name": "resource-reservation", "image": "registry/local/kai-scheduler/resource-reservation",
                                     "imagePullPolicy": "IfNotPresent",
                                     "resources": {"limits": {GPU_KEY: "1"}, "requests": {GPU_KEY: "1"}}}]},
        })
        node.add({GPU_KEY: Decimal(1)})
        self.reservations.append(name)
        return group

    def _binder_sync(self, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """syncForPods: delete a reservation pod whose GPU group no Pending or Running pod carries."""
        held = {g for p in pods if p["metadata"]["namespace"] != RESERVATION_NAMESPACE and not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase", "Pending") in ("Pending", "Running")
                for g in _gpu_groups(p["metadata"].get("labels") or {})}
        gone = set()
        for pod in pods:
            meta = pod["metadata"]
            if meta["namespace"] == RESERVATION_NAMESPACE and (meta.get("labels") or {}).get("app") == RESERVATION_APP \
                    and (meta.get("labels") or {}).get(GPU_GROUP_LABEL) not in held:
                try:
                    self.server.delete_object("v1", "Pod", meta["name"], RESERVATION_NAMESPACE)
                except ApiError as exc:
                    if exc.code != 404:
                        raise
                gone.add(meta["name"])
        return [p for p in pods if not (p["metadata"]["namespace"] == RESERVATION_NAMESPACE and p["metadata"]["name"] in gone)]

    def _bind(self, pod: dict[str, Any], node: str, labels: dict[str, str]) -> None:
        """What KAI's binder does: the pod's GPU-group labels, then POST pods/<name>/binding (real_api.py)."""
        self.server.bind(pod, node, labels)

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

    def _add_node(self, group: NodeGroup, reason: tuple[str, ...]) -> str:
        self._serial += 1
        name = f"sim-gpu-node-{self._serial}"
        node = register_gpu_node(self.server, name, gpus=group.gpus, cpu=group.cpu, memory=group.memory, taints=group.taints)
        labels = dict(node["metadata"].get("labels") or {}, **group.labels, **{NODE_GROUP_LABEL: group.name})
        self.server.patch_object("v1", "Node", name, {"metadata": {"labels": labels}})
        self.added_nodes.append((name, reason))
        return name
