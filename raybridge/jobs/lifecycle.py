"""status, logs, stop, delete, list: the objects raybridge created, after the fact.

Each function finds the RayJob (or RayCluster) by name in the target
namespace and returns what it found as plain data (logs go to a `write`
callback as they arrive); the CLI renders it. `list_jobs` returns what
carries raybridge's managed-by label.

It does not print and does not decide the namespace or context: the caller
hands in a connected `Kube` whose namespace is already resolved. The objects
it reads come checked by the adapters (`kube.rayapi`, `kube.kueue`): an
answer that is not a Kubernetes object is exit 3 there; fields beyond the
object's shape are read with `_text`, never indexed blindly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from raybridge.kueue.multikueue import dispatched_by_multikueue, elsewhere_refusal
from raybridge.kueue.workload import Workload, cluster_queue_name, workload_view
from raybridge.queues.decision.kueue_explain import explain_kueue, progress_line
from raybridge.core.consts import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from raybridge.kueue.names import KUEUE_QUEUE_LABEL
from raybridge.kuberay.names import DASHBOARD_PORT, kuberay_derived_name
from raybridge.errors import BadInput, InfraError
from raybridge.jobapi.client import RayJobs
from raybridge.kube.client import Kube
from raybridge.kube.kueue import find_workload, get_cluster_queue, get_local_queue, pending_position
from raybridge.kube.rayapi import RayObjects
from raybridge.kuberay.rayjob import RayState, ray_state
from raybridge.jobs.cluster_wait import Waiter
from raybridge.jobs.dashboard import auth_headers, auth_options, connect_dashboard, head_pod
from raybridge.jobs.creation import wait_released


#: How long `logs -f` waits, by default, for a job that has not started (queued, or its cluster starting).
FOLLOW_WAIT_SECONDS = 1800.0
#: How long `logs -f` waits for KubeRay's submitter pod to submit a job whose cluster serves (its pod starting).
SUBMITTER_WAIT_SECONDS = 300.0


def find_job(kube: Kube, name: str) -> tuple[RayObjects, dict[str, Any]]:
    """The RayJob, else the RayCluster, called `name` in the target namespace."""
    rays = RayObjects(kube)
    for kind in ("RayJob", "RayCluster"):
        obj = rays.get(kind, name, kube.namespace)
        if obj is not None:
            return rays, obj
    raise BadInput(f"no RayJob or RayCluster named {name!r} in namespace {kube.namespace}")


def refuse_if_in_a_worker(kube: Kube, obj: dict[str, Any], command: str) -> None:
    """BadInput naming the worker cluster where Kueue's MultiKueue runs the job: its Ray cluster is not in this one
    (kueue/multikueue.py). Its Workload is read only for such a job."""
    if dispatched_by_multikueue(obj):
        workload = workload_view(find_workload(kube, kube.namespace, obj))
        raise BadInput(elsewhere_refusal(obj, workload, command) or "")


def job_status(kube: Kube, name: str) -> dict[str, Any]:
    """Where the job stands, its Kueue Workload, queue position, and the plain-words explanation."""
    _, obj = find_job(kube, name)
    namespace = kube.namespace
    workload = workload_view(find_workload(kube, namespace, obj))
    position = cq = cq_name = None
    if workload is not None:
        lq_name = workload.queue_name
        if workload.state == "pending" and lq_name:
            position = pending_position(kube, namespace, lq_name, workload.meta.name)
        local_queue = get_local_queue(kube, namespace, lq_name) if lq_name else None
        cq_name = cluster_queue_name(workload, local_queue)
        cq = get_cluster_queue(kube, cq_name) if cq_name else None
    state = ray_state(obj)
    return {
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "namespace": namespace,
        "jobDeploymentStatus": state.deployment if state.kind == "RayJob" and state.deployment else None,
        "jobStatus": state.job_status or None,
        "jobId": state.submitted_id or None,
        "workload": (workload.meta.name or None) if workload is not None else None,
        "queueState": workload.state if workload is not None else "none",
        "position": position,
        "explanation": _explanation(obj, workload, position, cq, cq_name),
    }


def _explanation(obj: dict[str, Any], workload: Optional[Workload], position: Any, cq: Any, cq_name: Optional[str]) -> list[str]:
    """Where the job stands; a pending one points to `explain` for the per-flavor arithmetic rather than repeating it."""
    explanation = explain_kueue(obj, workload, position, cq, cq_name)
    return explanation.summary() if explanation.state == "pending" else explanation.lines()


def _not_started(name: str, state: RayState) -> str:
    """Why a RayJob that has not ended has no Ray cluster: queued (never admitted, or evicted and not yet admitted
    again) or not yet started by KubeRay; said so, with how to take it out of the queue."""
    where = "is queued" if state.suspended else "has no Ray cluster yet"
    return (
        f"RayJob {name} {where} (state: {state.shown('new')}): its Ray job {state.submitted_id} is not running, so there "
        f"is nothing to reach yet; `raybridge status {name}` says where it stands, `raybridge delete {name}` takes it out "
        "of the queue"
    )


class _JobApiSession:
    """The Ray Job API of a RayJob's cluster, and the port-forward (if any) to close afterwards."""

    def __init__(self, kube: Kube, obj: dict[str, Any], dashboard_address: Optional[str], progress: Callable[[str], None]) -> None:
        state = ray_state(obj)
        name = obj["metadata"]["name"]
        job_id = state.submitted_id
        if obj["kind"] != "RayJob" or not job_id:
            raise BadInput(
                f"{obj['kind']} {name} has no Ray job submitted yet (state: {state.shown('new')}); "
                f"`raybridge delete {name}` removes it and frees its place in the queue"
            )
        cluster = state.cluster
        if not cluster and not dashboard_address and not state.ended:
            raise BadInput(_not_started(name, state))
        if not cluster and not dashboard_address:
            raise InfraError(f"RayJob {name} has no Ray cluster any more (it ended: {state.shown('unknown')}); its logs went with it")
        address, self.forward = connect_dashboard(kube, kube.namespace, cluster, state.dashboard or None, dashboard_address, progress)
        self.job_id: str = job_id
        try:
            headers = auth_headers(kube, kube.namespace, obj, cluster or "")
            self.jobs = RayJobs(address, headers=headers or None)
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> "_JobApiSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.forward is not None:
            self.forward.close()


