"""The Kubernetes backend: a RayJob through Kueue and KubeRay, then the Ray Job API.

The steps, each with progress on stderr:
1. size against the Nodes and render an InteractiveMode RayJob labelled for Kueue;
2. create it, then wait: Kueue admission (Workload conditions, admission
   checks, queue position), then KubeRay's `Waiting` with a dashboardURL;
3. reach the dashboard (given address; the head service in-cluster; else the
   dashboardURL if it answers; else a port-forward to the head pod), submit
   the entrypoint with a submission id and set `spec.jobId` to it.
If anything fails or is interrupted before the handle is returned, the
RayJob is deleted (its RayCluster and Workload follow by owner reference),
so nothing is left holding Kueue quota.

A RayCluster (`--kind RayCluster`) is created and waited for the same way,
then left running for the user (`create_cluster`).
"""

from __future__ import annotations

import socket
import time
from typing import Any, Callable, Optional
from urllib.parse import urlparse

from raybridge.core.consts import DASHBOARD_PORT, KUEUE_QUEUE_LABEL
from raybridge.core.pending import progress_line, workload_state
from raybridge.core.spec import JobSpec
from raybridge.discovery import discover_inventory
from raybridge.errors import BadInput, ClusterUnreachable, InfraError
from raybridge.kube.client import Kube, connect
from raybridge.kube.kueue import find_workload, pending_position
from raybridge.kube.rayapi import RayObjects
from raybridge.launch import JobHandle, SubmitOptions, new_submission_id, runtime_env_for
from raybridge.planning import plan_job, render_job, unique_name
from raybridge.ray_jobs import RayJobs

POLL_SECONDS = 1.0
MAX_API_FAILURES = 5
HEARTBEAT_SECONDS = 30.0


class Waiter:
    """Polls until a condition holds, printing a line whenever the state changes."""

    def __init__(self, progress: Callable[[str], None], timeout: float, poll: float = POLL_SECONDS) -> None:
        self.progress = progress
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.poll = poll
        self.started = time.monotonic()
        self._last: Optional[str] = None
        self._last_time = 0.0

    def say(self, line: str) -> None:
        now = time.monotonic()
        if line != self._last:
            self.progress(line)
            self._last, self._last_time = line, now
        elif now - self._last_time >= HEARTBEAT_SECONDS:
            self.progress(f"still {line[0].lower() + line[1:]} ({int(now - self.started)}s)")
            self._last_time = now

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    def sleep(self) -> None:
        time.sleep(self.poll)


def _prepare(spec: JobSpec, options: SubmitOptions) -> tuple[Kube, str, str, Any, list[dict[str, Any]]]:
    kube = connect(options.kubeconfig, options.context, spec.namespace or options.namespace)
    namespace = spec.namespace or kube.namespace
    inventory = discover_inventory(nodes_file=options.nodes_file, pods_file=options.pods_file, tolerations=spec.tolerations, kube=kube)
    decision = plan_job(spec, inventory)
    for text in decision.notes:
        options.progress(f"note: {text}")
    for text in decision.warnings:
        options.progress(f"warning: {text}")
    name = spec.name or unique_name()
    objects = render_job(spec, decision, name=name, namespace=namespace)
    return kube, namespace, name, decision, objects


def _create(rays: RayObjects, obj: dict[str, Any]) -> dict[str, Any]:
    try:
        return rays.create(obj)
    except BadInput as exc:
        if "already exists" in str(exc):
            meta = obj["metadata"]
            raise BadInput(
                f"a {obj['kind']} named {meta['name']} already exists in {meta['namespace']}; "
                f"choose another --name or `raybridge delete {meta['name']}`"
            ) from None
        raise


def _delete_and_wait(rays: RayObjects, kind: str, name: str, namespace: str, progress: Callable[[str], None], wait: float = 30.0) -> None:
    try:
        if not rays.delete(kind, name, namespace):
            return
    except Exception as exc:  # clean-up must not hide the original error
        progress(f"warning: could not delete {kind} {namespace}/{name}: {exc} -- delete it with `raybridge delete {name}`")
        return
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            if rays.get(kind, name, namespace) is None:
                progress(f"deleted {kind} {namespace}/{name}")
                return
        except Exception:
            break
        time.sleep(0.2)
    progress(f"deletion of {kind} {namespace}/{name} requested")


