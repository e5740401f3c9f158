"""Plain words for "why is my job pending?".

Pure functions from a RayJob/RayCluster, its Kueue Workload, the queue
position and (when readable) the ClusterQueue to sentences: which queue,
which condition and reason, what the job asks for against the quota. The
launcher prints `progress_line` while it waits; `status` prints
`explain`. Nothing here reads the cluster.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Optional

from raybridge.core.quantity import parse_quantity

RESOURCES_SHOWN = ("nvidia.com/gpu", "amd.com/gpu", "cpu", "memory")


def condition(obj: Optional[dict[str, Any]], kind: str) -> Optional[dict[str, Any]]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def is_true(obj: Optional[dict[str, Any]], kind: str) -> bool:
    cond = condition(obj, kind)
    return bool(cond and cond.get("status") == "True")


def _reason(cond: Optional[dict[str, Any]]) -> str:
    if not cond:
        return ""
    reason = cond.get("reason") or ""
    message = cond.get("message") or ""
    return f"{reason}: {message}" if reason and message else reason or message


def workload_state(workload: Optional[dict[str, Any]]) -> str:
    """admitted | evicted | finished | pending | none"""
    if workload is None:
        return "none"
    if is_true(workload, "Finished"):
        return "finished"
    if is_true(workload, "Evicted") and not is_true(workload, "Admitted"):
        return "evicted"
    if is_true(workload, "Admitted"):
        return "admitted"
    return "pending"


def _position(position: Optional[dict[str, Any]]) -> str:
    if not position:
        return ""
    parts = []
    if position.get("positionInLocalQueue") is not None:
        parts.append(f"#{int(position['positionInLocalQueue']) + 1} in its LocalQueue")
    if position.get("positionInClusterQueue") is not None:
        parts.append(f"#{int(position['positionInClusterQueue']) + 1} in the ClusterQueue")
    return ", ".join(parts)


def admission_checks(workload: Optional[dict[str, Any]]) -> list[str]:
    checks = ((workload or {}).get("status") or {}).get("admissionChecks") or []
    return [f"{c.get('name')}: {c.get('state')}" + (f" ({c['message']})" if c.get("message") else "") for c in checks]


def progress_line(ray_object: dict[str, Any], workload: Optional[dict[str, Any]], position: Optional[dict[str, Any]]) -> str:
    """One line saying where the job stands now; printed when it changes."""
    status = ray_object.get("status") or {}
    deployment = status.get("jobDeploymentStatus") or status.get("state") or "New"
    queue = (workload or {}).get("spec", {}).get("queueName")
    state = workload_state(workload)
    if state == "pending":
        reserved = condition(workload, "QuotaReserved")
        text = f"queued in {queue}" if queue else "queued"
        if reserved is not None and reserved.get("status") != "True":
            text += f": {_reason(reserved)}"
        elif reserved is not None:
            text += ": quota reserved, waiting for admission checks"
        where = _position(position)
        checks = admission_checks(workload)
        return text + (f" ({where})" if where else "") + (f"; checks: {'; '.join(checks)}" if checks else "")
    if state == "evicted":
        return f"evicted from {queue}: {_reason(condition(workload, 'Evicted'))}; waiting to be admitted again"
    if deployment in ("Initializing", "Running", "Waiting") or status.get("state") == "ready":
        cluster = status.get("rayClusterStatus") or {}
        ready = cluster.get("readyWorkerReplicas")
        desired = cluster.get("desiredWorkerReplicas")
        workers = f", workers ready {ready}/{desired}" if desired else ""
        return f"admitted{f' by {queue}' if queue else ''}; Ray cluster {deployment.lower()}{workers}"
    if state == "none" and deployment in ("Suspended", "New", ""):
        return "waiting for Kueue to pick the job up (no Workload yet)"
    reason = status.get("reason")
    return f"{deployment}" + (f" ({reason}: {status.get('message', '')})" if reason else "")


def podset_requests(workload: Optional[dict[str, Any]]) -> dict[str, Decimal]:
    """Total requests of all pod sets (requests, else limits, times count)."""
    totals: dict[str, Decimal] = {}
    for podset in ((workload or {}).get("spec") or {}).get("podSets") or []:
        count = int(podset.get("count") or 1)
        containers = ((podset.get("template") or {}).get("spec") or {}).get("containers") or []
        for container in containers:
            res = container.get("resources") or {}
            merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
            for name, value in merged.items():
                try:
                    totals[name] = totals.get(name, Decimal(0)) + parse_quantity(value) * count
                except ValueError:
                    continue
    return totals


def quota(cluster_queue: Optional[dict[str, Any]]) -> dict[str, tuple[Decimal, Decimal]]:
    """resource -> (nominal quota over all flavors, used) from a ClusterQueue."""
    nominal: dict[str, Decimal] = {}
    used: dict[str, Decimal] = {}
    spec = (cluster_queue or {}).get("spec") or {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                try:
                    nominal[res["name"]] = nominal.get(res["name"], Decimal(0)) + parse_quantity(res.get("nominalQuota", 0))
                except (KeyError, ValueError):
                    continue
    status = (cluster_queue or {}).get("status") or {}
    for flavor in status.get("flavorsUsage") or status.get("flavorsReservation") or []:
        for res in flavor.get("resources") or []:
            try:
                used[res["name"]] = used.get(res["name"], Decimal(0)) + parse_quantity(res.get("total", 0))
            except (KeyError, ValueError):
                continue
    return {name: (value, used.get(name, Decimal(0))) for name, value in nominal.items()}


def _fmt(value: Decimal, resource: str) -> str:
    if resource == "memory":
        return f"{value / (1 << 30):.1f}Gi"
    return f"{value.normalize():f}"


def explain(
    ray_object: dict[str, Any],
    workload: Optional[dict[str, Any]],
    position: Optional[dict[str, Any]],
    cluster_queue: Optional[dict[str, Any]],
    cluster_queue_name: Optional[str] = None,
) -> list[str]:
    """The `status` command's plain-words report."""
    meta = ray_object.get("metadata") or {}
    status = ray_object.get("status") or {}
    kind = ray_object.get("kind", "RayJob")
    queue = (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name")
    lines = [f"{kind} {meta.get('namespace')}/{meta.get('name')}"]
    if kind == "RayJob":
        lines.append(
            f"  deployment: {status.get('jobDeploymentStatus') or 'New'}; Ray job: {status.get('jobStatus') or 'not started'}"
            + (f" ({status.get('jobId')})" if status.get("jobId") else "")
        )
        if status.get("reason"):
            lines.append(f"  reason: {status['reason']}: {status.get('message', '')}")
    else:
        lines.append(f"  state: {status.get('state') or 'not ready'}")
    if status.get("dashboardURL"):
        lines.append(f"  dashboard: {status['dashboardURL']}")
    if not queue and workload is None:
        lines.append("  queue: none (no kueue.x-k8s.io/queue-name label; Kueue does not manage it)")
        return lines
    lines.append(f"  queue: LocalQueue {queue or (workload or {}).get('spec', {}).get('queueName')}" + (f" -> ClusterQueue {cluster_queue_name}" if cluster_queue_name else ""))
    if workload is None:
        lines.append("  Kueue has not created a Workload for it yet (is Kueue running, and the LocalQueue there?)")
        return lines
    state = workload_state(workload)
    lines.append(f"  Kueue workload {workload['metadata']['name']}: {state}")
    for kind_ in ("QuotaReserved", "Admitted", "Evicted", "Finished"):
        cond = condition(workload, kind_)
        if cond:
            lines.append(f"    {kind_}={cond.get('status')}" + (f" ({_reason(cond)})" if _reason(cond) else ""))
    for check in admission_checks(workload):
        lines.append(f"    admission check {check}")
    where = _position(position)
    if where and state == "pending":
        lines.append(f"  position: {where}")
    asks = podset_requests(workload)
    if asks:
        have = quota(cluster_queue)
        lines.append("  asks for:" + ("" if cluster_queue else " (ClusterQueue quota not readable)"))
        for resource in [r for r in RESOURCES_SHOWN if r in asks] + sorted(set(asks) - set(RESOURCES_SHOWN)):
            line = f"    {resource}: {_fmt(asks[resource], resource)}"
            if resource in have:
                nominal, used = have[resource]
                line += f" of {_fmt(nominal, resource)} quota ({_fmt(used, resource)} in use)"
                if asks[resource] > nominal:
                    line += " -- more than the whole quota: it can never be admitted without borrowing"
            lines.append(line)
    return lines


def eviction_summary(workload: Optional[dict[str, Any]], queue: Optional[str]) -> str:
    """Who evicted the job and from where, in plain words (from the Workload's Evicted and Preempted conditions)."""
    evicted = condition(workload, "Evicted")
    preempted = condition(workload, "Preempted")
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    where = f"queue {queue}" if queue else "its queue"
    if admission.get("clusterQueue"):
        where += f" (ClusterQueue {admission['clusterQueue']})"
    if preempted is not None and preempted.get("status") == "True":
        return f"preempted in {where}: {_reason(preempted)}"
    if evicted is not None and evicted.get("status") == "True":
        return f"evicted from {where}: {_reason(evicted)}"
    return f"suspended in {where} (Kueue took its quota back)"
