"""The one reader of the Kubernetes facts every domain reads: a pod's requests, times, usage of a queue.

Why it exists: jobs (Kueue's view of a RayJob's pod sets), Kueue's and KAI's queues and the
node-scale-adjuster all read the same fields of the same objects, and each must count them
alike (init containers and limits included, a ClusterQueue's usage from one field), so each
fact is read here once.

Objects come from files users wrote, from `kubectl get -o json` and from the API server, so
every reader takes what it can and never raises on a field of the wrong shape; what a
malformed amount means (none) is decided here, not by each caller.

It deliberately does not say what the facts mean for a decision (whether a job fits, how many
GPUs a pod shares): that is each domain's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from decimal import Decimal
from functools import lru_cache
from typing import Any, Callable, Optional, TypeVar

from raybridge.core.quantity import parse_quantity

#: Longest timestamp text read (RFC 3339 with nanoseconds and an offset is 35 characters).
MAX_TIME_TEXT = 40
#: Resources that pod-level `spec.resources` may set (kubernetes@v1.33 PodLevelResources).
_POD_LEVEL = ("cpu", "memory")


def as_dict(value: Any) -> dict[str, Any]:
    """`value` if it is a mapping, else an empty one: a field of the wrong type reads as absent."""
    if type(value) is dict:  # the common case first: parsed JSON and YAML
        return value
    return dict(value) if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """`value` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def owned_by(obj: Any, uid: Any) -> bool:
    """Whether the object's owner references name the object with this uid."""
    return any(as_dict(r).get("uid") == uid for r in as_list(as_dict(as_dict(obj).get("metadata")).get("ownerReferences")))


def quantity_or_none(value: Any) -> Optional[Decimal]:
    """A quantity in base units, or None when absent or malformed (the API server refuses those)."""
    if value is None:
        return None
    if type(value) is str:
        return _text_quantity(value)
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


@lru_cache(maxsize=4096)
def _text_quantity(text: str) -> Optional[Decimal]:
    """Quantities repeat ("1", "8Gi", "500m"): each text is parsed once."""
    try:
        return parse_quantity(text)
    except (ValueError, TypeError):
        return None


def parse_rfc3339(value: Any) -> Optional[datetime]:
    """An RFC 3339 timestamp (or a datetime, as YAML reads an unquoted one) as an aware datetime, or None."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str) or not value or len(value) > MAX_TIME_TEXT or not value.isascii():
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def container_requests(container: Any) -> dict[str, Decimal]:
    """One container's requests; a resource with a limit and no request requests its limit.

    The API server defaults a missing request to the limit (kubernetes@v1.33 pkg/apis/core/v1/defaults.go
    SetDefaults_Container... `setDefaultResources`), and Kueue does the same for pod sets
    too: objects read before defaulting
    (files a user wrote) count as they will once created. (kueue@v0.15.8 pkg/workload/resources.go
    UseLimitsAsMissingRequestsInPod.)
    """
    resources = as_dict(as_dict(container).get("resources"))
    merged = {**as_dict(resources.get("limits")), **as_dict(resources.get("requests"))}
    out: dict[str, Decimal] = {}
    for name, raw in merged.items():
        amount = quantity_or_none(raw)
        if amount is not None and amount > 0:
            out[str(name)] = amount
    return out


Amount = TypeVar("Amount", int, Decimal)


def aggregate_containers(spec: Mapping[str, Any], per_container: Callable[[Any], Mapping[str, Amount]]) -> dict[str, Amount]:
    """The containers' amounts (`per_container` of each) as kube-scheduler totals them for a pod, the one rule for
    every reader (kubernetes@v1.33 component-helpers/resource/helpers.go AggregateContainerRequests): the
    containers' sum; restartable init containers (sidecars, `restartPolicy: Always`) run beside them and add to
    it; each other init container runs alone with the sidecars started before it, and the pod needs the largest
    of those."""
    total: dict[str, Amount] = {}
    for container in as_list(spec.get("containers")):
        for name, amount in per_container(container).items():
            total[name] = total.get(name, 0) + amount  # type: ignore[assignment]
    sidecars: dict[str, Amount] = {}
    peak: dict[str, Amount] = {}
    for container in as_list(spec.get("initContainers")):
        requests = per_container(container)
        if as_dict(container).get("restartPolicy") == "Always":
            for name, amount in requests.items():
                total[name] = total.get(name, 0) + amount  # type: ignore[assignment]
                sidecars[name] = sidecars.get(name, 0) + amount  # type: ignore[assignment]
            running = dict(sidecars)
        else:
            running = {name: sidecars.get(name, 0) + requests.get(name, 0) for name in set(sidecars) | set(requests)}  # type: ignore[misc]
        for name, amount in running.items():
            peak[name] = max(peak.get(name, 0), amount)  # type: ignore[type-var]
    for name, amount in peak.items():
        total[name] = max(total.get(name, 0), amount)  # type: ignore[type-var]
    return total


def pod_requests(spec: Any) -> dict[str, Decimal]:
    """What a pod asks of a node, by resource, in base units, as the scheduler and the autoscaler count it.

    kubernetes@v1.33 staging/src/k8s.io/component-helpers/resource/helpers.go (PodRequests,
    AggregateContainerRequests): the containers' sum; restartable init containers (sidecars) run beside
    them and add to it; each other init container runs alone with the sidecars started before it, and the
    pod needs the largest of those; pod-level requests (cpu, memory) replace the containers' where set;
    the RuntimeClass overhead is added. Kueue's pod-set totals call that same function
    (kueue@v0.15.8 pkg/workload/workload.go totalRequestsFromPodSets, after UseLimitsAsMissingRequestsInPod).
    """
    spec = as_dict(spec)
    total = aggregate_containers(spec, container_requests)
    pod_level = as_dict(as_dict(spec.get("resources")).get("requests"))
    for name, raw in pod_level.items():
        amount = quantity_or_none(raw)
        if amount is not None and (name in _POD_LEVEL or str(name).startswith("hugepages-")):
            total[str(name)] = amount
    for name, raw in as_dict(spec.get("overhead")).items():
        amount = quantity_or_none(raw)
        if amount is not None and amount > 0:
            total[str(name)] = total.get(str(name), Decimal(0)) + amount
    return {name: amount for name, amount in total.items() if amount > 0}


def cluster_queue_usage(cluster_queue: Any) -> dict[tuple[str, str], Decimal]:
    """(flavor, resource) -> the quota a ClusterQueue has reserved.

    What counts against a ClusterQueue's quota when Kueue admits is the quota reserved by its workloads,
    admitted or not yet (kueue@v0.15.8 pkg/cache/scheduler/clusterqueue.go updateWorkloadUsage), reported as
    `status.flavorsReservation` (pkg/controller/core/clusterqueue_controller.go: ReservedResources);
    `flavorsUsage` counts admitted workloads only (AdmittedResources), so it is read only where an object
    carries no reservation.
    """
    status = as_dict(as_dict(cluster_queue).get("status"))
    flavors = as_list(status.get("flavorsReservation")) or as_list(status.get("flavorsUsage"))
    used: dict[tuple[str, str], Decimal] = {}
    for flavor in flavors:
        for res in as_list(as_dict(flavor).get("resources")):
            res = as_dict(res)
            amount = quantity_or_none(res.get("total"))
            if amount is not None:
                key = (str(as_dict(flavor).get("name")), str(res.get("name")))
                used[key] = used.get(key, Decimal(0)) + amount
    return used
