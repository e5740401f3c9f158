"""KAI fair share on real inputs: Queue YAML and a capacity, or the live cluster.

The service behind `raybridge queues fairshare`, and what `explain` calls for a
KAI-queued pod: it gathers the queues, the capacity and the demand, checks
them, and hands them to the pure division (`raybridge.kai.fairshare`). It
returns data (`FairShareReport`); printing is the CLI's job.

Files are held to what the API server and KAI's webhook would accept (a bad
Queue, a missing parent or a parent cycle is bad input). The cluster is taken
as KAI takes it: a Queue without resources counts as all zeros, queues whose
parent is missing are left out with their children, pods of unknown queues
are ignored; each with a warning. It does not read KAI's historical usage
(Prometheus), so usage is 0 unless a caller passes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from raybridge.kai.names import KAI_SCHEDULER_NAME
from raybridge.kai.fairshare import DEFAULT_K_VALUE, Amounts, FairShareResult, QueueSpec, divide_fair_share, hierarchy_problems
from raybridge.kai.queue import (
    capacity_left_out,
    kai_capacity,
    kai_requests,
    parse_capacity,
    parse_demand,
    queue_objects,
    queue_specs,
)
from raybridge.errors import BadInput
from raybridge.files import read_json_or_yaml, read_yaml_documents


@dataclass(frozen=True)
class FairShareReport:
    """The division, where its inputs came from, and what was wrong in them."""

    result: FairShareResult
    source: str  # "file" or "cluster"
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = self.result.to_dict()
        data["source"] = self.source
        data["warnings"] = list(self.warnings)
        return data


def file_fair_share(
    queues_file: str,
    capacity: str,
    demand_file: Optional[str] = None,
    *,
    k_value: float = DEFAULT_K_VALUE,
) -> FairShareReport:
    """Fair shares of the Queues in a YAML file over `--capacity`, for the demand in a file (or unbounded)."""
    documents = read_yaml_documents(queues_file, "--queues")
    specs = queue_specs(queue_objects(documents), where=f"--queues {queues_file}")
    problems = hierarchy_problems(specs)
    if problems:
        raise BadInput(*(f"--queues {queues_file}: {p}" for p in problems))
    amounts = parse_capacity(capacity)
    demand = load_demand(demand_file, specs) if demand_file else None
    result = divide_fair_share(specs, amounts, demand, k_value=k_value)
    return FairShareReport(result, "file", tuple(_left_out_warning(capacity)))


def _left_out_warning(capacity: str) -> list[str]:
    missing = capacity_left_out(capacity)
    if not missing:
        return []
    return [
        f"--capacity names no {' or '.join(missing)}: taken as 0 (KAI still grants deserved quotas in full, "
        "so any quota there is noted as oversubscribed)"
    ]


def load_demand(path: str, specs: Sequence[QueueSpec]) -> dict[str, Amounts]:
    """A demand file: queue name -> requests in Kubernetes quantities; every queue must exist."""
    demand = parse_demand(read_json_or_yaml(path, "--demand"), where=f"--demand {path}")
    names = {s.name for s in specs}
    unknown = sorted(set(demand) - names)
    if unknown:
        raise BadInput(*(f"--demand {path}: queue {name} is not among the queues" for name in unknown))
    return demand


def cluster_fair_share(
    kube: Any,
    capacity: Optional[str] = None,
    demand_file: Optional[str] = None,
    *,
    scheduler_name: str = KAI_SCHEDULER_NAME,
    usage: Optional[Mapping[str, Amounts]] = None,
    k_value: float = DEFAULT_K_VALUE,
) -> FairShareReport:
    """Fair shares of the cluster's Queues.

    Capacity: `capacity` when given, else the allocatable of Ready nodes less
    active pods of other schedulers. Demand: `demand_file` when given, else
    the requests of the KAI pods by their queue label (unbounded when pods
    cannot be listed).
    """
    from raybridge.kube.objects import list_nodes, list_pods_all_namespaces
    from raybridge.kube.kai import list_queues

    queue_objects = list_queues(kube)
    pods = None
    nodes: list[dict[str, Any]] = []
    if capacity is None or demand_file is None:
        nodes = list_nodes(kube)
        pods = list_pods_all_namespaces(kube)
    return objects_fair_share(
        queue_objects, nodes, pods, capacity, demand_file, scheduler_name=scheduler_name, usage=usage, k_value=k_value
    )


def objects_fair_share(
    queue_objects: Sequence[Any],
    nodes: Sequence[dict[str, Any]],
    pods: Optional[Sequence[dict[str, Any]]],
    capacity: Optional[str] = None,
    demand_file: Optional[str] = None,
    *,
    scheduler_name: str = KAI_SCHEDULER_NAME,
    usage: Optional[Mapping[str, Amounts]] = None,
    k_value: float = DEFAULT_K_VALUE,
    source: str = "cluster",
) -> FairShareReport:
    """Fair shares of these Queues over these nodes, for these pods' requests (what `cluster_fair_share` hands on once it has read them).

    `pods` None means they could not be listed: the capacity then includes what other
    schedulers' pods use, and every queue wants without bound.
    """
    from raybridge.core.inventory import inventory_from_nodes

    warnings: list[str] = []
    specs = _cluster_specs(queue_objects, warnings)
    warnings.extend(f"{p}" for p in hierarchy_problems(specs))
    if capacity is not None:
        amounts = parse_capacity(capacity)
        warnings.extend(_left_out_warning(capacity))
    else:
        amounts = kai_capacity(list(nodes), list(pods or []), scheduler_name)
        if pods is None:
            warnings.append("no permission to list pods: the capacity includes what pods of other schedulers use")
    demand: Optional[dict[str, Amounts]]
    if demand_file is not None:
        demand = load_demand(demand_file, specs)
    elif pods is None:
        demand = None
        warnings.append("no permission to list pods: every queue is taken to want without bound")
    else:
        memories = [n.memory_mib for n in inventory_from_nodes(list(nodes)).nodes if n.memory_mib]
        demand, notes = kai_requests(list(pods), min(memories) if memories else None, scheduler_name)
        warnings.extend(notes)
        names = {s.name for s in specs}
        for queue in sorted(set(demand) - names):
            warnings.append(f"pods in queue {queue}, which does not exist, are not counted (KAI ignores them)")
    result = divide_fair_share(specs, amounts, demand, usage=usage, k_value=k_value)
    return FairShareReport(result, source, tuple(warnings))


def _cluster_specs(objects: Sequence[Any], warnings: list[str]) -> list[QueueSpec]:
    """The cluster's Queues as KAI reads them; one that cannot be read is left out with a warning."""
    specs: list[QueueSpec] = []
    for obj in objects:
        try:
            specs.extend(queue_specs([obj], where="cluster", strict=False))
        except BadInput as exc:
            warnings.extend(f"{p}: left out" for p in exc.problems)
    return specs