def _observe(kube: Kube, rays: RayObjects, kind: str, name: str, namespace: str, queued: bool) -> tuple[dict[str, Any], Optional[dict[str, Any]], Optional[dict[str, Any]]]:
    """The object, its Kueue Workload and its queue position, as they are now."""
    obj = rays.get(kind, name, namespace)
    if obj is None:
        raise InfraError(f"{kind} {namespace}/{name} disappeared while waiting (deleted by someone else?)")
    workload = find_workload(kube, namespace, obj) if queued else None
    position = None
    if workload is not None and workload_state(workload) == "pending":
        position = pending_position(kube, namespace, workload["spec"].get("queueName", ""), workload["metadata"]["name"])
    return obj, workload, position


def wait_for_ready(
    kube: Kube, rays: RayObjects, kind: str, name: str, namespace: str, waiter: Waiter, queued: bool
) -> dict[str, Any]:
    """Wait through Kueue admission and cluster start-up; return the ready object."""
    admitted = False
    failures = 0
    while True:
        try:
            obj, workload, position = _observe(kube, rays, kind, name, namespace, queued)
            failures = 0
        except ClusterUnreachable as exc:
            failures += 1  # a long wait rides out API hiccups; a dead API server still ends it
            if failures > MAX_API_FAILURES or waiter.expired():
                raise
            waiter.say(f"API error, retrying: {exc}")
            waiter.sleep()
            continue
        if obj is None:
            raise InfraError(f"{kind} {namespace}/{name} disappeared while waiting (deleted by someone else?)")
        status = obj.get("status") or {}
        deployment = status.get("jobDeploymentStatus")
        if deployment == "ValidationFailed":
            raise BadInput(f"KubeRay rejected the {kind}: {status.get('reason', '')} {status.get('message', '')}".strip())
        if deployment in ("Failed", "Complete"):
            raise InfraError(f"the {kind} ended before the job was submitted: {deployment} ({status.get('reason', '')}: {status.get('message', '')})")
        if workload_state(workload) == "admitted":
            admitted = True
        ready = (deployment == "Waiting" and status.get("dashboardURL")) if kind == "RayJob" else status.get("state") == "ready"
        if ready:
            waiter.say(f"Ray cluster {status.get('rayClusterName') or name} is ready")
            return obj
        waiter.say(progress_line(obj, workload, position))
        if waiter.expired():
            what = "admitted" if queued and not admitted else "ready"
            raise InfraError(f"{kind} {namespace}/{name} was not {what} within {waiter.timeout:.0f}s: {progress_line(obj, workload, position)}")
        waiter.sleep()


def _reachable(address: str, timeout: float = 1.0) -> bool:
    parsed = urlparse(address if "://" in address else f"http://{address}")
    try:
        with socket.create_connection((parsed.hostname or "", parsed.port or 80), timeout=timeout):
            return True
    except OSError:
        return False


def connect_dashboard(
    kube: Kube, namespace: str, cluster_name: str, dashboard_url: Optional[str], explicit: Optional[str], progress: Callable[[str], None]
) -> tuple[str, Optional[Any]]:
    """(dashboard address, port-forward to close later or None)."""
    if explicit:
        return (explicit if "://" in explicit else f"http://{explicit}"), None
    if dashboard_url:
        url = dashboard_url if "://" in dashboard_url else f"http://{dashboard_url}"
        if kube.in_cluster or _reachable(url):
            return url, None
    from raybridge.kube.client import api_call
    from raybridge.kube.portforward import PortForward

    pods = api_call(
        "finding the Ray head pod",
        kube.core().list_namespaced_pod,
        namespace,
        label_selector=f"ray.io/cluster={cluster_name},ray.io/node-type=head",
    )
    running = [p for p in pods.items if (p.status.phase or "") == "Running"] if pods else []
    if not running:
        raise InfraError(f"no running head pod for Ray cluster {namespace}/{cluster_name} to port-forward to")
    forward = PortForward(kube, namespace, running[0].metadata.name, DASHBOARD_PORT)
    port = forward.start()
    progress(f"port-forwarding 127.0.0.1:{port} -> pod {running[0].metadata.name}:{DASHBOARD_PORT}")
    return f"http://127.0.0.1:{port}", forward


