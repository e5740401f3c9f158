"""The Kubernetes backend: a RayJob through Kueue and KubeRay, then the Ray Job API.

The steps, each with progress through the `progress` callback:
1. size against the Nodes and render an InteractiveMode RayJob labelled for
   Kueue, with `spec.jobId` already set to the submission id and the orphan
   bound in `spec.activeDeadlineSeconds` (`jobs/decision/orphan_guard.py` says why this
   frees quota on every KubeRay release);
2. preflight (`jobs/preflight.py`): the namespace, LocalQueue, ClusterQueue
   and WorkloadPriorityClass exist and the request can ever be admitted;
3. create it with strict field validation (a field this KubeRay does not know
   is refused, never dropped; `jobs/creation.py` does steps 1 to 3), read back
   what the server set (the queue Kueue defaulted, the protection kept), and
   start renewing the orphan bound (`jobs/orphan_guard.py`) until the job ends
   or is handed over;
4. wait: Kueue admission, then a ready cluster with a dashboardURL (KubeRay
   passes `Waiting` at once, the job id being set, and polls that id);
5. reach the dashboard (`jobs/dashboard.py`, with the cluster's token when
   it demands one) and submit the entrypoint under that id (`jobs/rayjob_run.py`
   does steps 4 and 5, and again after an eviction or preemption, under the
   same id; a Workload that Kueue deactivated is the end of the job, exit 1,
   and the RayJob is deleted).

If anything fails or is interrupted before the handle is returned, or the
handle gives up, the RayJob is deleted (its RayCluster and Workload follow by
owner reference), so nothing is left holding Kueue quota.

A RayCluster (`--kind RayCluster`) is created and waited for the same way,
then left running for the user (`create_cluster`).

Why this module exists: it puts the steps in their order and owns what a submit
must undo (`_Submitted`: clean up, or hand over with `--no-wait`). What it
deliberately does not do: render, check or create objects itself
(`jobs/creation.py`), follow the running job or its evictions
(`jobs/rayjob_run.py`), or a `submit --no-wait` in K8sJobMode (`jobs/queued.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from raybridge.kuberay.names import DASHBOARD_PORT
from raybridge.kueue.names import KUEUE_QUEUE_LABEL
from raybridge.jobs.decision.manifests import FINISHED_CLUSTER_TTL_SECONDS
from raybridge.jobs.decision.orphan_guard import Renewal, eviction_bound_note, kueue_limits_run, protections_of
from raybridge.jobs.decision.spec import JobSpec
from raybridge.errors import BadInput
from raybridge.kuberay.releases import pre_running_supported
from raybridge.kube.operators import kuberay_operator_release
from raybridge.kube.rayapi import RayObjects
from raybridge.jobs.cluster_wait import Waiter, wait_for_ready
from raybridge.jobs.creation import CreatedWorkload, create_workload, preflight_job, prepare, refuse_if_suspended_without_queue
from raybridge.jobs.handle import JobHandle
from raybridge.jobs.options import SubmitOptions, resolve_runtime_env
from raybridge.jobs.orphan_guard import OrphanGuard
from raybridge.jobs.rayjob_run import RayJobRun
from raybridge.noise import verbose
from raybridge.jobs.preflight import MULTIKUEUE_CONTROLLER, multikueue_refusal

#: What a kept or handed-over RayJob does after its job ends (FINISHED_CLUSTER_TTL_SECONDS in jobs/decision/manifests.py).
_LINGER_NOTE = (
    f"when the job ends, Kueue frees its quota at once but KubeRay keeps its Ray cluster, GPU pods included, "
    f"{FINISHED_CLUSTER_TTL_SECONDS}s longer for its logs"
)

__all__ = ["create_cluster", "submit_kubernetes"]


def submit_kubernetes(spec: JobSpec, options: SubmitOptions) -> JobHandle:
    if spec.resolved_kind == "RayCluster":
        raise BadInput("kind RayCluster is created with create_cluster(), not submitted")
    prepared = prepare(spec, options)
    kube, namespace, name = prepared.kube, prepared.namespace, prepared.name
    runtime_env = resolve_runtime_env(spec, prepared.decision)  # validates workingDir before anything exists
    found = preflight_job(prepared, options)
    operator = kuberay_operator_release(kube)
    submitted = _Submitted(CreatedWorkload(kube, RayObjects(kube), "RayJob", name, namespace), options)
    try:
        stored = create_workload(submitted.record, prepared.objects)
        queued = _announce_created(stored, namespace, name, options, spec.max_run_seconds)
        refuse_if_suspended_without_queue(kube, stored, namespace, name)
        if (stored.get("spec") or {}).get("managedBy") == MULTIKUEUE_CONTROLLER:
            # Kueue's webhook hands a MultiKueue queue's job to its MultiKueue controller (kueue@v0.19.2 RayJob
            # SetManagedBy): where the preflight could not read the AdmissionCheck, this is how it shows.
            queue = (stored["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL) or "?"
            raise BadInput(multikueue_refusal(queue, found.cluster_queue or "?", "?").replace(" (MultiKueue admission check ?)", " (MultiKueue)"))
        run = RayJobRun(kube, submitted.rays, options, spec, name, runtime_env, queued=queued, submission_id=prepared.submission_id)
        run.pre_running, run.kueue_limits_run = pre_running_supported(operator.version), kueue_limits_run(stored)
        if queued and (verbose() or not run.pre_running):  # a caveat (an operator before v1.6, or unknown) is said always
            options.progress(eviction_bound_note(operator.describe(), operator.version is not None, run.pre_running, options.orphan_bound))
        submitted.run = run
        run.guard = submitted.guard = _start_orphan_guard(options, name, namespace, Renewal(
            options.orphan_bound, spec.max_run_seconds, run.kueue_limits_run, prepared.submission_id, run.pre_running,
        ), on_deadline=run.end_at_deadline)  # fmt: skip
        run.start()
    except BaseException:
        submitted.cleanup()
        raise
    assert run.jobs is not None
    return JobHandle(
        backend="kubernetes",
        name=name,
        namespace=namespace,
        submission_id=run.submission_id,
        jobs=run.jobs,
        decision=prepared.decision,
        cleanup=submitted.cleanup,
        keep=options.keep,
        recover=run.recover,
        handover=submitted.handover,
        entrypoint=spec.entrypoint or "",
    )


@dataclass
class _Submitted:
    """A RayJob being submitted: what exists so far, and so what cleaning up or handing over must undo."""

    record: CreatedWorkload
    options: SubmitOptions
    run: Optional[RayJobRun] = None
    guard: Optional[OrphanGuard] = None

    @property
    def rays(self) -> RayObjects:
        return self.record.rays

    def cleanup(self) -> None:
        """Stop renewing, close the port-forward, delete the RayJob (and its claim template) unless it is kept."""
        if self.guard is not None:
            self.guard.stop()
        if self.run is not None:
            self.run.close_forward()
        self.record.undo(self.options.keep, self.options.progress)
        if self.record.stored is not None and self.options.keep:
            record = self.record
            self.options.progress(
                f"kept RayJob {record.namespace}/{record.name} (`raybridge delete {record.name}` removes it); {_LINGER_NOTE}"
            )

    def handover(self) -> list[str]:
        """Stop renewing and leave the running job to itself; what still bounds it, in words."""
        if self.guard is not None:
            self.guard.stop()
        if self.run is not None:
            self.run.close_forward()
            return self.run.handover() + [_LINGER_NOTE]
        return []


def _announce_created(stored: dict[str, Any], namespace: str, name: str, options: SubmitOptions, max_run_seconds: Optional[int]) -> bool:
    """Say the RayJob exists, in which queue, and which orphan protections the server kept; whether Kueue queues it."""
    queue = (stored["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    options.progress(f"created RayJob {namespace}/{name}" + (f" in queue {queue}" if queue else " (not queued by Kueue)"))
    protections = protections_of(stored, max_run_seconds)
    for protection in protections:
        # The orphan bound's own lines are the same on every submit (docs/lifecycle.md says them): with -v only; a
        # run-time limit the user set is said always.
        if protection.run_limit or protection.field.startswith("metadata.labels") or verbose():
            options.progress(f"orphan protection: {protection.describe()}")
    if not protections:
        options.progress("warning: no orphan protection is in force: if raybridge dies before the job ends, delete the RayJob yourself")
    return bool(queue)


def _start_orphan_guard(
    options: SubmitOptions, name: str, namespace: str, renewal: Renewal, on_deadline: Optional[Callable[[dict[str, Any]], None]] = None
) -> OrphanGuard:
    """Start renewing the RayJob's orphan bound until the job ends or is handed over."""
    # Its own client: the renewals must not share the command's deadline or the waits' retries.
    guard_rays = RayObjects(replace(options.cluster, namespace=namespace).connect(None))
    return OrphanGuard(guard_rays, name, namespace, renewal, options.progress, on_deadline=on_deadline).start()


