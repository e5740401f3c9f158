"""Where a job that Kueue's MultiKueue dispatches runs, in words: for `status`, and for the commands that would reach
its Ray cluster from the manager.

Why it exists: in a MultiKueue manager the RayJob (or RayCluster) is a record. Kueue copies it to a worker cluster,
where KubeRay runs it, and copies its status back (kueue@v0.17.0 pkg/controller/jobs/rayjob/rayjob_multikueue_adapter.go
copyJobStatus), so the manager's copy names a Ray cluster and a dashboard that exist only in the worker. `status`
must say so rather than point at `raybridge dashboard` here, and `logs`, `stop` and `dashboard` must say where to
run them rather than fail to find a head pod.

What it does not do: reach the worker (raybridge holds no kubeconfig of it: the MultiKueueCluster's Secret is
Kueue's), or judge a queue before submit (jobs/preflight.py does).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from raybridge.core.kubeobjects import as_dict
from raybridge.core.views import read_meta
from raybridge.kueue.names import MULTIKUEUE_CONTROLLER
from raybridge.kueue.workload import Workload

__all__ = ["dispatched_by_multikueue", "elsewhere_refusal", "where_it_runs"]


def dispatched_by_multikueue(ray_object: Mapping[str, Any]) -> bool:
    """Whether Kueue's MultiKueue runs this RayJob or RayCluster in a worker cluster (its `spec.managedBy`)."""
    return as_dict(ray_object.get("spec")).get("managedBy") == MULTIKUEUE_CONTROLLER


def where_it_runs(workload: Optional[Workload]) -> str:
    """The worker cluster in words: the MultiKueueCluster its Workload names, or that none is chosen yet."""
    cluster = workload.cluster_name if workload is not None else ""
    return f"worker cluster {cluster} (MultiKueueCluster {cluster})" if cluster else "a worker cluster, once Kueue's MultiKueue dispatches it"


def elsewhere_refusal(ray_object: Mapping[str, Any], workload: Optional[Workload], command: str) -> Optional[str]:
    """Why `raybridge COMMAND NAME` cannot reach a dispatched job's Ray cluster from this cluster, None for a job
    this cluster runs."""
    if not dispatched_by_multikueue(ray_object):
        return None
    meta = read_meta(ray_object)
    kind = str(ray_object.get("kind") or "RayJob")
    return (
        f"{kind} {meta.namespace}/{meta.name} runs in {where_it_runs(workload)}: Kueue's MultiKueue copies it there "
        f"(spec.managedBy {MULTIKUEUE_CONTROLLER}) and only its status back here, so its Ray cluster, dashboard and logs "
        f"are not in this cluster; run `raybridge {command} {meta.name} -n {meta.namespace}` with that cluster's kubeconfig "
        f"(`raybridge delete {meta.name}` here removes it from both)"
    )
