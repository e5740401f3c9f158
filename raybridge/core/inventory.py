"""GPU inventory: what GPUs each node has, and which nodes a workload may use.

Pure functions from Kubernetes Node and Pod JSON (as `kubectl get -o json`
prints them, or as the API returns them) to plain dataclasses. The local and
Ray probes in `raybridge.gpu` fill the same dataclasses, so sizing does not
care where the numbers came from.

This module does no I/O: reading files or the API is the caller's job.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from raybridge.core.consts import GPU_MEMORY_LABELS, GPU_PRODUCT_LABELS, GPU_RESOURCE_KEYS
from raybridge.core.dra import (
    DRIVER_OF_VENDOR,
    DraGpu,
    dra_gpus_by_node,
    gpu_device_class,
    read_device_class,
)
from raybridge.core.pod_identity import SeenPods
from raybridge.core.quantity import parse_quantity
from raybridge.core.kubeobjects import aggregate_containers, as_dict, pod_requests
from raybridge.core.views import Node, Pod, read_node, read_pod


#: Where a node's GPUs come from (NodeGpus.sources).
SOURCE_DEVICE_PLUGIN = "device-plugin"
SOURCE_DRA = "dra"


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
    #: The Node's labels (Kubernetes inventories only), for matching selectors and flavors.
    labels: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: Where a Kubernetes node's GPUs come from: "device-plugin" (its allocatable `nvidia.com/gpu`), "dra" (devices
    #: of a GPU driver's ResourceSlices), or both (the same GPUs, counted once); empty for local and Ray inventories.
    sources: tuple[str, ...] = ()
    #: The DeviceClass a ResourceClaim names to get these GPUs as DRA devices (None: not claimable).
    device_class: Optional[str] = None

    @property
    def dra_only(self) -> bool:
        """True when the GPUs can be had through ResourceClaims alone (no device plugin counts them)."""
        return self.sources == (SOURCE_DRA,)

    @property
    def device_plugin(self) -> bool:
        return SOURCE_DEVICE_PLUGIN in self.sources

    @property
    def resource_key(self) -> Optional[str]:
        return GPU_RESOURCE_KEYS.get(self.vendor) if self.vendor else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("labels")
        data["resourceKey"] = self.resource_key
        data["memoryMiB"] = data.pop("memory_mib")
        data["reasons"] = list(self.reasons)
        data["devices"] = [
            {"index": d.index, "model": d.model, "memoryMiB": d.memory_mib} for d in self.devices
        ]
        data["sources"] = list(self.sources)
        data["deviceClass"] = data.pop("device_class")
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
    #: What was wrong in the input and what was done about it (a node skipped, a count taken as 0).
    warnings: tuple[str, ...] = field(default=())

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
            "vendors": {v: _capacity_dict(self.capacity(v)) for v in self.vendors(eligible_only=False)},
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def _capacity_dict(capacity: VendorCapacity) -> dict[str, Any]:
    return {
        "vendor": capacity.vendor,
        "total": capacity.total,
        "minPerNode": capacity.min_per_node,
        "maxPerNode": capacity.max_per_node,
        "nodes": capacity.nodes,
    }


# --- Kubernetes objects -> inventory ------------------------------------------------------
#
# Node and Pod JSON comes from files users hand in and from API servers; either can hold a
# field of the wrong type. Every reader below takes what it can, never raises on a shape,
# and says in a warning what it could not read and what it did instead.


def node_is_ready(node: Node) -> bool:
    """The node's Ready condition is True."""
    return node.not_ready_reason() is None


def _tolerated(taint: dict[str, Any], tolerations: Sequence[Any], resource_key: Optional[str]) -> bool:
    # raybridge renders a toleration for the vendor's own GPU taint on GPU pods
    # (the NoSchedule taint that GPU node pools carry), so that one counts as tolerated.
    if resource_key and taint.get("key") == resource_key and taint.get("effect") == "NoSchedule":
        return True
    return any(t.tolerates(taint) for t in tolerations)


def _label(labels: Mapping[str, Any], keys: Iterable[str]) -> Optional[str]:
    for key in keys:
        value = labels.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _memory_mib(raw: Optional[str]) -> Optional[int]:
    """GFD writes MiB as a bare number; the ROCm labeller writes e.g. "192G" (GiB)."""
    if not raw:
        return None
    text = raw.strip()
    if text.isascii() and text.isdigit() and len(text) < 19:
        return int(text)
    if text[-1:] in ("G", "M", "T") and text[:-1].replace(".", "", 1).isascii() and text[:-1].replace(".", "", 1).isdigit():
        text = text + "i"  # GPU vendors mean binary units
    try:
        mib = int(parse_quantity(text) / (1 << 20))
    except (ValueError, TypeError):
        return None
    return mib if mib > 0 else None


