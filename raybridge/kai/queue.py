"""KAI Queue objects, capacities and demands, turned into what the fair-share division takes.

Why this exists: `raybridge.kai.fairshare` works on plain numbers in KAI's
units; users hand in Queue YAML, `--capacity gpu=40,cpu=64000m,...` and a
demand file in Kubernetes quantities, and the cluster hands in Node and Pod
JSON. This module checks those inputs the way the API server (the Queue CRD's
schema, strict field validation) and KAI's admission webhook (spec.resources
is required) would, naming every problem at once, and converts them: cpu to
millicores, memory to bytes, GPUs to devices. From Nodes and Pods it computes
what KAI's proportion plugin computes: the capacity (allocatable of Ready
nodes, less active pods of other schedulers; `proportion.go`
getNodeResources) and each queue's request (its allocated and pending pods;
`updateQueuesCurrentResourceUsage`).

What it deliberately does not do: read files or the API (the services do),
model MIG devices or the GPU-worker node label restriction, or compute
historical usage (that lives in KAI's Prometheus).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Iterable, Mapping, Optional, Sequence

from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.kai.names import KAI_QUEUE_API_VERSION, KAI_QUEUE_LABEL, KAI_SCHEDULER_NAME, KAI_UTILITY_APP_LABEL, KAI_UTILITY_APP_VALUES
from raybridge.kai.fairshare import DEFAULT_PRIORITY, Amounts, QueueSpec, ResourceTerms
from raybridge.kai.share import scheduler_request
from raybridge.core.inventory import node_is_ready, pod_gpu_requests
from raybridge.core.kubeobjects import as_dict, as_list, container_requests, parse_rfc3339, quantity_or_none
from raybridge.core.views import Pod, is_object, read_meta, read_node, read_pod
from raybridge.core.names import subdomain_problem
from raybridge.core.quantity import parse_quantity
from raybridge.errors import BadInput

#: The resource names `--capacity` and the demand file use.
RESOURCE_NAMES = ("gpu", "cpu", "memory")
_SPEC_FIELDS = {"displayName", "parentQueue", "preemptMinRuntime", "priority", "reclaimMinRuntime", "resources"}
_TERM_FIELDS = {"quota": "quota", "limit": "limit", "overQuotaWeight": "over_quota_weight"}
#: Largest quota, limit or weight read from a file: integers are exact up to 2^53, and sums of a
#: few such values stay finite (two weights of 1e308 add up to infinity and divide nothing).
MAX_TERM = 2.0**53


# --- Queue objects ---------------------------------------------------------------------------


def queue_objects(documents: Iterable[Any]) -> list[Any]:
    """The objects of a multi-document YAML: each document a Queue, or a List of them."""
    objects: list[Any] = []
    for document in documents:
        if document is None:
            continue
        if isinstance(document, dict) and isinstance(document.get("items"), list):
            objects.extend(document["items"])
        else:
            objects.append(document)
    return objects


def queue_specs(objects: Sequence[Any], where: str = "queues", *, strict: bool = True) -> list[QueueSpec]:
    """QueueSpecs from `scheduling.run.ai/v2` Queue objects; BadInput naming every problem.

    strict (a user's file): unknown fields and a missing spec.resources are errors, as
    strict field validation and KAI's webhook make them. Not strict (objects the API
    server already holds): they are read as KAI reads them (unknown fields ignored,
    no resources meaning all zeros).
    """
    problems: list[str] = []
    specs: list[QueueSpec] = []
    others: dict[str, list[int]] = {}
    for index, obj in enumerate(objects):
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if isinstance(obj, dict) and kind != "Queue":
            others.setdefault(str(kind or "object without kind"), []).append(index + 1)
            continue
        spec = _queue_spec(obj, f"{where}: item {index + 1}", problems, strict)
        if spec is not None:
            specs.append(spec)
    for kind, items in sorted(others.items()):
        shown = ", ".join(map(str, items[:5])) + (", ..." if len(items) > 5 else "")
        problems.append(f"{where}: {len(items)} item{'s' if len(items) > 1 else ''} ({shown}) {'are' if len(items) > 1 else 'is a'} {kind}{'s' if len(items) > 1 else ''}, not {KAI_QUEUE_API_VERSION} Queues")
    if not objects:
        problems.append(f"{where}: no Queue objects found")
    if problems:
        raise BadInput(*problems)
    return specs


def _queue_spec(obj: Any, where: str, problems: list[str], strict: bool) -> Optional[QueueSpec]:
    if not isinstance(obj, dict):
        problems.append(f"{where}: not an object (got {type(obj).__name__})")
        return None
    api_version = obj.get("apiVersion")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        problems.append(f"{where}: metadata.name is required")
        return None
    where = f"queue {name}"
    before = len(problems)
    if api_version != KAI_QUEUE_API_VERSION:
        problems.append(f"{where}: apiVersion must be {KAI_QUEUE_API_VERSION} (got {api_version!r})")
    name_problem = subdomain_problem(name)
    if name_problem:
        problems.append(f"{where}: metadata.name {name_problem}")
    created = _timestamp(meta.get("creationTimestamp"), where, problems)
    spec = obj.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        problems.append(f"{where}: spec must be an object")
        return None
    for key in sorted(set(spec) - _SPEC_FIELDS) if strict else ():
        problems.append(f"{where}: spec.{key}: unknown field")
    parent = spec.get("parentQueue")
    if parent is not None and not isinstance(parent, str):
        problems.append(f"{where}: spec.parentQueue must be a string")
        parent = None
    if isinstance(spec.get("displayName"), (dict, list)):
        problems.append(f"{where}: spec.displayName must be a string")
    priority = spec.get("priority", None)
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        problems.append(f"{where}: spec.priority must be an integer (got {priority!r})")
        priority = None
    resources = spec.get("resources")
    terms: dict[str, ResourceTerms] = {}
    if resources is None and strict:
        problems.append(f"{where}: spec.resources is required (KAI's admission webhook refuses a Queue without it)")
    elif resources is not None and not isinstance(resources, dict):
        problems.append(f"{where}: spec.resources must be an object")
    elif resources is not None:
        for key in sorted(set(resources) - set(RESOURCE_NAMES)) if strict else ():
            problems.append(f"{where}: spec.resources.{key}: unknown field (cpu, gpu and memory are known)")
        for resource in RESOURCE_NAMES:
            terms[resource] = _terms(resources.get(resource), f"{where}: spec.resources.{resource}", problems, strict)
    if len(problems) > before:
        return None
    return QueueSpec(
        name=name,
        parent=parent or None,
        priority=DEFAULT_PRIORITY if priority is None else priority,
        created=created,
        **terms,
    )


def _terms(raw: Any, where: str, problems: list[str], strict: bool) -> ResourceTerms:
    if raw is None:
        return ResourceTerms()
    if not isinstance(raw, dict):
        problems.append(f"{where} must be an object with quota, limit and overQuotaWeight")
        return ResourceTerms()
    for key in sorted(set(raw) - set(_TERM_FIELDS)) if strict else ():
        problems.append(f"{where}.{key}: unknown field (quota, limit and overQuotaWeight are known)")
    values: dict[str, float] = {}
    for key, field_name in _TERM_FIELDS.items():
        value = raw.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{where}.{key} must be a number (got {value!r})")
            continue
        if not math.isfinite(value):
            problems.append(f"{where}.{key} must be finite (got {value!r})")
            continue
        if strict and abs(value) > MAX_TERM:
            problems.append(f"{where}.{key} is out of range (got {value!r}; at most 2^53)")
            continue
        if strict and key == "overQuotaWeight" and value < 0:
            problems.append(f"{where}.{key} must not be negative (got {value!r})")
            continue
        if strict and key in ("quota", "limit") and value < 0 and value != -1:
            problems.append(f"{where}.{key} must be -1 or at least 0 (got {value!r})")
            continue
        values[field_name] = float(value)
    return ResourceTerms(**values)


def _timestamp(raw: Any, where: str, problems: list[str]) -> Optional[datetime]:
    if raw is None:
        return None
    if not isinstance(raw, (str, datetime)):  # YAML reads an unquoted timestamp as a datetime
        problems.append(f"{where}: metadata.creationTimestamp must be an RFC 3339 time")
        return None
    parsed = parse_rfc3339(raw)
    if parsed is None:
        problems.append(f"{where}: metadata.creationTimestamp {raw!r} is not an RFC 3339 time")
    return parsed


# --- a Queue as the cluster holds it ---------------------------------------------------------


@dataclass(frozen=True)
class KaiQueue:
    """A Queue the cluster holds, read once and leniently, for showing it (`explain`): "" or defaults where a field
    is absent or of the wrong type. `queue_specs` is the strict reading the fair share divides by."""

    name: str
    #: `spec.parentQueue` ("" at the top).
    parent: str
    priority: int
    #: `spec.resources` as written: resource -> its terms (a mapping; `term` reads one).
    resources: Mapping[str, Any]
    #: `status.allocated` as written (quantities by resource key; empty when KAI wrote none).
    allocated: Mapping[str, Any]

    def configured(self, resource: str) -> bool:
        return resource in self.resources

    def term(self, resource: str, key: str) -> float:
        """`spec.resources.<resource>.<key>` (quota, limit, overQuotaWeight) as a number; 0 where absent or not a finite
        one. Text is no number here, as in `queue_specs` and the Queue's schema (a float64): `float()` would read
        "nan", "inf" and "1e400" into numbers that JSON cannot print."""
        value = as_dict(self.resources.get(resource)).get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return 0.0
        return float(value)


def read_kai_queue(obj: Any) -> KaiQueue:
    """The lenient view of a Queue object (of anything: a non-object reads as a nameless Queue)."""
    obj = obj if is_object(obj) else {}
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    parent, priority = spec.get("parentQueue"), spec.get("priority")
    return KaiQueue(
        name=read_meta(obj).name,
        parent=parent if isinstance(parent, str) else "",
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else DEFAULT_PRIORITY,
        resources=as_dict(spec.get("resources")),
        allocated=as_dict(status.get("allocated")),
    )


# --- quantities ------------------------------------------------------------------------------


def kai_amount(resource: str, value: Any) -> float:
    """A Kubernetes quantity in KAI's unit for `resource` (millicores, bytes, devices); ValueError if bad."""
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"not a finite quantity: {value!r}")
    amount = parse_quantity(value)
    if amount < 0:
        raise ValueError(f"must not be negative (got {value!r})")
    in_units = amount * 1000 if resource == "cpu" else amount
    if in_units > MAX_TERM:  # beyond it float64, KAI's arithmetic, is not exact: shares above the capacity, negative rest
        unit = {"cpu": "millicores", "memory": "bytes"}.get(resource, "devices")
        raise ValueError(f"is out of range (got {value!r}; at most 2^53 {unit})")
    return float(in_units)