def job_logs(
    kube: Kube,
    name: str,
    write: Callable[[str], None],
    *,
    follow: bool = False,
    dashboard_address: Optional[str] = None,
    progress: Callable[[str], None] = lambda _: None,
    entrypoint_seen: Callable[[str], None] = lambda _: None,
    timeout: float = FOLLOW_WAIT_SECONDS,
) -> str:
    """Write the Ray job's logs (until it ends with `follow`); returns the job id. `entrypoint_seen` is told the
    RayJob's entrypoint first (Ray echoes it into the log, `noise.JobOutput` leaves the echo out).

    With `follow`, a job that has not started yet (queued, its cluster starting, or its submitter not yet through:
    a `submit --no-wait` job) is waited for, saying where it stands, within `timeout` seconds."""
    rays, obj = find_job(kube, name)
    if dashboard_address is None:
        refuse_if_in_a_worker(kube, obj, "logs")
    entrypoint_seen(str((obj.get("spec") or {}).get("entrypoint") or ""))
    if follow and dashboard_address is None:
        obj = _wait_until_started(kube, rays, obj, timeout, progress)
    with _JobApiSession(kube, obj, dashboard_address, progress) as session:
        if follow:
            _wait_until_submitted(session, timeout, progress)
            session.jobs.stream_logs(session.job_id, write)
        else:
            write(session.jobs.logs(session.job_id))
        return session.job_id


def _wait_until_started(kube: Kube, rays: RayObjects, obj: dict[str, Any], timeout: float, progress: Callable[[str], None]) -> dict[str, Any]:
    """The RayJob once its Ray cluster serves (or it ended); InfraError (exit 3) when that takes longer than `timeout`."""
    namespace, name, kind = kube.namespace, obj["metadata"]["name"], obj["kind"]
    waiter = Waiter(progress, timeout)
    while True:
        state = ray_state(obj)
        if kind != "RayJob" or state.ended or (state.ready and state.deployment == "Running"):
            return obj
        workload = workload_view(find_workload(kube, namespace, obj))
        line = progress_line(obj, workload, None)
        waiter.say(f"waiting for job {state.submitted_id} to start: {line}")
        if waiter.expired():
            raise InfraError(f"job {state.submitted_id} of RayJob {namespace}/{name} did not start within {timeout:.0f}s: {line}")
        waiter.sleep()
        found = rays.get(kind, name, namespace)
        if found is None:
            raise InfraError(f"RayJob {namespace}/{name} was deleted while waiting for its job to start")
        obj = found


def _wait_until_submitted(session: "_JobApiSession", timeout: float, progress: Callable[[str], None]) -> None:
    """Until the Ray cluster knows the job: a K8sJobMode RayJob is Running once its submitter Job exists, before
    the submitter's pod has submitted it (kuberay@v1.6.1 rayjob_controller.go, Initializing)."""
    waiter = Waiter(progress, min(timeout, SUBMITTER_WAIT_SECONDS))
    while True:
        try:
            session.jobs.status(session.job_id)
            return
        except InfraError:
            if waiter.expired():
                raise
        waiter.say(f"waiting for KubeRay's submitter to submit job {session.job_id}")
        waiter.sleep()


