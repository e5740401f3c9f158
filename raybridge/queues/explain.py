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
hands it to the pure explainers (`raybridge.queues.decision.kueue_explain.explain_kueue`,
`raybridge.queues.decision.kai_explain.explain_kai`).

It returns data (`Explanation`, whose `to_dict()` carries the facts as
fields and `lines()` the same facts in words) and never prints. A read the
user may not make (403) or a kind the cluster does not serve (404) leaves
that part unknown with a warning rather than failing the whole answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from raybridge.kueue.workload import cluster_queue_name, workload_view
from raybridge.queues.decision.kueue_explain import KueueExplanation, explain_kueue
from raybridge.kai.names import KAI_SCHEDULER_NAME
from raybridge.kai.fairshare import Amounts
from raybridge.kai.pod_group import PodGroup, pod_group_name, read_pod_group
from raybridge.queues.decision.kai_explain import KaiExplanation, explain_kai
from raybridge.kueue.fit import cohort_of
from raybridge.core.views import Pod, read_meta, read_pod
from raybridge.errors import BadInput
from raybridge.kube.client import Kube
from raybridge.queues.explain_sources import ClusterObjects, ExplainObjects


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


def explain(source: "Kube | ExplainObjects", name: str) -> Explanation:
    """Explain the RayJob, RayCluster, PodGroup or Pod called `name` in the source's namespace.

    `source` is a connected `Kube` (the cluster) or any `ExplainObjects` (files, for one).
    """
    objects: ExplainObjects = ClusterObjects(source) if isinstance(source, Kube) else source
    namespace = objects.namespace
    for kind in ("RayJob", "RayCluster"):
        obj = objects.ray_object(kind, name)
        if obj is not None:
            warnings: list[str] = []
            return Explanation(kind, name, namespace, kueue=kueue_explanation(objects, obj, warnings), warnings=tuple(warnings))
    pod_group = objects.pod_group(name)
    if pod_group is not None:
        warnings = []
        return Explanation("PodGroup", name, namespace, kai=kai_explanation(objects, None, read_pod_group(pod_group), warnings),
                           warnings=tuple(warnings))
    found = objects.pod(name)
    if found is not None:
        pod = read_pod(found)
        scheduler = pod.scheduler_name
        if scheduler != KAI_SCHEDULER_NAME and not pod_group_name(pod):
            raise BadInput(
                f"pod {namespace}/{name} is scheduled by {scheduler}, not {KAI_SCHEDULER_NAME}: explain covers "
                "RayJobs and RayClusters queued by Kueue, and KAI pods and PodGroups"
            )
        warnings = []
        return Explanation("Pod", name, namespace, kai=kai_explanation(objects, pod, None, warnings), warnings=tuple(warnings))
    raise BadInput(f"no RayJob, RayCluster, PodGroup or Pod named {name!r} in namespace {namespace}{objects.where}")


# --- Kueue ------------------------------------------------------------------------------------------


def kueue_explanation(objects: ExplainObjects, obj: dict[str, Any], warnings: Optional[list[str]] = None) -> KueueExplanation:
    """The Kueue picture of a RayJob/RayCluster: Workload, queues, cohort, flavors, nodes, checks, position."""
    warnings = warnings if warnings is not None else []
    workload = workload_view(objects.workload(obj))
    position = cq = cq_name = None
    members: Optional[list[dict[str, Any]]] = None
    cohorts: Optional[list[dict[str, Any]]] = []
    flavors: Optional[dict[str, dict[str, Any]]] = None
    nodes = requests = holders = None
    if workload is not None:
        lq_name = workload.queue_name
        if workload.state == "pending" and lq_name:
            position = objects.pending_position(lq_name, workload.meta.name)
        local_queue = objects.local_queue(lq_name) if lq_name else None
        cq_name = cluster_queue_name(workload, local_queue)
        cq = objects.cluster_queue(cq_name) if cq_name else None
        if cq is None and cq_name:
            warnings.append(f"{objects.missing(f'ClusterQueue {cq_name}', one=True)}: its quota is not shown")
        if cq is not None:
            cohort = cohort_of(cq)
            if cohort:
                members = objects.kueue_objects("ClusterQueue")
                cohorts = objects.kueue_objects("Cohort")
                unread = [what for what, got in (("ClusterQueues", members), ("Cohorts", cohorts)) if got is None]
                if unread:
                    warnings.append(f"{objects.missing(' and '.join(unread))}: what cohort {cohort} can lend is unknown")
            listed_flavors = objects.kueue_objects("ResourceFlavor")
            if listed_flavors is None:
                warnings.append(f"{objects.missing('ResourceFlavors')}: node sizes per flavor are not checked")
            else:
                flavors = {read_meta(f).name: f for f in listed_flavors}
            nodes = objects.nodes()
            if nodes is None:
                warnings.append(f"{objects.missing('nodes')}: whether one pod fits the largest node is not checked")
        if workload.state == "pending" and cq is not None:
            holders = objects.kueue_objects("Workload")
            if holders is None:
                warnings.append(f"{objects.missing('Workloads')}: who holds the quota it waits for is not shown")
        if workload.admission_checks:
            requests = objects.provisioning_requests()
            if requests is None:
                warnings.append(f"{objects.missing('ProvisioningRequests')}: the autoscaler's answer is not shown")
    return explain_kueue(
        obj, workload, position, cq, cq_name,
        cohort_members=members if cq is None or cohort_of(cq) else [], cohorts=cohorts, flavors=flavors, nodes=nodes,
        provisioning_requests=requests, holders=holders,
    )  # fmt: skip


# --- KAI --------------------------------------------------------------------------------------------


def kai_explanation(
    objects: ExplainObjects, pod: Optional[Pod], pod_group: Optional[PodGroup], warnings: Optional[list[str]] = None
) -> KaiExplanation:
    """The KAI picture of a pod or a PodGroup: its conditions, its queue chain, fair shares and allocations."""
    from raybridge.core.inventory import inventory_from_nodes
    from raybridge.kai.queue import kai_allocated, read_kai_queue
    from raybridge.queues.fairshare import objects_fair_share

    warnings = warnings if warnings is not None else []
    if pod is not None and pod_group is None and pod_group_name(pod):
        found = objects.pod_group(pod_group_name(pod) or "")
        pod_group = read_pod_group(found) if found is not None else None
    queues = objects.kai_queues()
    if queues is None:
        warnings.append(objects.kai_problem() or objects.missing("KAI Queues"))
        queues = []
    result = None
    allocations: Optional[dict[str, Amounts]] = None
    if queues:
        nodes = objects.nodes()
        pods = objects.pods()
        if nodes is None:
            warnings.append(f"{objects.missing('nodes')}: the fair shares are not computed")
        else:
            report = objects_fair_share(queues, nodes, pods)
            result = report.result
            warnings.extend(report.warnings)
        if pods is not None:
            memories = [n.memory_mib for n in inventory_from_nodes(nodes or []).nodes if n.memory_mib]
            allocations = kai_allocated(pods, min(memories) if memories else None)
    return explain_kai(objects.namespace, pod, pod_group, [read_kai_queue(q) for q in queues], result, allocations)
