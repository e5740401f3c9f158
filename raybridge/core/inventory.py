"""GPU inventory: what GPUs each node has, and which nodes a workload may use.

Pure functions from Kubernetes Node and Pod JSON (as `kubectl get -o json`
prints them, or as the API returns them) to plain dataclasses. The local and
Ray probes in `raybridge.gpu` fill the same dataclasses, so sizing does not
care where the numbers came from.

This module does no I/O: reading files or the API is the caller's job.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Optional, Sequence

from raybridge.core.consts import GPU_MEMORY_LABELS, GPU_PRODUCT_LABELS, GPU_RESOURCE_KEYS
from raybridge.core.quantity import parse_quantity

#: Pods in these phases no longer hold their requests.
_FINISHED_PHASES = {"Succeeded", "Failed"}


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as a local or Ray probe sees it."""

    index: int
    model: Optional[str] = None
    memory_mib: Optional[int] = None


@dataclass(frozen=True)
class NodeGpus:
    """One node's GPUs of one vendor (a node with no GPUs has vendor None, gpus 0)."""

    name: str
    vendor: Optional[str]
    gpus: int
    model: Optional[str] = None
    memory_mib: Optional[int] = None
    free: Optional[int] = None
    eligible: bool = True
    reasons: tuple[str, ...] = ()
    devices: tuple[GpuDevice, ...] = ()

    @property
    def resource_key(self) -> Optional[str]:
        return GPU_RESOURCE_KEYS.get(self.vendor) if self.vendor else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["resourceKey"] = self.resource_key
        data["memoryMiB"] = data.pop("memory_mib")
        data["reasons"] = list(self.reasons)
        data["devices"] = [
            {"index": d.index, "model": d.model, "memoryMiB": d.memory_mib} for d in self.devices
        ]
        return data


@dataclass(frozen=True)
class VendorCapacity:
    """What sizing needs to know about one vendor's eligible GPUs."""

    vendor: str
    total: int
    min_per_node: int
    max_per_node: int
    nodes: int


@dataclass(frozen=True)
class Inventory:
    """Every node's GPUs, and where the numbers came from."""

    nodes: tuple[NodeGpus, ...]
    source: str  # "kubernetes", "file", "local" or "ray"
    notes: tuple[str, ...] = field(default=())

    def capacity(self, vendor: str) -> VendorCapacity:
        counts = [n.gpus for n in self.nodes if n.vendor == vendor and n.eligible and n.gpus > 0]
        return VendorCapacity(
            vendor=vendor,
            total=sum(counts),
            min_per_node=min(counts, default=0),
            max_per_node=max(counts, default=0),
            nodes=len(counts),
        )

    def vendors(self, eligible_only: bool = True) -> dict[str, int]:
        """GPU totals by vendor, largest first."""
        totals: dict[str, int] = {}
        for node in self.nodes:
            if node.vendor and node.gpus > 0 and (node.eligible or not eligible_only):
                totals[node.vendor] = totals.get(node.vendor, 0) + node.gpus
        return dict(sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))

    def ineligible(self, vendor: str) -> list[NodeGpus]:
        return [n for n in self.nodes if n.vendor == vendor and n.gpus > 0 and not n.eligible]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "nodes": [n.to_dict() for n in self.nodes],
            "vendors": {v: asdict(self.capacity(v)) for v in self.vendors(eligible_only=False)},
            "notes": list(self.notes),
        }


# --- Kubernetes objects -> inventory ------------------------------------------------------