def whole_gpu_count(raw: Any) -> Optional[int]:
    """A GPU quantity as a whole non-negative number; None when it is not one ("500m", "-4", null, "x")."""
    if isinstance(raw, bool) or raw is None or isinstance(raw, (dict, list)):
        return None
    if isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) < 19:  # the common "8"
        return int(raw)
    try:
        value = parse_quantity(raw)
    except (ValueError, TypeError):
        return None
    if not value.is_finite() or value < 0 or value != value.to_integral_value():
        return None
    return int(value)


def _gpu_count(resources: dict[str, Any], key: str, where: str, warnings: list[str]) -> int:
    raw = resources.get(key)
    if key not in resources:
        return 0
    count = whole_gpu_count(raw)
    if count is None:
        warnings.append(f"{where}: {key} {raw!r} is not a whole number of GPUs: counted as 0")
        return 0
    return count


def pod_gpu_requests(pod: Pod, warnings: Optional[list[str]] = None) -> dict[str, int]:
    """Whole GPUs a pod holds, by resource key, totalled by kube-scheduler's rule (`kubeobjects.aggregate_containers`:
    the containers' sum plus the sidecars', or the largest init container with the sidecars before it); each
    container's count read as a whole number, or 0 with a warning."""
    sink: list[str] = [] if warnings is None else warnings
    spec = pod.spec
    name = _pod_name(pod)
    for field_name in ("containers", "initContainers"):
        if spec.get(field_name) is not None and not isinstance(spec.get(field_name), list):
            sink.append(f"{name}: spec.{field_name} is not a list: its GPUs counted as 0")

    def gpus(container: Any) -> dict[str, int]:
        res = as_dict(as_dict(container).get("resources"))
        where = f"{name} container {as_dict(container).get('name') or '?'}"
        requests, limits = as_dict(res.get("requests")), as_dict(res.get("limits"))
        found = {}
        for key in GPU_RESOURCE_KEYS.values():
            count = _gpu_count(requests, key, where, sink) if key in requests else _gpu_count(limits, key, where, sink)
            if count:
                found[key] = count
        return found

    totals = aggregate_containers(spec, gpus)
    return {key: count for key, count in totals.items() if count > 0}


def _pod_name(pod: Pod) -> str:
    return f"pod {pod.meta.namespace or '?'}/{pod.meta.name or '?'}"


def gpus_in_use(pods: Iterable[Any], warnings: Optional[list[str]] = None) -> dict[tuple[str, str], int]:
    """(node name, resource key) -> GPUs requested by pods bound there and not finished.

    A pod listed twice (same namespace and name, or same uid: core/pod_identity.py) counts once, the first; a
    `nodeName` that is not a string leaves the pod uncounted. Both are said
    in `warnings`, naming the pod.
    """
    sink: list[str] = [] if warnings is None else warnings
    used: dict[tuple[str, str], int] = {}
    seen = SeenPods()
    for index, given in enumerate(pods):
        obj = given.obj if isinstance(given, Pod) else given
        if not isinstance(obj, dict):
            sink.append(f"item {index} of the pod list is not an object: skipped")
            continue
        repeat = seen.repeat(obj)
        if repeat is not None:
            sink.append(repeat)
            continue
        pod = given if isinstance(given, Pod) else read_pod(obj)
        if pod.bound and not pod.node_name:
            sink.append(f"{_pod_name(pod)}: spec.nodeName {pod.spec.get('nodeName')!r} is not a node name: its GPUs are not counted")
            continue
        if not pod.node_name or pod.finished:
            continue
        for key, count in pod_gpu_requests(pod, sink).items():
            used[(pod.node_name, key)] = used.get((pod.node_name, key), 0) + count
    return used


def _taint_reasons(node: Node, tolerations: Sequence[Any], key: Optional[str]) -> list[str]:
    reasons = []
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, tolerations, key):
            shown = str(taint.get("key", "")) + (f"={taint['value']}" if taint.get("value") else "")
            reasons.append(f"taint {shown}:{taint.get('effect')} not tolerated")
    return reasons


def unschedulable_reasons(node: Node, tolerations: Sequence[Any] = (), resource_key: Optional[str] = None) -> list[str]:
    """Why pods asking for `resource_key` (None: no GPU) cannot land on the node; empty when they can."""
    reasons: list[str] = []
    not_ready = node.not_ready_reason()
    if not_ready:
        reasons.append(not_ready)
    if node.cordoned:
        reasons.append("cordoned")
    return reasons + _taint_reasons(node, tolerations, resource_key)


