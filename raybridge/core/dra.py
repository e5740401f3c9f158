"""Dynamic Resource Allocation (`resource.k8s.io/v1`): the GPUs a node publishes as devices, and what pods claim.

Why it exists: on a cluster whose GPU drivers publish DRA ResourceSlices instead of (or beside) a device
plugin's `nvidia.com/gpu` count, a node's GPUs are devices with attributes (product, type) and capacities
(memory), and pods ask for them through ResourceClaims. Every reader of a node's GPUs (the inventory, the
adjuster, explain, the fair share) reads them here, once, into small views:

- `read_resource_slice`, `read_device_class`, `read_claim_spec`: the objects, every field checked for type
  (a field of the wrong type reads as absent; a view never raises), as `core/views.py` reads pods and nodes;
- `dra_gpus_by_node`: each node's GPU devices of the drivers raybridge knows (`GPU_DRIVERS`), from the
  newest generation of each pool, whole GPUs apart from partitions (MIG, AMD partitions);
- `gpu_device_class`: the DeviceClass a claim names to get a driver's whole GPUs;
- `claim_gpu_requests`: how many of a vendor's GPUs a claim spec asks for.

The drivers' facts are read from their sources (NVIDIA's `k8s-dra-driver-gpu` v0.4.0, now
`sigs.k8s.io/dra-driver-nvidia-gpu`: `cmd/gpu-kubelet-plugin/deviceinfo.go`, the chart's
`templates/deviceclass-gpu.yaml`; ROCm's `k8s-gpu-dra-driver` v1.0: `pkg/consts/consts.go`,
`helm-charts-k8s/templates/deviceclass.yaml`), and the API's from Kubernetes v1.34 (`k8s.io/api/resource/v1`).

What it deliberately does not do: evaluate CEL. A DeviceClass is recognised as a driver's GPU class by the
selector the driver's chart installs (`device.driver == '<driver>'`, with NVIDIA's `type == 'gpu'`), or by
its name; other classes are left alone and said so by the callers. It does no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable, Mapping, Optional, Union

from raybridge.core.quantity import parse_quantity

#: The API group and version of DRA, GA in Kubernetes 1.34 (k8s.io/api/resource/v1).
RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION = "v1"
RESOURCE_API_VERSION = f"{RESOURCE_GROUP}/{RESOURCE_VERSION}"
#: The kinds `--nodes FILE` takes beside Nodes.
SLICE_KIND = "ResourceSlice"
DEVICE_CLASS_KIND = "DeviceClass"
CLAIM_KIND = "ResourceClaim"
CLAIM_TEMPLATE_KIND = "ResourceClaimTemplate"
#: A ResourceClaim's devices are reserved for at most this many consumers (resource/v1 ResourceClaimReservedForMaxSize).
RESERVED_FOR_MAX = 256


@dataclass(frozen=True)
class GpuDriver:
    """What a GPU DRA driver publishes: its name, vendor, the `type` values of whole GPUs and of partitions, the
    DeviceClass its chart installs for whole GPUs, and the attribute and capacity that hold model and memory."""

    name: str
    vendor: str
    whole_gpu_types: frozenset[str]
    partition_types: frozenset[str]
    device_class: str
    #: The CEL selector of that DeviceClass, as the chart writes it.
    class_selector: str
    model_attribute: str = "productName"
    memory_capacity: str = "memory"


#: The GPU DRA drivers raybridge reads, by driver name.
GPU_DRIVERS: dict[str, GpuDriver] = {
    # NVIDIA v0.4.0 cmd/gpu-kubelet-plugin/main.go DriverName; types.go GpuDeviceType "gpu", MigDeviceType "mig";
    # deviceclass-gpu.yaml: name gpu.nvidia.com and this selector.
    "gpu.nvidia.com": GpuDriver(
        name="gpu.nvidia.com",
        vendor="nvidia",
        whole_gpu_types=frozenset({"gpu"}),
        partition_types=frozenset({"mig"}),
        device_class="gpu.nvidia.com",
        class_selector="device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    ),
    # ROCm k8s-gpu-dra-driver pkg/consts/consts.go: DriverName "gpu.amd.com", AmdGpuDeviceType "amdgpu",
    # AmdPartitionDeviceType "amdgpu-partition"; helm-charts-k8s/templates/deviceclass.yaml: one class, every device
    # of the driver (whole GPUs and partitions alike).
    "gpu.amd.com": GpuDriver(
        name="gpu.amd.com",
        vendor="amd",
        whole_gpu_types=frozenset({"amdgpu"}),
        partition_types=frozenset({"amdgpu-partition"}),
        device_class="gpu.amd.com",
        class_selector="device.driver == 'gpu.amd.com'",
    ),
}
#: vendor -> its driver.
DRIVER_OF_VENDOR: dict[str, GpuDriver] = {d.vendor: d for d in GPU_DRIVERS.values()}

Scalar = Union[str, int, bool]


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 19:
        return int(value)
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _attribute_name(key: str, driver: str) -> str:
    """An attribute or capacity key in the driver's own domain ("productName" for "gpu.nvidia.com/productName")."""
    prefix = driver + "/"
    return key[len(prefix) :] if key.startswith(prefix) else key


