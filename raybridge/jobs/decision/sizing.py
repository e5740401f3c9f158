"""Worker-group sizing: how many replicas, how many GPUs each.

The Kaiwo contract (seed 000) made pure, plus the warnings Kaiwo leaves out:
whenever fewer GPUs are allocated than asked for, or a pod shape can never be
scheduled, the decision says so with the numbers.

Input is a request and an `Inventory`; output is a `SizingDecision`. No I/O,
no cluster access: `plan` prints exactly what `render` and `submit` use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from raybridge.core.consts import DEFAULT_VENDOR_ON_MIXED_CLUSTER, GPU_RESOURCE_KEYS
from raybridge.core.inventory import Inventory, VendorCapacity
from raybridge.jobs.decision.gpu_access import GpuChoice, choose_gpu_access
from raybridge.errors import BadInput

Number = int | float


@dataclass(frozen=True)
class SizingRequest:
    """What the user asked for; None means "not set"."""

    gpus: int = 0
    replicas: Optional[int] = None
    gpus_per_replica: Optional[float] = None
    gpu_vendor: Optional[str] = None
    ray: bool = True
    kind: str = "RayJob"
    #: Only GPUs of this model and at least this memory each (`gpuModel`, `gpuMemory`).
    choice: GpuChoice = GpuChoice()

    def __post_init__(self) -> None:
        # An explicit count is honoured or refused, never turned into the default.
        if self.replicas is not None and self.replicas < 1:
            raise BadInput(f"replicas: must be at least 1 (got {self.replicas}); leave it unset for one replica")

    @classmethod
    def from_spec(cls, spec: Any) -> "SizingRequest":
        return cls(
            gpus=spec.gpus,
            replicas=spec.replicas,
            gpus_per_replica=spec.gpus_per_replica,
            gpu_vendor=spec.gpu_vendor,
            ray=spec.ray,
            kind=spec.resolved_kind,
            choice=GpuChoice(
                model=getattr(spec, "gpu_model", None),
                memory_mib=_mib(getattr(spec, "gpu_memory", None)),
            ),
        )

    @property
    def wants_gpus(self) -> bool:
        return self.gpus > 0 or bool(self.gpus_per_replica)


@dataclass(frozen=True)
class SizingDecision:
    gpu_vendor: Optional[str]
    resource_key: Optional[str]
    replicas: int
    gpus_per_replica: Number
    requested_gpus: Number
    calculated: bool
    cluster_gpus: int
    min_gpus_per_node: int
    max_gpus_per_node: int
    kind: str = "RayJob"
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    #: The DeviceClass whose DRA devices the GPU pods claim (None: the device plugin's `resource_key`).
    device_class: Optional[str] = None
    #: What keeps the pods to the GPUs `gpuModel`/`gpuMemory` chose: the DRA devices' product names and least memory
    #: (a claim's selectors), or the device-plugin nodes' product labels (a node affinity).
    device_models: tuple[str, ...] = ()
    device_memory_mib: Optional[int] = None
    node_models: tuple[tuple[str, str], ...] = ()

    @property
    def dra(self) -> bool:
        """True when the GPUs are claimed as DRA devices (a ResourceClaimTemplate), not asked as a resource."""
        return self.device_class is not None and self.gpus_per_replica > 0

    @property
    def total_gpus(self) -> Number:
        return _clean(self.replicas * self.gpus_per_replica)

    @property
    def fractional(self) -> bool:
        return 0 < self.gpus_per_replica < 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "gpuVendor": self.gpu_vendor,
            "resourceKey": self.resource_key,
            "replicas": self.replicas,
            "gpusPerReplica": _clean(self.gpus_per_replica),
            "totalGpus": self.total_gpus,
            "requestedGpus": _clean(self.requested_gpus),
            "calculated": self.calculated,
            "fractional": self.fractional,
            "clusterGpus": self.cluster_gpus,
            "minGpusPerNode": self.min_gpus_per_node,
            "maxGpusPerNode": self.max_gpus_per_node,
            "deviceClass": self.device_class if self.dra else None,
            "gpuModels": list(self.device_models) or [value for _, value in self.node_models],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }


def _clean(value: Number) -> Number:
    """1.0 -> 1, 0.5 stays 0.5: JSON shows whole GPUs as integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return round(value, 6) if isinstance(value, float) else value


# --- vendor ---------------------------------------------------------------------------------