def parse_capacity(text: str) -> Amounts:
    """`gpu=40,cpu=64000m,memory=512000M` -> Amounts; resources left out are 0. BadInput if malformed."""
    problems: list[str] = []
    values: dict[str, float] = {}
    parts = _capacity_parts(text)
    if not parts:
        raise BadInput("--capacity: give at least one of gpu=N, cpu=QUANTITY, memory=QUANTITY")
    for part in parts:
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep:
            problems.append(f"--capacity: {part!r} is not RESOURCE=QUANTITY")
            continue
        if key not in RESOURCE_NAMES:
            problems.append(f"--capacity: unknown resource {key!r} (gpu, cpu and memory are known)")
            continue
        if key in values:
            problems.append(f"--capacity: {key} is given twice")
            continue
        try:
            values[key] = kai_amount(key, raw.strip())
        except ValueError as exc:
            problems.append(f"--capacity: {key}={raw.strip()}: {exc}")
    if problems:
        raise BadInput(*problems)
    return Amounts(**values)


def _capacity_parts(text: str) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def capacity_left_out(text: str) -> list[str]:
    """The resources a `--capacity` text does not name (they count as 0)."""
    named = {p.partition("=")[0].strip() for p in _capacity_parts(text)}
    return [r for r in RESOURCE_NAMES if r not in named]