def _is_ready(node: dict[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _tolerated(taint: dict[str, Any], tolerations: Sequence[Any], resource_key: Optional[str]) -> bool:
    # raybridge renders a toleration for the vendor's own GPU taint on GPU pods
    # (the NoSchedule taint that GPU node pools carry), so that one counts as tolerated.
    if resource_key and taint.get("key") == resource_key and taint.get("effect") == "NoSchedule":
        return True
    return any(t.tolerates(taint) for t in tolerations)


def _label(labels: dict[str, str], keys: Iterable[str]) -> Optional[str]:
    for key in keys:
        value = labels.get(key)
        if value:
            return value
    return None


def _memory_mib(raw: Optional[str]) -> Optional[int]:
    """GFD writes MiB as a bare number; the ROCm labeller writes e.g. "192G" (GiB)."""
    if not raw:
        return None
    text = raw.strip()
    if text.isdigit():
        return int(text)
    if text[-1:] in ("G", "M", "T") and text[:-1].replace(".", "", 1).isdigit():
        text = text + "i"  # GPU vendors mean binary units
    try:
        return int(parse_quantity(text) / (1 << 20))
    except ValueError:
        return None


def _gpu_count(resources: dict[str, Any], key: str) -> int:
    raw = resources.get(key)
    if raw in (None, ""):
        return 0
    try:
        return int(parse_quantity(raw))
    except ValueError:
        return 0


def pod_gpu_requests(pod: dict[str, Any]) -> dict[str, int]:
    """Whole GPUs a pod holds, by resource key: max(sum of containers, any init container)."""
    spec = pod.get("spec") or {}
    totals: dict[str, int] = {}
    for key in GPU_RESOURCE_KEYS.values():
        def request(container: dict[str, Any]) -> int:
            res = container.get("resources") or {}
            value = _gpu_count(res.get("requests") or {}, key)
            return value or _gpu_count(res.get("limits") or {}, key)

        app = sum(request(c) for c in spec.get("containers") or [])
        init = max((request(c) for c in spec.get("initContainers") or []), default=0)
        if max(app, init):
            totals[key] = max(app, init)
    return totals


def gpus_in_use(pods: Iterable[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """(node name, resource key) -> GPUs requested by pods bound there and not finished."""
    used: dict[tuple[str, str], int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in _FINISHED_PHASES:
            continue
        for key, count in pod_gpu_requests(pod).items():
            used[(node, key)] = used.get((node, key), 0) + count
    return used


def inventory_from_nodes(
    nodes: Iterable[dict[str, Any]],
    pods: Optional[Iterable[dict[str, Any]]] = None,
    tolerations: Sequence[Any] = (),
    source: str = "kubernetes",
) -> Inventory:
    """Build the inventory from Node objects, and free counts from Pod objects when given."""
    used = gpus_in_use(pods) if pods is not None else None
    result: list[NodeGpus] = []
    for node in nodes:
        meta = node.get("metadata") or {}
        status = node.get("status") or {}
        spec = node.get("spec") or {}
        name = meta.get("name") or "<unnamed>"
        labels = meta.get("labels") or {}
        allocatable = status.get("allocatable") or status.get("capacity") or {}
        found_vendor = False
        for vendor, key in GPU_RESOURCE_KEYS.items():
            count = _gpu_count(allocatable, key)
            if count <= 0:
                continue
            found_vendor = True
            reasons: list[str] = []
            if not _is_ready(node):
                reasons.append("not Ready")
            if spec.get("unschedulable"):
                reasons.append("cordoned")
            for taint in spec.get("taints") or []:
                if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, tolerations, key):
                    shown = taint.get("key", "") + (f"={taint['value']}" if taint.get("value") else "")
                    reasons.append(f"taint {shown}:{taint.get('effect')} not tolerated")
            free = None
            if used is not None:
                free = max(count - used.get((name, key), 0), 0)
            result.append(
                NodeGpus(
                    name=name,
                    vendor=vendor,
                    gpus=count,
                    model=_label(labels, GPU_PRODUCT_LABELS[vendor]),
                    memory_mib=_memory_mib(_label(labels, GPU_MEMORY_LABELS[vendor])),
                    free=free,
                    eligible=not reasons,
                    reasons=tuple(reasons),
                )
            )
        if not found_vendor:
            result.append(NodeGpus(name=name, vendor=None, gpus=0, eligible=_is_ready(node)))
    return Inventory(nodes=tuple(result), source=source)


def items_of(document: Any, kind: str) -> list[dict[str, Any]]:
    """Objects of `kind` from a `kubectl get -o json` document: a List, a single object, or a list."""
    if isinstance(document, list):
        items = document
    elif isinstance(document, dict) and isinstance(document.get("items"), list):
        items = document["items"]
    elif isinstance(document, dict) and document.get("kind") == kind:
        items = [document]
    else:
        raise ValueError(f"expected a {kind} list (kubectl get {kind.lower()}s -o json)")
    objects = [i for i in items if isinstance(i, dict)]
    wrong = {i.get("kind") for i in objects if i.get("kind") not in (None, kind)}
    if wrong:
        raise ValueError(f"expected {kind} objects, found {', '.join(sorted(map(str, wrong)))}")
    return objects