def choose_vendor(request: SizingRequest, inventory: Inventory) -> tuple[Optional[str], list[str]]:
    """The vendor to size for, and notes on the choice. BadInput when the asked vendor is absent.

    A job that asks for no GPUs has no vendor unless it names one: nothing is chosen, nothing noted."""
    present = inventory.vendors(eligible_only=False)
    notes: list[str] = []
    if not request.wants_gpus:
        return request.gpu_vendor, notes
    if request.gpu_vendor:
        if request.gpu_vendor not in present:
            have = ", ".join(f"{v} ({n} GPUs)" for v, n in present.items()) or "none"
            raise BadInput(f"gpuVendor: no {request.gpu_vendor} GPUs in the {inventory.source} inventory; vendors present: {have}")
        return request.gpu_vendor, notes
    if not present:
        return None, notes
    if len(present) == 1:
        vendor = next(iter(present))
        notes.append(f"gpuVendor not set: using {vendor}, the only vendor present")
        return vendor, notes
    vendor = DEFAULT_VENDOR_ON_MIXED_CLUSTER
    others = ", ".join(f"{v} ({n} GPUs)" for v, n in present.items())
    notes.append(f"gpuVendor not set on a mixed cluster ({others}): using {vendor}, the default; set gpuVendor to choose")
    return vendor, notes


def _no_capacity(vendor: str, inventory: Inventory) -> BadInput:
    blocked = inventory.ineligible(vendor)
    detail = "; ".join(f"{n.name}: {', '.join(n.reasons)}" for n in blocked[:5])
    more = f" (and {len(blocked) - 5} more)" if len(blocked) > 5 else ""
    return BadInput(f"no schedulable {vendor} GPUs: every node that has them is unusable ({detail}{more})")


# --- the even-split advice --------------------------------------------------------------------


#: Bound on the trial divisions behind the advice: exact for totals up to 10^12, fast for any.
_MAX_TRIAL_DIVISIONS = 1_000_000