def create_cluster(spec: JobSpec, options: SubmitOptions) -> dict[str, Any]:
    """Create a long-lived RayCluster, wait until it is admitted and ready, say how to reach it."""
    prepared = prepare(spec, options)
    kube, namespace, name = prepared.kube, prepared.namespace, prepared.name
    preflight_job(prepared, options)
    rays = RayObjects(kube)
    record = CreatedWorkload(kube, rays, "RayCluster", name, namespace)
    try:
        stored = create_workload(record, prepared.objects)
        queue = (stored["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        options.progress(f"created RayCluster {namespace}/{name}" + (f" in queue {queue}" if queue else ""))
        waiter = Waiter(options.progress, options.timeout)
        waiter.deadline = min(waiter.deadline, kube.deadline.at) if kube.deadline is not None else waiter.deadline
        ready = wait_for_ready(kube, rays, "RayCluster", name, namespace, waiter, queued=bool(queue))
    except BaseException:
        record.undo(options.keep, options.progress)
        raise
    head = (ready.get("status") or {}).get("head") or {}
    service = head.get("serviceName") or f"{name}-head-svc"
    return {
        "name": name,
        "namespace": namespace,
        "state": (ready.get("status") or {}).get("state"),
        "allocation": prepared.decision.to_dict(),
        "headService": service,
        "dashboard": f"http://{service}.{namespace}.svc:{DASHBOARD_PORT}",
        "reach": [
            f"kubectl -n {namespace} port-forward svc/{service} {DASHBOARD_PORT}:{DASHBOARD_PORT}",
            f"ray job submit --address http://127.0.0.1:{DASHBOARD_PORT} -- <your command>",
            f"raybridge delete {name} -n {namespace}   # it holds Kueue quota until deleted",
        ],
    }
