"""Whether Kueue could ever admit a workload, from its pod sets and the ClusterQueue's quota.

Kueue leaves a workload that can never fit pending forever (reason
`ExceedsMaxQuota`, or no flavor at all), so a user would wait out the whole
timeout. Before creating anything, raybridge asks this module and refuses at
once, with the arithmetic, when admission is impossible:

- a requested resource that no resource group of the ClusterQueue covers;
- a pod set asking for more of a resource than any one flavor could ever
  hold, or all pod sets together more than all flavors could;
- every flavor for a requested GPU pinned to node labels that no node has.

"Could ever hold" is Kueue's potential availability (`potentialAvailable`
in `pkg/cache/scheduler/resource_node.go`): the nominal quota plus what the
cohort can lend (each member lends `min(nominal, lendingLimit)`), capped by
the queue's `borrowingLimit`, assuming no usage. Only flat cohorts (named by
ClusterQueues) are counted; a quota that hierarchical Cohort objects add is
not, so the check errs towards "may fit" and never refuses what Kueue could
admit.

Pure: plain dicts in (the rendered object, ClusterQueues, ResourceFlavors,
Nodes), sentences out.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable, Mapping, Optional

from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.core.quantity import parse_quantity

_GPU_KEYS = frozenset(GPU_RESOURCE_KEYS.values())
_UNLIMITED = Decimal("Infinity")


@dataclass(frozen=True)
class PodSetRequest:
    """One pod set as Kueue counts it: `count` pods, each requesting `requests`."""

    name: str
    count: int
    requests: Mapping[str, Decimal]

    def total(self, resource: str) -> Decimal:
        return self.requests.get(resource, Decimal(0)) * self.count


def pod_requests(template: Optional[Mapping[str, Any]]) -> dict[str, Decimal]:
    """Requests of a pod template: sum of containers (requests, else limits), max with any init container."""
    spec = (template or {}).get("spec") or {}

    def of(container: Mapping[str, Any]) -> dict[str, Decimal]:
        res = container.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        out: dict[str, Decimal] = {}
        for name, value in merged.items():
            try:
                out[name] = parse_quantity(value)
            except (ValueError, TypeError):
                continue
        return out

    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, value in of(container).items():
            total[name] = total.get(name, Decimal(0)) + value
    for container in spec.get("initContainers") or []:
        for name, value in of(container).items():
            total[name] = max(total.get(name, Decimal(0)), value)
    return total


def ray_podsets(obj: Mapping[str, Any]) -> list[PodSetRequest]:
    """The pod sets Kueue builds for a RayJob or RayCluster: `head`, then one per worker group."""
    spec = obj.get("spec") or {}
    cluster = spec.get("rayClusterSpec") if obj.get("kind") == "RayJob" else spec
    cluster = cluster or {}
    podsets = [PodSetRequest("head", 1, pod_requests((cluster.get("headGroupSpec") or {}).get("template") or {}))]
    for group in cluster.get("workerGroupSpecs") or []:
        count = int(group.get("replicas") or 0) * int(group.get("numOfHosts") or 1)
        podsets.append(PodSetRequest(str(group.get("groupName")), count, pod_requests(group.get("template") or {})))
    return podsets


def _quantity(value: Any) -> Optional[Decimal]:
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


def _quotas(cq: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Optional[Decimal]]]:
    """(flavor, resource) -> {nominal, borrowingLimit, lendingLimit}."""
    out: dict[tuple[str, str], dict[str, Optional[Decimal]]] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                out[(str(flavor.get("name")), str(res.get("name")))] = {
                    "nominal": _quantity(res.get("nominalQuota")) or Decimal(0),
                    "borrowingLimit": _quantity(res.get("borrowingLimit")),
                    "lendingLimit": _quantity(res.get("lendingLimit")),
                }
    return out


def cohort_of(cq: Mapping[str, Any]) -> Optional[str]:
    """The cohort a ClusterQueue belongs to (`cohortName` in v1beta2, `cohort` in v1beta1)."""
    spec = cq.get("spec") or {}
    return spec.get("cohortName") or spec.get("cohort") or None


def potential_available(cq: Mapping[str, Any], cohort_members: Iterable[Mapping[str, Any]], flavor: str, resource: str) -> Decimal:
    """The most of `resource` in `flavor` this ClusterQueue could ever hold (no usage anywhere)."""
    own = _quotas(cq).get((flavor, resource))
    if own is None:
        return Decimal(0)
    nominal = own["nominal"] or Decimal(0)
    if not cohort_of(cq):
        return nominal
    lending = own["lendingLimit"]
    local = max(Decimal(0), nominal - lending) if lending is not None else Decimal(0)
    name = (cq.get("metadata") or {}).get("name")
    others = [m for m in cohort_members if (m.get("metadata") or {}).get("name") != name]
    lendable = Decimal(0)
    for member in [cq, *others]:  # the cohort's quota counts this queue's own lendable part too
        quota = _quotas(member).get((flavor, resource))
        if quota is None:
            continue
        member_nominal = quota["nominal"] or Decimal(0)
        member_lending = quota["lendingLimit"]
        lendable += min(member_nominal, member_lending) if member_lending is not None else member_nominal
    available = local + lendable
    if own["borrowingLimit"] is not None:
        available = min(available, nominal + own["borrowingLimit"])
    return available


def _flavor_has_nodes(flavor: Optional[Mapping[str, Any]], node_labels: Optional[list[Mapping[str, str]]]) -> bool:
    if flavor is None or node_labels is None:
        return True  # unknown: assume it may
    wanted = (flavor.get("spec") or {}).get("nodeLabels") or {}
    return any(all(labels.get(k) == v for k, v in wanted.items()) for labels in node_labels)


def _show(value: Decimal, resource: str) -> str:
    if value == _UNLIMITED:
        return "unlimited"
    if resource == "memory":
        gib = value / (1 << 30)
        return f"{gib.normalize():f}Gi" if gib == gib.to_integral_value() else f"{value.normalize():f} bytes"
    return f"{value.normalize():f}"


def admission_problems(
    podsets: list[PodSetRequest],
    cluster_queue: Mapping[str, Any],
    cohort_members: Iterable[Mapping[str, Any]] = (),
    flavors: Optional[Mapping[str, Mapping[str, Any]]] = None,
    nodes: Optional[list[Mapping[str, str]]] = None,
) -> list[str]:
    """Why Kueue could never admit these pod sets into `cluster_queue`; [] when it might.

    `cohort_members` are the other ClusterQueues of its cohort; `flavors` the
    ResourceFlavors by name and `nodes` the label sets of the Nodes, when known
    (None: not checked).
    """
    name = (cluster_queue.get("metadata") or {}).get("name", "?")
    members = list(cohort_members)
    quotas = _quotas(cluster_queue)
    flavors_of: dict[str, list[str]] = {}
    for flavor, resource in quotas:
        flavors_of.setdefault(resource, []).append(flavor)
    asked = sorted({r for ps in podsets for r, v in ps.requests.items() if v > 0 and ps.count > 0})
    problems: list[str] = []
    for resource in asked:
        candidates = flavors_of.get(resource)
        if not candidates:
            covered = ", ".join(sorted(flavors_of)) or "nothing"
            problems.append(f"ClusterQueue {name} does not cover {resource} (it covers {covered}): Kueue can never admit the job")
            continue
        usable = [f for f in candidates if resource not in _GPU_KEYS or _flavor_has_nodes((flavors or {}).get(f), nodes)]
        if not usable:
            labels = "; ".join(f"{f}: {((flavors or {}).get(f) or {}).get('spec', {}).get('nodeLabels')}" for f in candidates)
            problems.append(f"no node has the labels of any flavor that ClusterQueue {name} offers for {resource} ({labels})")
            continue
        capacity = {f: potential_available(cluster_queue, members, f, resource) for f in usable}
        biggest = max(capacity.values())
        total = sum((ps.total(resource) for ps in podsets), Decimal(0))
        where = ", ".join(f"flavor {f}: {_show(v, resource)}" for f, v in capacity.items())
        for ps in podsets:
            need = ps.total(resource)
            if need > biggest:
                problems.append(
                    f"pod set {ps.name} asks for {_show(need, resource)} {resource} ({ps.count} x {_show(ps.requests[resource], resource)}), "
                    f"more than ClusterQueue {name} can ever hold in one flavor ({where}; nominal quota plus what its cohort can lend)"
                )
        if total > sum(capacity.values()) and not any(ps.total(resource) > biggest for ps in podsets):
            problems.append(
                f"the job asks for {_show(total, resource)} {resource} in all, more than ClusterQueue {name} can ever hold "
                f"({where}; nominal quota plus what its cohort can lend)"
            )
    return problems