def _largest_divisors(total: int, at_most: int, count: int) -> list[int]:
    """The `count` largest divisors of `total` not above `at_most`, by trial division up to sqrt(total).

    Time grows with the square root of `total` (bounded), not with the count of GPUs on a node:
    a count-down from `at_most` took seconds for a node claiming a billion GPUs.
    """
    if total <= 0 or at_most <= 0:
        return []
    found: set[int] = set()
    limit = min(math.isqrt(total), _MAX_TRIAL_DIVISIONS)
    for small in range(1, limit + 1):
        if total % small == 0:
            found.update(d for d in (small, total // small) if d <= at_most)
    return sorted(found, reverse=True)[:count]


def even_splits(total: int, per_node: int, cap: int) -> list[str]:
    """Splits that allocate exactly, near `total`, with at most `per_node` GPUs per replica."""
    options = [f"{total // g} x {g} = {total}" for g in _largest_divisors(total, min(per_node, total), 2)]
    if per_node > 0:
        lower = (total // per_node) * per_node
        upper = lower + per_node
        if 0 < lower < total:
            options.append(f"{lower // per_node} x {per_node} = {lower}")
        if upper <= cap and upper != total:
            options.append(f"{upper // per_node} x {per_node} = {upper}")
    return options


# --- Ray worker groups ------------------------------------------------------------------------


def size_worker_group(request: SizingRequest, capacity: VendorCapacity) -> SizingDecision:
    """Seed 000's rules for a Ray worker group, against one vendor's capacity."""
    replicas_in = request.replicas or 0
    per_in = request.gpus_per_replica or 0
    common = _capacity_fields(request, capacity)
    if replicas_in > 0 and per_in > 0 and replicas_in * per_in <= capacity.total:
        return _shape_as_asked(request, capacity, replicas_in, per_in, common)
    requested: Number = request.gpus if request.gpus > 0 else _clean(replicas_in * per_in)
    if requested <= 0:
        return _no_gpus(request, replicas_in, per_in, common)
    warnings = _ignored_shape_warnings(request, capacity, replicas_in, per_in)
    return _shape_from_total(requested, capacity, warnings, common)


def _capacity_fields(request: SizingRequest, capacity: VendorCapacity) -> dict[str, Any]:
    """The decision's fields that come from the cluster, the same whatever the shape."""
    return dict(
        gpu_vendor=capacity.vendor,
        resource_key=GPU_RESOURCE_KEYS[capacity.vendor],
        cluster_gpus=capacity.total,
        min_gpus_per_node=capacity.min_per_node,
        max_gpus_per_node=capacity.max_per_node,
        kind=request.kind,
    )


def _shape_as_asked(
    request: SizingRequest, capacity: VendorCapacity, replicas_in: int, per_in: Number, common: dict[str, Any]
) -> SizingDecision:
    """Replicas and GPUs per replica both set and within the cluster: taken as they are."""
    warnings: list[str] = []
    if request.gpus > 0 and request.gpus != replicas_in * per_in:
        warnings.append(
            f"gpus={request.gpus} is ignored: replicas={replicas_in} and gpusPerReplica={_clean(per_in)} "
            f"are both set and fit ({_clean(replicas_in * per_in)} GPUs)"
        )
    if per_in > capacity.max_per_node:
        warnings.append(
            f"gpusPerReplica={_clean(per_in)} exceeds every node's GPUs (largest node has {capacity.max_per_node}): "
            "these workers can never be scheduled"
        )
    return SizingDecision(
        replicas=replicas_in,
        gpus_per_replica=_clean(per_in),
        requested_gpus=_clean(replicas_in * per_in),
        calculated=False,
        warnings=tuple(warnings),
        **common,
    )


def _no_gpus(request: SizingRequest, replicas_in: int, per_in: Number, common: dict[str, Any]) -> SizingDecision:
    """Nothing asks for GPUs: workers without any, and a warning if GPUs per replica alone was set."""
    warnings: list[str] = []
    if per_in > 0:
        warnings.append(
            f"gpusPerReplica={_clean(per_in)} with replicas unset and gpus={request.gpus} allocates no GPUs; "
            f"set replicas (e.g. --replicas 1) or gpus"
        )
    return SizingDecision(
        replicas=replicas_in or 1, gpus_per_replica=0, requested_gpus=0, calculated=False, warnings=tuple(warnings), **common
    )


def _ignored_shape_warnings(request: SizingRequest, capacity: VendorCapacity, replicas_in: int, per_in: Number) -> list[str]:
    """Why the replicas or GPUs per replica the user set are not the shape we size."""
    warnings: list[str] = []
    if replicas_in > 0 and per_in > 0:
        warnings.append(
            f"replicas={replicas_in} x gpusPerReplica={_clean(per_in)} = {_clean(replicas_in * per_in)} GPUs exceeds "
            f"the {capacity.total} {capacity.vendor} GPUs in the cluster: sizing from "
            + (f"gpus={request.gpus}" if request.gpus > 0 else "the cluster's capacity")
        )
    elif request.gpus > 0 and (replicas_in > 0 or per_in > 0):
        ignored = " and ".join(
            f"{n}={_clean(v)}" for n, v in (("replicas", replicas_in), ("gpusPerReplica", per_in)) if v > 0
        )
        warnings.append(f"{ignored} ignored: sizing from gpus={request.gpus} and the smallest node ({capacity.min_per_node} GPUs)")
    return warnings


def _shape_from_total(
    requested: Number, capacity: VendorCapacity, warnings: list[str], common: dict[str, Any]
) -> SizingDecision:
    """A total in whole GPUs, capped at the cluster, split into as few replicas as the smallest node allows."""
    c, m = capacity.total, capacity.min_per_node
    total = requested
    if total > c:
        warnings.append(f"requested {_clean(total)} {capacity.vendor} GPUs but the cluster has {c}: capped at {c}")
        total = c
    whole_total = math.floor(total)
    if whole_total < total:
        warnings.append(f"{_clean(total)} GPUs is not a whole number: sizing for {whole_total}")
    if whole_total <= 0:
        return SizingDecision(replicas=1, gpus_per_replica=0, requested_gpus=requested, calculated=True, warnings=tuple(warnings), **common)
    replicas = math.ceil(whole_total / m)
    per = whole_total // replicas
    allocated = replicas * per
    if allocated < requested:
        lost = _clean(requested - allocated)
        advice = even_splits(int(whole_total), m, c)
        warnings.append(
            f"allocating {replicas} x {per} = {allocated} GPUs, {lost} fewer than the {_clean(requested)} requested"
            + (f"; even splits: {'; '.join(advice)}" if advice else "")
        )
    return SizingDecision(
        replicas=replicas,
        gpus_per_replica=per,
        requested_gpus=requested,
        calculated=True,
        warnings=tuple(warnings),
        **common,
    )


# --- plain (non-Ray) workloads -------------------------------------------------------------


def size_plain_workload(request: SizingRequest, capacity: Optional[VendorCapacity]) -> SizingDecision:
    """Seed 000's non-Ray rules: a job is one pod; a service keeps its replicas."""
    per: Number = request.gpus_per_replica if request.gpus_per_replica else request.gpus
    warnings: list[str] = []
    if request.kind == "job":
        replicas = 1
        if request.replicas and request.replicas != 1:
            warnings.append(f"replicas={request.replicas} is ignored: a job runs one pod")
    else:
        replicas = request.replicas if request.replicas else 1
    if request.gpus_per_replica and request.gpus and request.kind == "service":
        if request.gpus != replicas * request.gpus_per_replica:
            warnings.append(f"gpus={request.gpus} is ignored: gpusPerReplica={_clean(request.gpus_per_replica)} sets each pod's GPUs")
    elif request.gpus_per_replica and request.gpus and request.gpus != request.gpus_per_replica:
        warnings.append(f"gpus={request.gpus} is ignored: gpusPerReplica={_clean(request.gpus_per_replica)} takes precedence")
    cluster = capacity.total if capacity else 0
    biggest = capacity.max_per_node if capacity else 0
    if capacity and per >= 1 and per > biggest:
        warnings.append(f"{_clean(per)} GPUs per pod exceeds every node's GPUs (largest node has {biggest}): the pod can never be scheduled")
    if capacity and per > 0 and replicas * per > cluster:
        warnings.append(f"{replicas} x {_clean(per)} = {_clean(replicas * per)} GPUs exceeds the {cluster} in the cluster: some pods will stay pending")
    return SizingDecision(
        gpu_vendor=capacity.vendor if capacity else None,
        resource_key=GPU_RESOURCE_KEYS[capacity.vendor] if capacity else None,
        replicas=replicas,
        gpus_per_replica=_clean(per),
        requested_gpus=_clean(replicas * per),
        calculated=False,
        cluster_gpus=cluster,
        min_gpus_per_node=capacity.min_per_node if capacity else 0,
        max_gpus_per_node=biggest,
        kind=request.kind,
        warnings=tuple(warnings),
    )


def unsized_decision(request: SizingRequest) -> SizingDecision:
    """The request as given, for a Ray cluster that places work itself (no inventory).

    With `gpusPerReplica` the replicas (default 1) each get that many; with
    only `gpus` one replica gets them all; with neither, the replicas get none.
    """
    if request.gpus_per_replica:
        replicas, per = request.replicas or 1, request.gpus_per_replica
    elif request.gpus:
        replicas, per = 1, request.gpus
    else:
        replicas, per = request.replicas or 1, 0
    return SizingDecision(
        gpu_vendor=request.gpu_vendor,
        resource_key=GPU_RESOURCE_KEYS.get(request.gpu_vendor) if request.gpu_vendor else None,
        replicas=replicas,
        gpus_per_replica=_clean(per),
        requested_gpus=_clean(request.gpus or replicas * per),
        calculated=False,
        cluster_gpus=0,
        min_gpus_per_node=0,
        max_gpus_per_node=0,
        kind=request.kind,
        notes=("sized by the Ray cluster at the given address, not by raybridge",),
    )


# --- the one entry point ---------------------------------------------------------------------


def size_workload(request: SizingRequest, inventory: Inventory) -> SizingDecision:
    """Choose the vendor, check there is capacity, and size by the workload's kind."""
    vendor, notes = choose_vendor(request, inventory)
    access = None
    if vendor and request.wants_gpus:
        shared = request.gpus_per_replica is not None and 0 < request.gpus_per_replica < 1
        access = choose_gpu_access(inventory, vendor, shared=shared, choice=request.choice)
        notes = notes + list(access.notes)
        inventory = access.inventory
    capacity = inventory.capacity(vendor) if vendor else None
    if request.wants_gpus:
        if vendor is None:
            raise BadInput(f"GPUs requested but the {inventory.source} inventory has no GPUs of any vendor")
        if capacity is None or capacity.total == 0:
            raise _no_capacity(vendor, inventory)
    if not request.ray:
        decision = size_plain_workload(request, capacity)
    elif capacity is None or capacity.total == 0:
        decision = SizingDecision(
            gpu_vendor=vendor,
            resource_key=GPU_RESOURCE_KEYS.get(vendor) if vendor else None,
            replicas=request.replicas or 1,
            gpus_per_replica=0,
            requested_gpus=0,
            calculated=False,
            cluster_gpus=0,
            min_gpus_per_node=0,
            max_gpus_per_node=0,
            kind=request.kind,
        )
    else:
        decision = size_worker_group(request, capacity)
    access_warnings = access.warnings if access is not None else ()
    if notes or inventory.notes or inventory.warnings or access_warnings:
        decision = SizingDecision(
            **{
                **decision.__dict__,
                "notes": tuple(inventory.notes) + tuple(notes) + decision.notes,
                "warnings": tuple(inventory.warnings) + access_warnings + decision.warnings,
            }
        )
    if access is not None and decision.gpus_per_replica > 0:
        decision = SizingDecision(
            **{
                **decision.__dict__,
                "device_class": access.device_class,
                "device_models": access.device_models,
                "device_memory_mib": request.choice.memory_mib if access.device_class else None,
                "node_models": access.node_models,
            }
        )
    return decision


def _mib(amount: Optional[str]) -> Optional[int]:
    """A memory amount in whole MiB, rounded up (a GPU has at least it); None for none."""
    if not amount:
        return None
    from raybridge.core.quantity import parse_quantity

    return int(math.ceil(parse_quantity(amount) / (1 << 20)))