def product_label(labels: Mapping[str, Any], vendor: str) -> Optional[tuple[str, str]]:
    """(label key, GPU model) from the first of the vendor's product labels the node has."""
    for key in GPU_PRODUCT_LABELS[vendor]:
        value = labels.get(key)
        if isinstance(value, str) and value:
            return key, value
    return None


def named_nodes(nodes: Iterable[Any], warnings: list[str]) -> Iterator[Node]:
    """Each node (read into its view where it is not one yet) once per name; a node without a name, or listed
    again, is said in `warnings`."""
    seen: set[str] = set()
    for index, obj in enumerate(nodes):
        node = obj if isinstance(obj, Node) else read_node(obj)
        name = node.meta.name
        if not name:
            warnings.append(f"item {index} of the node list has no metadata.name: skipped")
            continue
        if name in seen:
            warnings.append(f"node {name} is listed more than once: counted once")
            continue
        seen.add(name)
        yield node


def node_gpus_by_vendor(node: Node, warnings: list[str]) -> dict[str, tuple[int, Optional[int]]]:
    """vendor -> (allocatable GPUs, MiB per GPU from the vendor's labels or None), for the vendors it has any of."""
    found: dict[str, tuple[int, Optional[int]]] = {}
    for vendor, key in GPU_RESOURCE_KEYS.items():
        count = _gpu_count(node.allocatable, key, f"node {node.name}", warnings)
        if count > 0:
            found[vendor] = (count, _memory_mib(_label(node.meta.labels, GPU_MEMORY_LABELS[vendor])))
    return found


@dataclass(frozen=True)
class DeviceSources:
    """What a cluster's DRA objects say of its nodes' GPUs, read once: each node's GPU devices, the DeviceClass
    that claims each vendor's whole GPUs, and the devices allocated to claims (None: not known)."""

    by_node: Mapping[str, tuple[DraGpu, ...]] = field(default_factory=dict)
    device_classes: Mapping[str, Optional[str]] = field(default_factory=dict)
    allocated: Optional[frozenset[tuple[str, str, str]]] = None
    #: What could not be read as a node's GPU (a device of another type, a slice for several nodes).
    warnings: tuple[str, ...] = ()

    @classmethod
    def read(cls, slices: Iterable[Any] = (), classes: Iterable[Any] = (), claims: Optional[Iterable[Any]] = None) -> "DeviceSources":
        warnings: list[str] = []
        read_classes = [read_device_class(c) for c in classes]
        return cls(
            by_node=dra_gpus_by_node(slices, warnings),
            device_classes={vendor: gpu_device_class(read_classes, driver) for vendor, driver in DRIVER_OF_VENDOR.items()},
            allocated=None if claims is None else allocated_devices(claims),
            warnings=tuple(warnings),
        )


def allocated_devices(claims: Iterable[Any]) -> frozenset[tuple[str, str, str]]:
    """(driver, pool, device) of every device allocated to a ResourceClaim (status.allocation.devices.results)."""
    found: set[tuple[str, str, str]] = set()
    for claim in claims:
        status = as_dict(as_dict(claim).get("status"))
        for result in as_dict(as_dict(status.get("allocation")).get("devices")).get("results") or []:
            entry = as_dict(result)
            parts = (entry.get("driver"), entry.get("pool"), entry.get("device"))
            if all(isinstance(p, str) and p for p in parts):
                found.add(parts)  # type: ignore[arg-type]
    return frozenset(found)


@dataclass(frozen=True)
class _VendorGpus:
    """One vendor's GPUs of one node, the device plugin's and DRA's merged."""

    count: int
    model: Optional[str]
    memory_mib: Optional[int]
    sources: tuple[str, ...]
    device_class: Optional[str]
    free_of_claims: Optional[int]
    #: DRA devices of the node allocated to claims (None: claims not known).
    claimed: Optional[int]


def _common(values: Iterable[Optional[Any]]) -> Optional[Any]:
    """The value most devices share (the first of equals), None when none has one."""
    counts: dict[Any, int] = {}
    for value in values:
        if value is not None:
            counts[value] = counts.get(value, 0) + 1
    return max(counts, key=lambda v: counts[v]) if counts else None