@dataclass
class DashboardForward:
    """A job's Ray dashboard forwarded to this machine (`dashboard NAME`): where, from which pod, for which job, and
    the Secret holding the cluster's token when it demands one. `close()` ends the forward."""

    url: str
    pod: str
    kind: str
    name: str
    namespace: str
    job_id: str
    token_secret: Optional[str]
    forward: Any

    def close(self) -> None:
        self.forward.close()


def forward_dashboard(kube: Kube, name: str, port: int = DASHBOARD_PORT) -> DashboardForward:
    """Forward 127.0.0.1:`port` to the Ray dashboard of RayJob (or RayCluster) `name`, through the API server (as
    `kubectl port-forward` does, and `kubectl ray session`): the plain Ray CLI and a browser reach the Job API there.
    A job that has not started (queued) has no dashboard yet: BadInput saying so."""
    from raybridge.kube.portforward import PortForward

    _, obj = find_job(kube, name)
    refuse_if_in_a_worker(kube, obj, "dashboard")
    state = ray_state(obj)
    cluster = state.cluster if obj["kind"] == "RayJob" else name
    if obj["kind"] == "RayJob" and not state.ended and not (state.ready and cluster):
        raise BadInput(_not_started(name, state))
    if not cluster or (obj["kind"] == "RayJob" and state.ended and not state.cluster):
        raise InfraError(f"{obj['kind']} {name} has no Ray cluster any more (it ended: {state.shown('unknown')})")
    pod = head_pod(kube, kube.namespace, cluster)
    forward = PortForward(kube, kube.namespace, pod, DASHBOARD_PORT)
    local = forward.start(port)
    options = auth_options(obj)
    token = options.get("secretName") or kuberay_derived_name(cluster) if options.get("mode", "token" if options else "disabled") == "token" else None
    return DashboardForward(f"http://127.0.0.1:{local}", pod, obj["kind"], name, kube.namespace, state.submitted_id, token, forward)


def stop_job(
    kube: Kube, name: str, *, dashboard_address: Optional[str] = None, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Stop the Ray job; the objects stay until `delete`."""
    _, obj = find_job(kube, name)
    state = ray_state(obj)
    if state.ended and not state.cluster and not dashboard_address:
        # KubeRay deleted the finished job's cluster: nothing runs to stop, and its status says how it ended.
        return {"name": name, "namespace": kube.namespace, "jobId": state.submitted_id, "stopped": False, "jobStatus": state.job_status or None}
    if dashboard_address is None:
        refuse_if_in_a_worker(kube, obj, "stop")
    with _JobApiSession(kube, obj, dashboard_address, progress) as session:
        stopped = session.jobs.stop(session.job_id)
    return {"name": name, "namespace": kube.namespace, "jobId": session.job_id, "stopped": stopped}


def delete_job(kube: Kube, name: str, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Delete the RayJob or RayCluster; what it owns goes with it.

    A delete the API server refuses or never answers is an error (exit 3), unlike the
    clean-up after a failed submit, which only warns; waiting until it is gone is bounded.
    """
    rays, obj = find_job(kube, name)
    kind = obj["kind"]
    deleted = rays.delete(kind, name, kube.namespace)
    gone = wait_released(kube, rays, deleted, kind, name, kube.namespace) if deleted is not None else True
    progress(f"deleted {kind} {kube.namespace}/{name}" if gone else f"deletion of {kind} {kube.namespace}/{name} requested")
    return {"kind": kind, "name": name, "namespace": kube.namespace, "deleted": gone}


def list_jobs(kube: Kube, *, all_namespaces: bool = False) -> list[dict[str, Any]]:
    """Every RayJob and standalone RayCluster carrying raybridge's managed-by label."""
    rays = RayObjects(kube)
    namespace = None if all_namespaces else kube.namespace
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
    rows = []
    for kind in ("RayJob", "RayCluster"):
        for obj in rays.list(kind, namespace, selector):
            if kind == "RayCluster" and any(r.get("kind") == "RayJob" for r in obj["metadata"].get("ownerReferences") or []):
                continue  # a RayJob's own cluster is shown through the RayJob
            meta, state = obj["metadata"], ray_state(obj)
            rows.append({
                "kind": kind,
                "namespace": meta.get("namespace"),
                "name": meta.get("name"),
                "queue": (meta.get("labels") or {}).get(KUEUE_QUEUE_LABEL),
                "state": state.shown(),
                "jobStatus": state.job_status or None,
                "created": meta.get("creationTimestamp"),
            })  # fmt: skip
    return rows