@dataclass(frozen=True)
class SliceDevice:
    """One device of a ResourceSlice: its name, attributes (in the driver's domain, unprefixed) and capacities."""

    name: str
    attributes: Mapping[str, Scalar]
    capacity: Mapping[str, Decimal]


@dataclass(frozen=True)
class ResourceSlice:
    """A ResourceSlice read once (resource/v1 ResourceSliceSpec)."""

    name: str
    driver: Optional[str]
    pool: Optional[str]
    generation: int
    slice_count: int
    node_name: Optional[str]
    #: Devices not local to one node (`allNodes`, `nodeSelector`): not a node's GPUs.
    shared_across_nodes: bool
    devices: tuple[SliceDevice, ...]


def _device(raw: Any, driver: str) -> Optional[SliceDevice]:
    device = _mapping(raw)
    name = _text(device.get("name"))
    if name is None:
        return None
    attributes: dict[str, Scalar] = {}
    for key, value in _mapping(device.get("attributes")).items():
        entry = _mapping(value)
        for field in ("string", "version", "int", "bool"):
            found = entry.get(field)
            if (field == "bool" and isinstance(found, bool)) or (field == "int" and _int(found) is not None) or (
                field in ("string", "version") and isinstance(found, str)
            ):
                attributes[_attribute_name(str(key), driver)] = _int(found) if field == "int" else found  # type: ignore[assignment]
                break
    capacity: dict[str, Decimal] = {}
    for key, value in _mapping(device.get("capacity")).items():
        try:
            amount = parse_quantity(_mapping(value).get("value"))
        except (ValueError, TypeError, ArithmeticError):
            continue
        if amount.is_finite() and amount >= 0:
            capacity[_attribute_name(str(key), driver)] = amount
    return SliceDevice(name=name, attributes=attributes, capacity=capacity)


def read_resource_slice(obj: Any) -> ResourceSlice:
    """The slice's driver, pool, node and devices; what is of the wrong type reads as absent."""
    meta, spec = _mapping(_mapping(obj).get("metadata")), _mapping(_mapping(obj).get("spec"))
    driver = _text(spec.get("driver"))
    pool = _mapping(spec.get("pool"))
    devices = tuple(d for d in (_device(raw, driver or "") for raw in _items(spec.get("devices"))) if d is not None)
    return ResourceSlice(
        name=_text(meta.get("name")) or "?",
        driver=driver,
        pool=_text(pool.get("name")),
        generation=_int(pool.get("generation")) or 0,
        slice_count=_int(pool.get("resourceSliceCount")) or 1,
        node_name=_text(spec.get("nodeName")),
        shared_across_nodes=spec.get("allNodes") is True or isinstance(spec.get("nodeSelector"), dict),
        devices=devices,
    )


