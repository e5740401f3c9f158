"""`explain NAME`: why a job or pod waits, from what the cluster says, for Kueue and for KAI.

The service behind `python -m raybridge explain` and behind the pending part of
`status`. It finds what NAME is, in this order: a RayJob, then a RayCluster
(raybridge's jobs, queued by Kueue), then a KAI PodGroup, then a Pod (a KAI
pod, with its PodGroup from the `pod-group-name` annotation), all in the
target namespace; the first that exists wins, and nothing by that name is bad
input. It reads what the explanation needs (the Workload, its queues, the
ClusterQueues and Cohort objects of its cohort tree, flavors, nodes and
ProvisioningRequests for Kueue; the PodGroup, the
Queues and the fair share on the live queues, nodes and pods for KAI) and
hands it to the pure explainers (`raybridge.queues.decision.kueue_workload.explain_kueue`,
`raybridge.queues.decision.kai_explain.explain_kai`).

It returns data (`Explanation`, whose `to_dict()` carries the facts as
fields and `lines()` the same facts in words) and never prints. A read the
user may not make (403) or a kind the cluster does not serve (404) leaves
that part unknown with a warning rather than failing the whole answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from raybridge.queues.decision.kueue_workload import KueueExplanation, explain_kueue, workload_state
from raybridge.core.consts import KAI_QUEUE_LABEL, KAI_SCHEDULER_NAME
from raybridge.queues.decision.fairshare import Amounts
from raybridge.queues.decision.kai_explain import KaiExplanation, explain_kai, pod_group_name
from raybridge.queues.decision.kueue_fit import cohort_of
from raybridge.errors import BadInput, InfraError
from raybridge.kube.client import Kube


@dataclass(frozen=True)
class Explanation:
    """Why NAME waits: what NAME turned out to be, and the Kueue or the KAI explanation."""

    kind: str  # RayJob | RayCluster | PodGroup | Pod
    name: str
    namespace: str
    kueue: Optional[KueueExplanation] = None
    kai: Optional[KaiExplanation] = None
    warnings: tuple[str, ...] = ()

    @property
    def scheduler(self) -> str:
        return "kueue" if self.kueue is not None else "kai"

    def to_dict(self) -> dict[str, Any]:
        details = self.kueue.to_dict() if self.kueue is not None else self.kai.to_dict() if self.kai is not None else {}
        return {
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "scheduler": self.scheduler,
            self.scheduler: details,
            "warnings": list(self.warnings),
        }

    def lines(self) -> list[str]:
        if self.kueue is not None:
            return self.kueue.lines()
        return self.kai.lines() if self.kai is not None else []


def explain(kube: Kube, name: str) -> Explanation:
    """Explain the RayJob, RayCluster, PodGroup or Pod called `name` in the target namespace."""
    from raybridge.kube.kai import get_pod, get_pod_group
    from raybridge.kube.rayapi import RayObjects

    namespace = kube.namespace
    rays = RayObjects(kube)
    for kind in ("RayJob", "RayCluster"):
        obj = rays.get(kind, name, namespace)
        if obj is not None:
            warnings: list[str] = []
            return Explanation(kind, name, namespace, kueue=kueue_explanation(kube, obj, warnings), warnings=tuple(warnings))
    pod_group = get_pod_group(kube, namespace, name)
    if pod_group is not None:
        warnings = []
        return Explanation("PodGroup", name, namespace, kai=kai_explanation(kube, None, pod_group, warnings), warnings=tuple(warnings))
    pod = get_pod(kube, namespace, name)
    if pod is not None:
        scheduler = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        if scheduler != KAI_SCHEDULER_NAME and not pod_group_name(pod):
            raise BadInput(
                f"pod {namespace}/{name} is scheduled by {scheduler}, not {KAI_SCHEDULER_NAME}: explain covers "
                "RayJobs and RayClusters queued by Kueue, and KAI pods and PodGroups"
            )
        warnings = []
        return Explanation("Pod", name, namespace, kai=kai_explanation(kube, pod, None, warnings), warnings=tuple(warnings))
    raise BadInput(f"no RayJob, RayCluster, PodGroup or Pod named {name!r} in namespace {namespace}")


# --- Kueue ------------------------------------------------------------------------------------------


def kueue_explanation(kube: Kube, obj: dict[str, Any], warnings: Optional[list[str]] = None) -> KueueExplanation:
    """The Kueue picture of a RayJob/RayCluster: Workload, queues, cohort, flavors, nodes, checks, position."""
    from raybridge.kube.kueue import (
        find_workload,
        get_cluster_queue,
        get_local_queue,
        list_cohorts,
        list_kueue_objects,
        pending_position,
        served_versions,
    )

    warnings = warnings if warnings is not None else []
    namespace = (obj.get("metadata") or {}).get("namespace") or kube.namespace
    workload = find_workload(kube, namespace, obj)
    position = cq = cq_name = None
    members: Optional[list[dict[str, Any]]] = None
    cohorts: Optional[list[dict[str, Any]]] = []
    flavors: Optional[dict[str, dict[str, Any]]] = None
    nodes = requests = None
    if workload is not None:
        lq_name = (workload.get("spec") or {}).get("queueName")
        pending = workload_state(workload) == "pending"
        if pending and lq_name:
            position = pending_position(kube, namespace, lq_name, workload["metadata"]["name"])
        local_queue = get_local_queue(kube, namespace, lq_name) if lq_name else None
        cq_name = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or (local_queue or {}).get("spec", {}).get("clusterQueue")
        cq = get_cluster_queue(kube, cq_name) if cq_name else None
        if cq is None and cq_name:
            warnings.append(f"ClusterQueue {cq_name} could not be read: its quota is not shown")
        if cq is not None:
            versions = served_versions(kube)
            cohort = cohort_of(cq)
            if cohort:
                members = list_kueue_objects(kube, versions, "clusterqueues")
                cohorts = list_cohorts(kube, versions)
                unread = [what for what, got in (("ClusterQueues", members), ("Cohorts", cohorts)) if got is None]
                if unread:
                    warnings.append(f"the {' and '.join(unread)} could not be listed: what cohort {cohort} can lend is unknown")
            listed_flavors = list_kueue_objects(kube, versions, "resourceflavors")
            if listed_flavors is None:
                warnings.append("ResourceFlavors could not be listed: node sizes per flavor are not checked")
            else:
                flavors = {str(f["metadata"]["name"]): f for f in listed_flavors}
            nodes = _nodes(kube, warnings)
        if (workload.get("status") or {}).get("admissionChecks"):
            from raybridge.kube.provisioning import list_provisioning_requests

            requests = list_provisioning_requests(kube, namespace)
            if requests is None:
                warnings.append("ProvisioningRequests could not be listed: the autoscaler's answer is not shown")
    return explain_kueue(
        obj, workload, position, cq, cq_name,
        cohort_members=members if cq is None or cohort_of(cq) else [], cohorts=cohorts, flavors=flavors, nodes=nodes,
        provisioning_requests=requests,
    )  # fmt: skip


def _nodes(kube: Kube, warnings: list[str]) -> Optional[list[dict[str, Any]]]:
    from raybridge.kube.client import list_nodes

    try:
        return list_nodes(kube)
    except InfraError as exc:
        if "permission denied" not in str(exc):
            raise
        warnings.append("nodes could not be listed: whether one pod fits the largest node is not checked")
        return None


# --- KAI --------------------------------------------------------------------------------------------


def kai_explanation(
    kube: Kube, pod: Optional[dict[str, Any]], pod_group: Optional[dict[str, Any]], warnings: Optional[list[str]] = None
) -> KaiExplanation:
    """The KAI picture of a pod or a PodGroup: its conditions, its queue chain, fair shares and allocations."""
    from raybridge.core.inventory import inventory_from_nodes
    from raybridge.queues.decision.kai_queue import pod_amounts
    from raybridge.kube.client import list_pods_all_namespaces
    from raybridge.kube.kai import get_pod_group, list_queues
    from raybridge.queues.fairshare import cluster_fair_share

    warnings = warnings if warnings is not None else []
    namespace = kube.namespace
    if pod is not None and pod_group is None and pod_group_name(pod):
        pod_group = get_pod_group(kube, namespace, pod_group_name(pod) or "")
    try:
        queues = list_queues(kube)
    except InfraError as exc:
        if "no scheduling.run.ai" not in str(exc) and "permission denied" not in str(exc):
            raise
        warnings.append(str(exc))
        queues = []
    result = None
    if queues:
        report = cluster_fair_share(kube)
        result = report.result
        warnings.extend(report.warnings)
    allocations: Optional[dict[str, Amounts]] = None
    pods = list_pods_all_namespaces(kube) if queues else None
    if pods is not None:
        from raybridge.kube.client import list_nodes

        memories = [n.memory_mib for n in inventory_from_nodes(list_nodes(kube)).nodes if n.memory_mib]
        allocations = {}
        for p in pods:
            spec, meta, status = p.get("spec") or {}, p.get("metadata") or {}, p.get("status") or {}
            queue = (meta.get("labels") or {}).get(KAI_QUEUE_LABEL)
            if spec.get("schedulerName") != KAI_SCHEDULER_NAME or not spec.get("nodeName") or not queue:
                continue
            if status.get("phase") not in ("Running", "Pending"):
                continue
            allocations[queue] = allocations.get(queue, Amounts()).plus(pod_amounts(p, min(memories) if memories else None))
    return explain_kai(namespace, pod, pod_group, queues, result, allocations)