def parse_demand(document: Any, where: str = "--demand") -> dict[str, Amounts]:
    """`{"p1": {"gpu": 100, "cpu": "8", "memory": "64Gi"}}` -> queue -> Amounts; BadInput if malformed."""
    if not isinstance(document, dict):
        raise BadInput(f"{where}: expected an object mapping queue names to requests, e.g. {{\"p1\": {{\"gpu\": 2}}}}")
    problems: list[str] = []
    demand: dict[str, Amounts] = {}
    for queue, requests in document.items():
        if not isinstance(requests, dict):
            problems.append(f"{where}: {queue}: expected an object of gpu, cpu and memory requests")
            continue
        values: dict[str, float] = {}
        for key, raw in requests.items():
            if key not in RESOURCE_NAMES:
                problems.append(f"{where}: {queue}.{key}: unknown resource (gpu, cpu and memory are known)")
                continue
            try:
                values[key] = kai_amount(key, raw)
            except ValueError as exc:
                problems.append(f"{where}: {queue}.{key}: {exc}")
        demand[str(queue)] = Amounts(**values)
    if problems:
        raise BadInput(*problems)
    return demand


# --- the cluster: capacity and requests as KAI counts them -------------------------------------


def _amount_of(resources: Mapping[str, Any], key: str) -> Decimal:
    """An amount of `resources`; absent or malformed reads as 0 (core/kubeobjects.py quantity_or_none)."""
    return quantity_or_none(resources.get(key)) or Decimal(0)


def kai_pod_requests(spec: Any) -> dict[str, Decimal]:
    """A pod's cpu and memory as KAI's scheduler counts them, which is not kube-scheduler's PodRequests.

    kai-scheduler@v0.13.0 pkg/scheduler/api/pod_info/pod_info.go getPodResourceRequest: the containers'
    requests summed, then the largest of that and each init container's requests, per resource (restartable
    init containers, sidecars, get no sum of their own, and pod-level `spec.resources` is not read), plus
    `spec.overhead`. Each container's requests are core/kubeobjects.py `container_requests` (a limit without a
    request requests its limit, as the API server defaults it before KAI sees the pod).
    """
    spec = as_dict(spec)
    totals: dict[str, Decimal] = {}
    for resource in ("cpu", "memory"):
        containers = sum((container_requests(c).get(resource, Decimal(0)) for c in as_list(spec.get("containers"))), Decimal(0))
        init = max((container_requests(c).get(resource, Decimal(0)) for c in as_list(spec.get("initContainers"))), default=Decimal(0))
        totals[resource] = max(containers, init) + _amount_of(as_dict(spec.get("overhead")), resource)
    return totals