@dataclass(frozen=True)
class DeviceClass:
    """A DeviceClass read once: its name, CEL selectors and the extended resource it may stand for."""

    name: str
    selectors: tuple[str, ...]
    extended_resource_name: Optional[str]


def read_device_class(obj: Any) -> DeviceClass:
    meta, spec = _mapping(_mapping(obj).get("metadata")), _mapping(_mapping(obj).get("spec"))
    selectors = tuple(
        expression
        for selector in _items(spec.get("selectors"))
        if (expression := _text(_mapping(_mapping(selector).get("cel")).get("expression"))) is not None
    )
    return DeviceClass(name=_text(meta.get("name")) or "?", selectors=selectors, extended_resource_name=_text(spec.get("extendedResourceName")))


_SPACES = re.compile(r"\s+")


def _normal(expression: str) -> str:
    return _SPACES.sub(" ", expression.replace('"', "'")).strip()


def selects_whole_gpus(device_class: DeviceClass, driver: GpuDriver) -> bool:
    """True when `device_class` selects the driver's devices the way its chart's GPU class does: the same selector
    (quotes and spacing aside), or the chart's class name with no selector of another driver."""
    wanted = _normal(driver.class_selector)
    if any(_normal(s) == wanted for s in device_class.selectors):
        return True
    return device_class.name == driver.device_class and all(driver.name in s for s in device_class.selectors)


def gpu_device_class(classes: Iterable[DeviceClass], driver: GpuDriver) -> Optional[str]:
    """The name of the DeviceClass a claim names for the driver's GPUs: the chart's own class where the cluster has
    it, else another class with the chart's selector; None when no class of the cluster selects them so."""
    fitting = [c.name for c in classes if selects_whole_gpus(c, driver)]
    if driver.device_class in fitting:
        return driver.device_class
    return sorted(fitting)[0] if fitting else None


@dataclass(frozen=True)
class DraGpu:
    """One GPU device a node publishes (a whole GPU or a partition of one)."""

    node: str
    driver: str
    pool: str
    device: str
    vendor: str
    whole: bool
    model: Optional[str]
    memory_mib: Optional[int]


def _memory_mib(amount: Optional[Decimal]) -> Optional[int]:
    if amount is None:
        return None
    mib = int(amount / (1 << 20))
    return mib if mib > 0 else None


def dra_gpus_by_node(slices: Iterable[Any], warnings: Optional[list[str]] = None) -> dict[str, tuple[DraGpu, ...]]:
    """node name -> its GPU devices, from the ResourceSlices of the drivers raybridge knows.

    Of each pool only the newest generation counts (older slices are being replaced: the scheduler ignores them
    too, resource/v1 ResourcePool). Slices for several nodes (`allNodes`, `nodeSelector`) hold no node's own GPUs
    and are said in `warnings`; so are devices whose type is neither a whole GPU nor a partition of one (NVIDIA's
    VFIO passthrough devices), and a device named twice in a pool."""
    sink: list[str] = [] if warnings is None else warnings
    read = [s if isinstance(s, ResourceSlice) else read_resource_slice(s) for s in slices]
    newest: dict[tuple[str, str], int] = {}
    for s in read:
        if s.driver in GPU_DRIVERS and s.pool:
            key = (s.driver, s.pool)
            newest[key] = max(newest.get(key, s.generation), s.generation)
    found: dict[str, list[DraGpu]] = {}
    seen: set[tuple[str, str, str]] = set()
    for s in read:
        driver = GPU_DRIVERS.get(s.driver or "")
        if driver is None or not s.pool or s.generation < newest[(driver.name, s.pool)]:
            continue
        if s.shared_across_nodes or not s.node_name:
            sink.append(f"ResourceSlice {s.name}: {driver.name} devices not local to one node: not counted as any node's GPUs")
            continue
        for device in s.devices:
            kind = device.attributes.get("type")
            # AMD's older slices carried no `type`; NVIDIA's always do (deviceinfo.go): untyped counts as whole.
            whole = kind in driver.whole_gpu_types or (kind is None and driver.vendor == "amd")
            if not whole and kind not in driver.partition_types:
                sink.append(f"ResourceSlice {s.name}: device {device.name} is of type {kind!r}, not a GPU: not counted")
                continue
            key = (driver.name, s.pool, device.name)
            if key in seen:
                sink.append(f"ResourceSlice {s.name}: device {device.name} of pool {s.pool} is published twice: counted once")
                continue
            seen.add(key)
            model = device.attributes.get(driver.model_attribute)
            found.setdefault(s.node_name, []).append(
                DraGpu(
                    node=s.node_name,
                    driver=driver.name,
                    pool=s.pool,
                    device=device.name,
                    vendor=driver.vendor,
                    whole=whole,
                    model=model if isinstance(model, str) and model else None,
                    memory_mib=_memory_mib(device.capacity.get(driver.memory_capacity)),
                )
            )
    return {node: tuple(devices) for node, devices in found.items()}


