"""status, logs, stop, delete, list: the objects raybridge created, after the fact.

Each command finds the RayJob (or RayCluster) by name in the namespace,
reads what it needs (Kueue Workload and queues for `status`, the Ray Job
API for `logs` and `stop`) and prints it. `list` shows what carries
raybridge's managed-by label.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

from raybridge.core.consts import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from raybridge.core.pending import explain, workload_state
from raybridge.errors import BadInput, InfraError
from raybridge.kube.client import Kube, connect
from raybridge.kube.kueue import find_workload, get_cluster_queue, get_local_queue, pending_position
from raybridge.kube.rayapi import RayObjects
from raybridge.output import progress, table


def _find(args: argparse.Namespace) -> tuple[Kube, RayObjects, dict[str, Any]]:
    kube = connect(args.kubeconfig, args.context, args.namespace)
    rays = RayObjects(kube)
    for kind in ("RayJob", "RayCluster"):
        obj = rays.get(kind, args.name, kube.namespace)
        if obj is not None:
            return kube, rays, obj
    raise BadInput(f"no RayJob or RayCluster named {args.name!r} in namespace {kube.namespace}")


def job_status(args: argparse.Namespace) -> dict[str, Any]:
    kube, _, obj = _find(args)
    namespace = kube.namespace
    workload = find_workload(kube, namespace, obj)
    position = cq = cq_name = None
    if workload is not None:
        lq_name = workload["spec"].get("queueName")
        if workload_state(workload) == "pending" and lq_name:
            position = pending_position(kube, namespace, lq_name, workload["metadata"]["name"])
        local_queue = get_local_queue(kube, namespace, lq_name) if lq_name else None
        cq_name = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or (local_queue or {}).get("spec", {}).get("clusterQueue")
        cq = get_cluster_queue(kube, cq_name) if cq_name else None
    status = obj.get("status") or {}
    return {
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "namespace": namespace,
        "jobDeploymentStatus": status.get("jobDeploymentStatus"),
        "jobStatus": status.get("jobStatus"),
        "jobId": status.get("jobId") or obj.get("spec", {}).get("jobId"),
        "workload": (workload or {}).get("metadata", {}).get("name"),
        "queueState": workload_state(workload),
        "position": position,
        "explanation": explain(obj, workload, position, cq, cq_name),
    }


def _jobs_for(args: argparse.Namespace, kube: Kube, obj: dict[str, Any]) -> tuple[Any, Optional[Any], str]:
    from raybridge.launch.kube_run import connect_dashboard
    from raybridge.ray_jobs import RayJobs

    status = obj.get("status") or {}
    job_id = status.get("jobId") or (obj.get("spec") or {}).get("jobId")
    if obj["kind"] != "RayJob" or not job_id:
        raise BadInput(f"{obj['kind']} {args.name} has no Ray job submitted yet (state: {status.get('jobDeploymentStatus') or status.get('state') or 'new'})")
    cluster = status.get("rayClusterName")
    if not cluster and not args.dashboard_address:
        raise InfraError(f"RayJob {args.name} has no Ray cluster any more (it ended: {status.get('jobDeploymentStatus')}); its logs went with it")
    dashboard, forward = connect_dashboard(kube, kube.namespace, cluster or "", status.get("dashboardURL"), args.dashboard_address, progress)
    return RayJobs(dashboard), forward, job_id


def job_logs(args: argparse.Namespace) -> int:
    kube, _, obj = _find(args)
    jobs, forward, job_id = _jobs_for(args, kube, obj)
    try:
        if args.follow:
            jobs.stream_logs(job_id, lambda chunk: (sys.stdout.write(chunk), sys.stdout.flush()))
        else:
            sys.stdout.write(jobs.logs(job_id))
    finally:
        if forward is not None:
            forward.close()
    return 0


def stop_job(args: argparse.Namespace) -> int:
    kube, _, obj = _find(args)
    jobs, forward, job_id = _jobs_for(args, kube, obj)
    try:
        stopped = jobs.stop(job_id)
    finally:
        if forward is not None:
            forward.close()
    progress(f"{'stopped' if stopped else 'already ended:'} Ray job {job_id} of RayJob {args.name}")
    return 0


def delete_job(args: argparse.Namespace) -> int:
    from raybridge.launch.kube_run import _delete_and_wait

    kube, rays, obj = _find(args)
    _delete_and_wait(rays, obj["kind"], args.name, kube.namespace, progress)
    return 0


def list_jobs(args: argparse.Namespace) -> int:
    from raybridge.output import dump

    kube = connect(args.kubeconfig, args.context, args.namespace)
    rays = RayObjects(kube)
    namespace = None if args.all_namespaces else kube.namespace
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
    rows = []
    for kind in ("RayJob", "RayCluster"):
        for obj in rays.list(kind, namespace, selector):
            if kind == "RayCluster" and any(r.get("kind") == "RayJob" for r in obj["metadata"].get("ownerReferences") or []):
                continue  # a RayJob's own cluster is shown through the RayJob
            meta, status = obj["metadata"], obj.get("status") or {}
            rows.append({
                "kind": kind,
                "namespace": meta.get("namespace"),
                "name": meta.get("name"),
                "queue": (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name"),
                "state": status.get("jobDeploymentStatus") or status.get("state") or "New",
                "jobStatus": status.get("jobStatus"),
                "created": meta.get("creationTimestamp"),
            })  # fmt: skip
    if args.output != "table":
        dump(rows, args.output)
        return 0
    table(None, ("KIND", "NAMESPACE", "NAME", "QUEUE", "STATE", "RAY JOB", "CREATED"), [tuple(r.values()) for r in rows])
    return 0
