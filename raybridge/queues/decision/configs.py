"""Kueue and KAI queue configs sized from the cluster's node pools.

Why this exists: an admin setting up queues for GPU nodes should start from the
real node pools, not a hand count. From Node JSON this groups the schedulable
nodes into pools per GPU vendor and model (plus the CPU-only nodes) and writes:

* Kueue: a ResourceFlavor per pool (nodeLabels from the nodes' own product
  label), ClusterQueues in one cohort whose nominal quotas add up to each pool,
  with borrowing limits, a LocalQueue per ClusterQueue, an AdmissionCheck with
  a ProvisioningRequestConfig so that a GPU workload is admitted only once the
  autoscaler has provisioned all of it, and the WorkloadPriorityClasses
  inference 125, build 100, interactive-preemptible 75 and train 50.
* KAI: a two-level Queue hierarchy, departments then projects, whose quotas
  add up to the cluster.

The one rule that shapes the Kueue output: Kueue assigns ONE flavor per pod set
and resource group (`flavorassigner.go`: all the covered resources a pod set
requests in a group are assigned together). So cpu and memory sit in the same
resource group as every vendor's GPU, and every flavor carries its own cpu and
memory quota (its nodes' allocatable) besides its GPUs; a flavor has quota 0
for the other vendor's GPU, so a GPU pod set falls through to the flavor of
its vendor. The CPU-only flavor, when there are CPU-only nodes, comes first so
that pod sets without GPUs (Ray heads) take it rather than a GPU pool's cpu.

Kueue API versions: `v1beta2` (Kueue 0.15 and later) or `v1beta1` (what
Kueue 0.13 and 0.14 serve); of the fields used here only the cohort differs
(`cohortName` vs `cohort`). The admission check is attached with
`admissionChecksStrategy`, which both versions accept.

What it deliberately does not do: read the cluster (the service does), apply
anything, or decide team sizes: quotas are split evenly, remainders to the
first queues, and the admin edits from there. Nodes that are not Ready, are
cordoned or carry a taint no pod tolerates are left out of the quotas, with a
note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Mapping, Optional, Sequence

from raybridge.autoscalers.provisioning_request import BEST_EFFORT_ATOMIC_CLASS as PROVISIONING_CLASS
from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.kai.names import KAI_QUEUE_API_VERSION
from raybridge.kueue.names import KUEUE_GROUP
from raybridge.kueue.api import NEWEST, VERSIONS, cohort_field
from raybridge.core.inventory import DeviceSources, inventory_from_nodes, product_label, unschedulable_reasons
from raybridge.core.views import Node, read_node
from raybridge.core.quantity import format_memory, parse_quantity

DEFAULT_COHORT = "gpu"
PROVISIONING_CHECK = "gpu-provisioning"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
CPU_FLAVOR = "cpu-nodes"
#: The Run:ai classes of seed 003: (name, value, preemptible, description).
PRIORITY_CLASSES: tuple[tuple[str, int, bool, str], ...] = (
    ("inference", 125, False, "Inference services: not preemptible."),
    ("build", 100, False, "Interactive builds and notebooks: not preemptible."),
    ("interactive-preemptible", 75, True, "Interactive work that may be preempted."),
    ("train", 50, True, "Training: preemptible, runs over quota when there is room."),
)
#: Classes below this are preemptible (Run:ai: >= 100 is not); borrowing workloads may only preempt those.
PREEMPTIBLE_BELOW = 100


@dataclass(frozen=True)
class NodePool:
    """Schedulable nodes with the same GPU vendor and model (vendor None: CPU-only nodes)."""

    vendor: Optional[str]
    model: Optional[str]
    #: The node label that names the model, and its value (None when the nodes carry none).
    label: Optional[tuple[str, str]]
    nodes: tuple[str, ...]
    gpus: int
    cpu_millicores: int
    memory_bytes: int
    #: The DeviceClasses that claim the pool's GPUs where its nodes publish them as DRA devices.
    device_classes: tuple[str, ...] = ()
    #: Told apart from an earlier pool whose name it would share ("-2"): two models spelled alike, or the same
    #: model read from a node label and from DRA devices on nodes without it.
    name_suffix: str = ""

    @property
    def resource_key(self) -> Optional[str]:
        return GPU_RESOURCE_KEYS.get(self.vendor) if self.vendor else None

    @property
    def flavor_name(self) -> str:
        if self.vendor is None:
            return CPU_FLAVOR
        if not self.model:
            return f"{self.vendor}-gpu"
        name = re.sub(r"[^a-z0-9]+", "-", self.model.lower()).strip("-")
        if not name.startswith(self.vendor):
            name = f"{self.vendor}-{name}"
        return name[: 63 - len(self.name_suffix)].rstrip("-") + self.name_suffix


@dataclass(frozen=True)
class Pools:
    pools: tuple[NodePool, ...]
    notes: tuple[str, ...] = ()

    @property
    def gpu_pools(self) -> tuple[NodePool, ...]:
        return tuple(p for p in self.pools if p.vendor)

    @property
    def cpu_pool(self) -> Optional[NodePool]:
        return next((p for p in self.pools if p.vendor is None), None)


def _allocatable(node: Node, key: str, notes: list[str]) -> Decimal:
    """The node's allocatable `key` (capacity when allocatable is absent); 0, with a note, when it is not a usable amount."""
    raw = node.allocatable.get(key, 0)
    try:
        amount = parse_quantity(raw)
    except (ValueError, TypeError):
        amount = None
    if amount is None or amount < 0:
        notes.append(f"node {node.name}: {key} {raw!r} is not a usable amount ({'negative' if amount is not None else 'not a quantity'}): counted as 0")
        return Decimal(0)
    return amount