def pod_amounts(pod: Pod, min_gpu_memory_mib: Optional[float] = None) -> Amounts:
    """A pod's requests as KAI counts them: cpu, memory, and GPUs whole, shared or by memory."""
    totals = kai_pod_requests(pod.spec)
    gpus = float(sum(pod_gpu_requests(pod).values()))
    shared = scheduler_request(pod.meta.annotations)
    if shared is not None and shared.fraction is not None:
        gpus += shared.fraction * shared.devices
    elif shared is not None and shared.memory_mib is not None and min_gpu_memory_mib:
        gpus += shared.devices * (shared.memory_mib / min_gpu_memory_mib)
    return Amounts(cpu=float(totals["cpu"] * 1000), memory=float(totals["memory"]), gpu=gpus)


def _active_on_node(pod: Pod) -> bool:
    """KAI's active-used statuses: bound or running (releasing included), not finished."""
    return pod.bound and pod.phase in ("Running", "Pending")


def kai_capacity(nodes: Iterable[Any], pods: Iterable[Any] = (), scheduler_name: str = KAI_SCHEDULER_NAME) -> Amounts:
    """What KAI's top level divides: allocatable of Ready nodes, less active pods of other schedulers."""
    total = Amounts()
    ready: set[str] = set()
    for node in (read_node(n) for n in nodes if isinstance(n, dict)):
        if not node_is_ready(node):
            continue
        ready.add(node.name)
        allocatable = as_dict(node.status.get("allocatable"))
        gpus = sum(_amount_of(allocatable, key) for key in GPU_RESOURCE_KEYS.values())
        total = total.plus(
            Amounts(cpu=float(_amount_of(allocatable, "cpu") * 1000), memory=float(_amount_of(allocatable, "memory")), gpu=float(gpus))
        )
    for pod in (read_pod(p) for p in pods if isinstance(p, dict)):
        if not _active_on_node(pod) or pod.node_name not in ready or pod.scheduler_name == scheduler_name:
            continue
        if pod.meta.labels.get(KAI_UTILITY_APP_LABEL) in KAI_UTILITY_APP_VALUES:
            continue
        used = pod_amounts(pod)
        total = Amounts(total.cpu - used.cpu, total.memory - used.memory, total.gpu - used.gpu)
    return total


def kai_requests(
    pods: Iterable[Any], min_gpu_memory_mib: Optional[float] = None, scheduler_name: str = KAI_SCHEDULER_NAME
) -> tuple[dict[str, Amounts], list[str]]:
    """Each queue's own request (allocated and pending KAI pods by their queue label), and notes."""
    requests: dict[str, Amounts] = {}
    unlabelled = 0
    for pod in (read_pod(p) for p in pods if isinstance(p, dict)):
        if pod.scheduler_name != scheduler_name or pod.meta.deleting:
            continue
        pending = pod.phase == "Pending" and not pod.bound
        if pod.phase not in ("Running", "Pending") or (pending and pod.spec.get("schedulingGates")):
            continue
        queue = pod.meta.label(KAI_QUEUE_LABEL)
        if not queue:
            unlabelled += 1
            continue
        requests[queue] = requests.get(queue, Amounts()).plus(pod_amounts(pod, min_gpu_memory_mib))
    notes = []
    if unlabelled:
        notes.append(f"{unlabelled} {scheduler_name} pods have no {KAI_QUEUE_LABEL} label: not counted")
    return requests, notes


def kai_allocated(pods: Iterable[Any], min_gpu_memory_mib: Optional[float] = None,
                  scheduler_name: str = KAI_SCHEDULER_NAME) -> dict[str, Amounts]:
    """Each queue's allocation as KAI's `status.allocated` counts it, for a Queue that has none written: its pods
    bound to a node and not finished (being deleted included: KAI counts Releasing pods as allocated until they
    go), by their queue label. Unlike `kai_requests`, no pending pod."""
    allocated: dict[str, Amounts] = {}
    for pod in (read_pod(p) for p in pods if isinstance(p, dict)):
        queue = pod.meta.label(KAI_QUEUE_LABEL)
        if pod.scheduler_name != scheduler_name or not _active_on_node(pod) or not queue:
            continue
        allocated[queue] = allocated.get(queue, Amounts()).plus(pod_amounts(pod, min_gpu_memory_mib))
    return allocated