def node_vendor_gpus(
    node: Node, devices: DeviceSources, warnings: list[str]
) -> dict[str, _VendorGpus]:
    """vendor -> the node's GPUs of that vendor: the device plugin's allocatable and the node's DRA devices, the
    same GPUs counted once (the larger of the two counts), model and memory from the devices where they say."""
    plugin = node_gpus_by_vendor(node, warnings)
    dra: dict[str, list[DraGpu]] = {}
    partitions: dict[str, int] = {}
    for gpu in devices.by_node.get(node.name, ()):
        if gpu.whole:
            dra.setdefault(gpu.vendor, []).append(gpu)
        else:
            partitions[gpu.vendor] = partitions.get(gpu.vendor, 0) + 1
    for vendor, count in partitions.items():
        warnings.append(f"node {node.name}: {count} {vendor} GPU partition{'s' if count != 1 else ''} (MIG, AMD partitions) published through DRA: not counted as whole GPUs")
    found: dict[str, _VendorGpus] = {}
    for vendor in [v for v in GPU_RESOURCE_KEYS if v in plugin or v in dra]:
        plugin_count, label_mib = plugin.get(vendor, (0, None))
        whole = dra.get(vendor, [])
        sources = tuple(s for s, present in ((SOURCE_DEVICE_PLUGIN, plugin_count > 0), (SOURCE_DRA, bool(whole))) if present)
        memories = [g.memory_mib for g in whole if g.memory_mib]
        free_of_claims = claimed = None
        if whole and devices.allocated is not None:
            free_of_claims = sum(1 for g in whole if (g.driver, g.pool, g.device) not in devices.allocated)
            claimed = len(whole) - free_of_claims
        found[vendor] = _VendorGpus(
            count=max(plugin_count, len(whole)),
            model=_common(g.model for g in whole),
            memory_mib=min(memories) if memories else label_mib,
            sources=sources,
            device_class=devices.device_classes.get(vendor) if whole else None,
            free_of_claims=free_of_claims,
            claimed=claimed,
        )
    return found


def inventory_from_nodes(
    nodes: Iterable[Any],
    pods: Optional[Iterable[Any]] = None,
    tolerations: Sequence[Any] = (),
    source: str = "kubernetes",
    devices: Optional[DeviceSources] = None,
) -> Inventory:
    """Build the inventory from Node objects (and the cluster's DRA devices, `devices`), and free counts from Pod
    objects (and ResourceClaims) when given.

    Malformed entries never raise: a node without a name is skipped, a node listed twice is
    counted once (the first), a GPU quantity that is not a whole non-negative number counts
    as 0; each with a warning naming the node.
    """
    devices = devices or DeviceSources()
    warnings: list[str] = list(devices.warnings)
    used = gpus_in_use(pods, warnings) if pods is not None else None
    result: list[NodeGpus] = []
    for node in named_nodes(nodes, warnings):
        name, labels = node.name, node.meta.labels
        not_ready = node.not_ready_reason()
        gpus = node_vendor_gpus(node, devices, warnings)
        for vendor, found in gpus.items():
            key = GPU_RESOURCE_KEYS[vendor]
            reasons = unschedulable_reasons(node, tolerations, key)
            if found.sources == (SOURCE_DRA,) and found.device_class is None:
                driver = DRIVER_OF_VENDOR[vendor].name
                reasons.append(f"no DeviceClass selects its {driver} GPUs (the driver's own is {DRIVER_OF_VENDOR[vendor].device_class})")
            free = None
            if found.sources == (SOURCE_DRA,):
                free = found.free_of_claims
            elif used is not None:
                # The same GPUs, two ways in: what pods hold through the plugin and what claims hold are both taken.
                claimed = found.claimed or 0
                free = max(found.count - used.get((name, key), 0) - claimed, 0)
            result.append(
                NodeGpus(
                    name=name,
                    vendor=vendor,
                    gpus=found.count,
                    model=found.model or (product_label(labels, vendor) or (None, None))[1],
                    memory_mib=found.memory_mib,
                    free=free,
                    eligible=not reasons,
                    reasons=tuple(reasons),
                    labels=node.text_labels,
                    sources=found.sources,
                    device_class=found.device_class,
                )
            )
        if not gpus:
            reasons = (not_ready,) if not_ready else ()
            result.append(NodeGpus(name=name, vendor=None, gpus=0, eligible=not reasons, reasons=reasons, labels=node.text_labels))
    return Inventory(nodes=tuple(result), source=source, warnings=tuple(dict.fromkeys(warnings)))


def items_of(document: Any, kind: str) -> list[dict[str, Any]]:
    """Objects of `kind` from a `kubectl get -o json` document: a List, a single object, or a list.

    ValueError when the document is not such a list at all (another kind, scalars, objects
    without metadata): a user who passed the wrong file hears so.
    """
    return items_of_kinds(document, kind)[kind]