def node_pools(nodes: Sequence[Any], devices: Optional[DeviceSources] = None) -> Pools:
    """Group the schedulable nodes by GPU vendor and model (their device-plugin GPUs and those they publish as DRA
    devices, `devices`, counted once); CPU-only nodes form one pool."""
    inventory = inventory_from_nodes(nodes, source="file", devices=devices)
    by_name: dict[str, Node] = {}
    for node in (read_node(n) for n in nodes if isinstance(n, dict)):
        by_name.setdefault(node.name, node)  # the first listing, as the inventory counts it
    notes = list(inventory.warnings)
    groups: dict[tuple[Optional[str], Optional[str], Optional[tuple[str, str]]], list[str]] = {}
    gpus: dict[tuple[Any, ...], int] = {}
    classes: dict[tuple[Any, ...], set[str]] = {}
    seen: set[str] = set()
    for entry in inventory.nodes:
        node = by_name.get(entry.name)
        if entry.vendor is None:
            reasons = unschedulable_reasons(node) if node is not None else ["unreadable"]
            if reasons:
                notes.append(f"node {entry.name} left out: {', '.join(reasons)}")
                continue
            key: tuple[Any, ...] = (None, None, None)
        else:
            if not entry.eligible:
                notes.append(f"node {entry.name} ({entry.gpus} {entry.resource_key}) left out: {', '.join(entry.reasons)}")
                continue
            key = (entry.vendor, entry.model, product_label(node.meta.labels if node is not None else {}, entry.vendor))
        if entry.name in seen:
            notes.append(f"node {entry.name} has GPUs of two vendors: its cpu and memory count in its first pool only")
        seen.add(entry.name)
        groups.setdefault(key, []).append(entry.name)
        gpus[key] = gpus.get(key, 0) + entry.gpus
        if entry.device_class:
            classes.setdefault(key, set()).add(entry.device_class)
    pools = []
    placed: set[str] = set()
    for key, names in groups.items():
        vendor, model, label = key
        first_pool_nodes = [n for n in names if n not in placed]
        placed.update(names)
        pool = NodePool(
            vendor=vendor,
            model=model,
            label=label,
            nodes=tuple(sorted(names)),
            gpus=gpus[key],
            cpu_millicores=int(sum(_allocatable(by_name[n], "cpu", notes) for n in first_pool_nodes) * 1000),
            memory_bytes=int(sum(_allocatable(by_name[n], "memory", notes) for n in first_pool_nodes)),
            device_classes=tuple(sorted(classes.get(key, ()))),
        )
        if vendor and label is None:
            notes.append(
                f"{vendor} nodes {', '.join(pool.nodes)} have no GPU product label: flavor {pool.flavor_name} "
                "has no nodeLabels and matches any node"
            )
        pools.append(pool)
    pools.sort(key=lambda p: (p.vendor is not None, p.vendor or "", p.model or ""))
    return Pools(_distinct_names(pools), tuple(notes))