# --- claims ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceRequest:
    """One request of a claim spec: `exactly` a count of a DeviceClass's devices (or all of them), with selectors."""

    name: str
    device_class: Optional[str]
    count: int
    all_devices: bool
    selectors: tuple[str, ...]
    #: `firstAvailable`: a list of alternatives; its first one is read into the fields above.
    alternatives: bool = False


def read_claim_spec(spec: Any) -> tuple[DeviceRequest, ...]:
    """The device requests of a ResourceClaim's `spec` (or a ResourceClaimTemplate's `spec.spec`)."""
    requests = []
    for raw in _items(_mapping(_mapping(spec).get("devices")).get("requests")):
        request = _mapping(raw)
        exactly = _mapping(request.get("exactly"))
        alternatives = _items(request.get("firstAvailable"))
        chosen = exactly or (_mapping(alternatives[0]) if alternatives else {})
        mode = chosen.get("allocationMode")
        count = _int(chosen.get("count"))
        selectors = tuple(
            expression
            for selector in _items(chosen.get("selectors"))
            if (expression := _text(_mapping(_mapping(selector).get("cel")).get("expression"))) is not None
        )
        requests.append(
            DeviceRequest(
                name=_text(request.get("name")) or "?",
                device_class=_text(chosen.get("deviceClassName")),
                count=1 if count is None or count < 1 else count,
                all_devices=mode == "All",
                selectors=selectors,
                alternatives=not exactly and bool(alternatives),
            )
        )
    return tuple(requests)


def claim_gpu_requests(requests: Iterable[DeviceRequest], gpu_classes: Mapping[str, str]) -> dict[str, int]:
    """vendor -> whole GPUs the requests ask for, through the classes in `gpu_classes` (DeviceClass name -> vendor).
    A request for `All` of a class counts as one here (how many there are depends on the node)."""
    totals: dict[str, int] = {}
    for request in requests:
        vendor = gpu_classes.get(request.device_class or "")
        if vendor is not None:
            totals[vendor] = totals.get(vendor, 0) + (1 if request.all_devices else request.count)
    return totals


def gpu_classes_of(classes: Iterable[DeviceClass]) -> dict[str, str]:
    """DeviceClass name -> vendor, for the classes that select a known driver's whole GPUs."""
    found: dict[str, str] = {}
    for device_class in classes:
        for driver in GPU_DRIVERS.values():
            if selects_whole_gpus(device_class, driver):
                found[device_class.name] = driver.vendor
    return found


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's `spec.resourceClaims`: the claim it names, or the template its claim is made from."""

    name: str
    claim_name: Optional[str]
    template_name: Optional[str]


def pod_claims(pod_spec: Mapping[str, Any]) -> tuple[PodClaim, ...]:
    """A pod spec's resource claims (core/v1 PodResourceClaim)."""
    claims = []
    for raw in _items(pod_spec.get("resourceClaims")):
        entry = _mapping(raw)
        name = _text(entry.get("name"))
        if name is None:
            continue
        claims.append(PodClaim(name=name, claim_name=_text(entry.get("resourceClaimName")), template_name=_text(entry.get("resourceClaimTemplateName"))))
    return tuple(claims)