def submit_kubernetes(spec: JobSpec, options: SubmitOptions) -> JobHandle:
    if spec.resolved_kind == "RayCluster":
        raise BadInput("kind RayCluster is created with create_cluster(), not submitted")
    if not spec.entrypoint:
        raise BadInput("no entrypoint: give one in the spec, with --entrypoint, or after --")
    kube, namespace, name, decision, objects = _prepare(spec, options)
    rayjob = objects[0]
    runtime_env = runtime_env_for(spec, decision)  # validates workingDir before anything exists
    rays = RayObjects(kube)
    created = False
    forward = None

    def cleanup() -> None:
        if forward is not None:
            forward.close()
        if created and not options.keep:
            _delete_and_wait(rays, "RayJob", name, namespace, options.progress)

    try:
        _create(rays, rayjob)
        created = True
        queued = bool(rayjob["metadata"].get("labels", {}).get(KUEUE_QUEUE_LABEL))
        options.progress(f"created RayJob {namespace}/{name}" + (f" in queue {spec.queue}" if queued else ""))
        waiter = Waiter(options.progress, options.timeout)
        ready = wait_for_ready(kube, rays, "RayJob", name, namespace, waiter, queued=queued or bool(spec.queue))
        status = ready["status"]
        dashboard, forward = connect_dashboard(kube, namespace, status.get("rayClusterName", ""), status.get("dashboardURL"), options.dashboard_address, options.progress)
        jobs = RayJobs(dashboard)
        submission_id = options.submission_id or new_submission_id(name)
        jobs.submit(spec.entrypoint, submission_id, runtime_env, metadata={"raybridge.io/job-name": name}, retry_for=60.0)
        rays.patch("RayJob", name, namespace, {"spec": {"jobId": submission_id}})
        options.progress(f"submitted {submission_id} to {dashboard}")
    except BaseException:
        cleanup()
        raise
    return JobHandle(
        backend="kubernetes",
        name=name,
        namespace=namespace,
        submission_id=submission_id,
        jobs=jobs,
        decision=decision,
        cleanup=cleanup,
        keep=options.keep,
        status_fallback=lambda: _ended_status(rays, name, namespace),
    )


def _ended_status(rays: RayObjects, name: str, namespace: str) -> Optional[str]:
    """How the RayJob says its Ray job ended, once its cluster (and dashboard) is gone."""
    obj = rays.get("RayJob", name, namespace) or {}
    status = obj.get("status") or {}
    if status.get("jobStatus") in ("SUCCEEDED", "FAILED", "STOPPED"):
        return str(status["jobStatus"])
    if status.get("jobDeploymentStatus") in ("Suspending", "Suspended"):
        raise InfraError(f"RayJob {namespace}/{name} was suspended while running (evicted or preempted by Kueue); its Ray cluster is gone")
    if not obj:
        raise InfraError(f"RayJob {namespace}/{name} was deleted while running")
    return status.get("jobStatus")


def create_cluster(spec: JobSpec, options: SubmitOptions) -> dict[str, Any]:
    """Create a long-lived RayCluster, wait until it is admitted and ready, say how to reach it."""
    kube, namespace, name, decision, objects = _prepare(spec, options)
    rays = RayObjects(kube)
    cluster = objects[0]
    created = False
    try:
        _create(rays, cluster)
        created = True
        queued = bool(cluster["metadata"].get("labels", {}).get(KUEUE_QUEUE_LABEL))
        options.progress(f"created RayCluster {namespace}/{name}")
        ready = wait_for_ready(kube, rays, "RayCluster", name, namespace, Waiter(options.progress, options.timeout), queued=queued)
    except BaseException:
        if created and not options.keep:
            _delete_and_wait(rays, "RayCluster", name, namespace, options.progress)
        raise
    head = (ready.get("status") or {}).get("head") or {}
    service = head.get("serviceName") or f"{name}-head-svc"
    return {
        "name": name,
        "namespace": namespace,
        "state": (ready.get("status") or {}).get("state"),
        "allocation": decision.to_dict(),
        "headService": service,
        "dashboard": f"http://{service}.{namespace}.svc:{DASHBOARD_PORT}",
        "reach": [
            f"kubectl -n {namespace} port-forward svc/{service} {DASHBOARD_PORT}:{DASHBOARD_PORT}",
            f"ray job submit --address http://127.0.0.1:{DASHBOARD_PORT} --working-dir . -- python main.py",
            f"raybridge delete {name} -n {namespace}   # it holds Kueue quota until deleted",
        ],
    }