def _distinct_names(pools: list[NodePool]) -> tuple[NodePool, ...]:
    """The pools, each flavor name used once (a ResourceFlavor is one object per name): "-2", "-3" after the first."""
    taken: set[str] = set()
    named = []
    for pool in pools:
        count = 1
        while pool.flavor_name in taken:
            count += 1
            pool = replace(pool, name_suffix=f"-{count}")
        taken.add(pool.flavor_name)
        named.append(pool)
    return tuple(named)


# --- splitting ----------------------------------------------------------------------------


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` in `parts` whole shares that add up to it, the remainder to the first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def format_cpu_millicores(millicores: int) -> str:
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def _memory(num_bytes: int) -> str:
    return format_memory(Decimal(num_bytes)) if num_bytes else "0"


# --- Kueue --------------------------------------------------------------------------------


@dataclass(frozen=True)
class KueueOptions:
    names: tuple[str, ...] = ("team-1", "team-2")
    cohort: str = DEFAULT_COHORT
    api_version: str = NEWEST
    #: How much of the other queues' nominal quota a queue may borrow, in percent.
    borrowing_percent: int = 100
    provisioning: bool = True
    namespaces: bool = True


def kueue_configs(pools: Pools, options: KueueOptions) -> list[dict[str, Any]]:
    """Namespaces, ResourceFlavors, WorkloadPriorityClasses, the admission check, ClusterQueues, LocalQueues."""
    if options.api_version not in VERSIONS:
        raise ValueError(f"unknown Kueue API version {options.api_version!r}")
    if not pools.gpu_pools:
        raise ValueError("no schedulable GPU nodes: nothing to size GPU queues from")
    api = f"{KUEUE_GROUP}/{options.api_version}"
    flavors = ([pools.cpu_pool] if pools.cpu_pool else []) + list(pools.gpu_pools)
    gpu_keys = sorted({p.resource_key for p in pools.gpu_pools if p.resource_key})
    covered = ["cpu", "memory", *gpu_keys]
    objects: list[dict[str, Any]] = []
    if options.namespaces:
        objects += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in options.names]
    objects += [_resource_flavor(api, pool) for pool in flavors]
    objects += _priority_classes(api)
    if options.provisioning:
        objects += _provisioning_check(api, gpu_keys)
    splits = _nominal_splits(flavors, covered, len(options.names))
    for index, name in enumerate(options.names):
        flavor_entries = [_flavor_quotas(pool, covered, splits, index, options.borrowing_percent) for pool in flavors]
        spec = _cluster_queue_spec(pools, options, covered, flavor_entries)
        objects.append({"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    for name in options.names:
        objects.append(
            {"apiVersion": api, "kind": "LocalQueue", "metadata": {"name": name, "namespace": name}, "spec": {"clusterQueue": name}}
        )
    return objects


def _resource_flavor(api: str, pool: NodePool) -> dict[str, Any]:
    """A pool's ResourceFlavor, pinned to its nodes by their own model label when they carry one."""
    spec: dict[str, Any] = {}
    if pool.label:
        spec["nodeLabels"] = {pool.label[0]: pool.label[1]}
    return {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": pool.flavor_name}, "spec": spec}


def _priority_classes(api: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": api, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value, "description": description}
        for name, value, _preemptible, description in PRIORITY_CLASSES
    ]


def _provisioning_check(api: str, gpu_keys: Sequence[str]) -> list[dict[str, Any]]:
    """The ProvisioningRequestConfig and the AdmissionCheck that uses it, for the GPU resources."""
    return [
        {
            "apiVersion": api,
            "kind": "ProvisioningRequestConfig",
            "metadata": {"name": PROVISIONING_CHECK},
            "spec": {"provisioningClassName": PROVISIONING_CLASS, "managedResources": gpu_keys},
        },
        {
            "apiVersion": api,
            "kind": "AdmissionCheck",
            "metadata": {"name": PROVISIONING_CHECK},
            "spec": {
                "controllerName": PROVISIONING_CONTROLLER,
                "parameters": {"apiGroup": KUEUE_GROUP, "kind": "ProvisioningRequestConfig", "name": PROVISIONING_CHECK},
            },
        },
    ]


def _nominal_splits(flavors: Sequence[NodePool], covered: Sequence[str], count: int) -> dict[tuple[str, str], list[int]]:
    """Per (flavor, resource): the pool's amount split evenly among the `count` queues."""
    return {
        (pool.flavor_name, resource): split_evenly(amount, count)
        for pool in flavors
        for resource, amount in _pool_amounts(pool, covered).items()
    }


def _flavor_quotas(
    pool: NodePool,
    covered: Sequence[str],
    splits: Mapping[tuple[str, str], list[int]],
    index: int,
    borrowing_percent: int,
) -> dict[str, Any]:
    """Queue `index`'s nominal quota of one flavor, and what it may borrow of the others' share."""
    resources = []
    for resource in covered:
        shares = splits[(pool.flavor_name, resource)]
        nominal = shares[index]
        others = sum(shares) - nominal
        borrow = others * borrowing_percent // 100
        resources.append(
            {
                "name": resource,
                "nominalQuota": _format(resource, nominal),
                "borrowingLimit": _format(resource, borrow),
            }
        )
    return {"name": pool.flavor_name, "resources": resources}


def _cluster_queue_spec(
    pools: Pools, options: KueueOptions, covered: list[str], flavor_entries: list[dict[str, Any]]
) -> dict[str, Any]:
    """A ClusterQueue's spec: cohort, preemption, one resource group, the admission check on GPU flavors."""
    spec: dict[str, Any] = {
        cohort_field(options.api_version): options.cohort,
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": PREEMPTIBLE_BELOW - 1},
            "withinClusterQueue": "LowerPriority",
        },
        "resourceGroups": [{"coveredResources": covered, "flavors": flavor_entries}],
    }
    if options.provisioning:
        spec["admissionChecksStrategy"] = {
            "admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": [p.flavor_name for p in pools.gpu_pools]}]
        }
    return spec


def _pool_amounts(pool: NodePool, covered: Sequence[str]) -> dict[str, int]:
    amounts = {"cpu": pool.cpu_millicores, "memory": pool.memory_bytes}
    for key in covered[2:]:
        amounts[key] = pool.gpus if key == pool.resource_key else 0
    return amounts


def _format(resource: str, amount: int) -> str:
    if resource == "cpu":
        return format_cpu_millicores(amount)
    if resource == "memory":
        return _memory(amount)
    return str(amount)


def resource_group_problems(cluster_queue: dict[str, Any]) -> list[str]:
    """The module's one rule, checked on any ClusterQueue: a resource group covering a GPU covers cpu and memory.

    Otherwise Kueue assigns a GPU pod set its cpu and memory from another
    group's flavor, the pods get both flavors' node labels, and no node has them
    all. Empty when the queue follows the rule.
    """
    name = (cluster_queue.get("metadata") or {}).get("name", "?")
    gpu_keys = set(GPU_RESOURCE_KEYS.values())
    problems = []
    for index, group in enumerate((cluster_queue.get("spec") or {}).get("resourceGroups") or []):
        covered = list(group.get("coveredResources") or [])
        gpus = [r for r in covered if r in gpu_keys]
        missing = [r for r in ("cpu", "memory") if r not in covered]
        if gpus and missing:
            problems.append(
                f"ClusterQueue {name} resourceGroups[{index}] covers {', '.join(gpus)} but not {' or '.join(missing)}: "
                "Kueue would take a GPU pod set's cpu and memory from another group's flavor"
            )
    return problems


def kueue_summary(pools: Pools, options: KueueOptions) -> list[str]:
    """Comment lines saying what the Kueue objects were sized from and how they behave."""
    lines = [f"pool {p.flavor_name}: {_pool_words(p)}" for p in ([pools.cpu_pool] if pools.cpu_pool else []) + list(pools.gpu_pools)]
    lines.append(
        f"{len(options.names)} ClusterQueues in cohort {options.cohort} ({', '.join(options.names)}) share each pool evenly; "
        f"each may borrow up to {options.borrowing_percent}% of the others' quota"
    )
    lines.append(
        "cpu and memory share one resource group with the GPUs: Kueue gives a pod set one flavor per group, "
        "so each flavor holds its own nodes' cpu and memory"
    )
    lines.append(
        f"priorities: {', '.join(f'{n} {v}' for n, v, _, _ in PRIORITY_CLASSES)}; Kueue has no per-class "
        f"'not preemptible': borrowing workloads preempt only classes below {PREEMPTIBLE_BELOW}, but reclaiming "
        "nominal quota and higher priorities in the same ClusterQueue may preempt any"
    )
    if options.provisioning:
        lines.append(
            f"GPU flavors carry the admission check {PROVISIONING_CHECK}: a workload is admitted once the "
            f"autoscaler has provisioned all of it ({PROVISIONING_CLASS})"
        )
    mappings = device_class_mappings(pools)
    if mappings:
        shown = ", ".join(f"{{name: {m['name']}, deviceClassNames: [{', '.join(m['deviceClassNames'])}]}}" for m in mappings)
        lines.append(
            "GPUs published as DRA devices count against the same quotas once Kueue's Configuration maps their DeviceClass "
            f"to the quota's resource (Kueue v0.18 or later): resources: {{deviceClassMappings: [{shown}]}}, in the ConfigMap "
            "kueue-system/kueue-manager-config (key controller_manager_config.yaml)"
        )
    return lines + list(pools.notes)


def device_class_mappings(pools: Pools) -> list[dict[str, Any]]:
    """Kueue's `resources.deviceClassMappings` for the pools' DRA GPUs: each vendor's DeviceClasses counted as its
    device-plugin resource, so one ClusterQueue quota covers a vendor's GPUs however its pods ask for them
    (kueue@v0.19.2 apis/config/v1beta2 DeviceClassMapping)."""
    by_key: dict[str, set[str]] = {}
    for pool in pools.gpu_pools:
        if pool.resource_key and pool.device_classes:
            by_key.setdefault(pool.resource_key, set()).update(pool.device_classes)
    return [{"name": key, "deviceClassNames": sorted(classes)} for key, classes in sorted(by_key.items())]


def _pool_words(pool: NodePool) -> str:
    what = f"{pool.gpus} {pool.resource_key}, " if pool.vendor else ""
    return (
        f"{what}{format_cpu_millicores(pool.cpu_millicores)} cpu, {_memory(pool.memory_bytes)} memory "
        f"on {len(pool.nodes)} node{'s' if len(pool.nodes) != 1 else ''} ({', '.join(pool.nodes)})"
    )


# --- KAI ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KaiOptions:
    departments: tuple[str, ...] = ("department-1",)
    projects_per_department: int = 2


def kai_project_names(department: str, count: int) -> list[str]:
    return [f"{department}-project-{i + 1}" for i in range(count)]


def kai_configs(pools: Pools, options: KaiOptions) -> list[dict[str, Any]]:
    """Departments splitting the cluster, projects splitting their department; quotas add up."""
    if not pools.pools:
        raise ValueError("no schedulable nodes: nothing to size queues from")
    totals = {
        "gpu": sum(p.gpus for p in pools.pools),
        "cpu": sum(p.cpu_millicores for p in pools.pools),
        "memory": sum(p.memory_bytes for p in pools.pools) // 10**6,
    }
    objects: list[dict[str, Any]] = []
    department_shares = {r: split_evenly(v, len(options.departments)) for r, v in totals.items()}
    for d_index, department in enumerate(options.departments):
        mine = {r: department_shares[r][d_index] for r in totals}
        objects.append(_kai_queue(department, None, mine))
        project_shares = {r: split_evenly(v, options.projects_per_department) for r, v in mine.items()}
        for p_index, project in enumerate(kai_project_names(department, options.projects_per_department)):
            objects.append(_kai_queue(project, department, {r: project_shares[r][p_index] for r in totals}))
    return objects


def _kai_queue(name: str, parent: Optional[str], quotas: dict[str, int]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentQueue"] = parent
    spec["resources"] = {r: {"quota": quotas[r], "limit": -1, "overQuotaWeight": 1} for r in ("gpu", "cpu", "memory")}
    return {"apiVersion": KAI_QUEUE_API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def kai_summary(pools: Pools, options: KaiOptions) -> list[str]:
    gpus = sum(p.gpus for p in pools.pools)
    lines = [f"pool {p.flavor_name}: {_pool_words(p)}" for p in pools.pools]
    lines.append(
        f"{len(options.departments)} departments share the cluster's {gpus} GPUs, cpu (millicores) and memory (MB) "
        f"evenly, and {options.projects_per_department} projects share each department's quota"
    )
    lines.append(
        "KAI counts amd.com/gpu and nvidia.com/gpu as one gpu resource and does not bind queues to node pools"
    )
    lines.append(
        "limit: -1 (no limit) everywhere: KAI reads an unset limit as 0 and then grants not even the quota"
    )
    return lines + list(pools.notes)