def items_of_kinds(document: Any, kind: str, also: Sequence[str] = ()) -> dict[str, list[dict[str, Any]]]:
    """kind -> its objects, for `kind` and the kinds `also` a file of `kind` may hold beside it (a node list with
    the cluster's ResourceSlices and DeviceClasses, as `kubectl get nodes,resourceslices,deviceclasses -o json`
    prints them); an object without a kind is taken for a `kind`. ValueError as `items_of` says."""
    taken = (kind, *also)
    if isinstance(document, list):
        items = document
    elif isinstance(document, dict) and isinstance(document.get("items"), list):
        items = document["items"]
    elif isinstance(document, dict) and document.get("kind") in taken:
        items = [document]
    else:
        raise ValueError(f"expected a {kind} list (kubectl get {kind.lower()}s -o json)")
    wrong = {_kind_shown(i.get("kind")) for i in items if isinstance(i, dict) and i.get("kind") not in (None, *taken)}
    if wrong:
        expected = kind if not also else f"{', '.join(taken[:-1])} or {taken[-1]}"
        raise ValueError(f"expected {expected} objects, found {', '.join(sorted(wrong))}")
    objects = [i for i in items if isinstance(i, dict) and isinstance(i.get("metadata"), dict)]
    if len(objects) < len(items):
        bad = len(items) - len(objects)
        raise ValueError(f"{bad} of {len(items)} items are not {kind} objects (no metadata)")
    found: dict[str, list[dict[str, Any]]] = {k: [] for k in taken}
    for obj in objects:
        found[obj.get("kind") or kind].append(obj)
    return found


def _kind_shown(value: Any) -> str:
    """A `kind` as the refusal names it: its text, or what it is when it is no text (a mapping, a list)."""
    return value if isinstance(value, str) else f"a kind that is a {type(value).__name__}, not a name"


# --- CPU, memory and the other resources a node offers and a pod requests ----------------------
#: Resources a node-scale-adjuster placeholder does not carry for its pods: the GPUs (it asks for whole
#: ones of its own) and the pod count (it is one pod).
NOT_CARRIED = frozenset((*GPU_RESOURCE_KEYS.values(), "pods"))
_milli_cache: dict[str, Optional[int]] = {}


def _milli(raw: Any) -> Optional[int]:
    """A quantity in thousandths of its unit, rounded up (as the API server rounds up to milli-units); None if malformed."""
    key = raw if isinstance(raw, str) else repr(raw)
    if key in _milli_cache:
        return _milli_cache[key]
    try:
        value = parse_quantity(raw)
        found: Optional[int] = int((value * 1000).to_integral_value(rounding="ROUND_CEILING")) if value.is_finite() and value >= 0 else None
    except (ValueError, ArithmeticError):
        found = None
    if len(_milli_cache) < 10_000:
        _milli_cache[key] = found
    return found


def _add(total: dict[str, int], resources: Any) -> dict[str, int]:
    for name, raw in (resources.items() if isinstance(resources, dict) else ()):
        if not isinstance(name, str) or name in NOT_CARRIED:
            continue
        amount = _milli(raw)
        if amount:
            total[name] = total.get(name, 0) + amount
    return total


def pod_resource_requests(spec: Any) -> tuple[tuple[str, int], ...]:
    """What a pod requests of a node besides what is not carried (NOT_CARRIED), in thousandths, sorted.

    The amounts are `core/kubeobjects.py` `pod_requests` (kube-scheduler's PodRequests), rounded up to
    thousandths as the scheduler's milli-units are.
    """
    out = []
    for name, amount in pod_requests(spec).items():
        if name in NOT_CARRIED:
            continue
        milli = amount * 1000
        whole = int(milli.to_integral_value(rounding="ROUND_CEILING")) if milli.is_finite() else 0
        if whole > 0:
            out.append((name, whole))
    return tuple(sorted(out))


def resource_requests_of(pod: Pod) -> tuple[tuple[str, int], ...]:
    """`pod_resource_requests` of a pod's view, as a `core.views.pod_fact` reader."""
    return pod_resource_requests(pod.spec)


def node_allocatable_resources(node: Node) -> tuple[tuple[str, int], ...]:
    """A node's allocatable besides GPUs and the pod count, in thousandths of each unit."""
    return tuple(sorted(_add({}, node.allocatable).items()))


def format_milli(name: str, milli: int) -> str:
    """An amount in thousandths as a Kubernetes quantity: CPU in cores or millicores, byte amounts in binary units."""
    from raybridge.core.quantity import format_cpu, format_memory

    if name == "cpu":
        return format_cpu(Decimal(milli) / 1000)
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        return format_memory(-(-milli // 1000))
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
