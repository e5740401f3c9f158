"""One submitted RayJob, followed: the Job API on its cluster now, and carrying on when Kueue takes it away.

Why this module exists: after an eviction or preemption KubeRay deletes the cluster and, once Kueue
admits the job again, builds a new one that knows nothing of the job; `RayJobRun` notices (KubeRay
suspending the RayJob, the Workload evicted, the RayJob on another cluster than the job went to, or that
cluster gone; a FAILED or STOPPED from a dying head is not taken as the job's end while any of these
holds), says who preempted it, waits for the readmission within the timeout and submits the entrypoint
again, under the same id, which KubeRay polls on the new cluster. A Workload that Kueue deactivated (the
run-time limit reached, or stopped by an admin) is never readmitted: that is the end of the job (exit 1),
said in plain words. A lost dashboard is reached again while the RayJob says the job runs; a RayJob that
KubeRay failed at a deadline ends the job with the reason (the run-time limit, or the orphan bound not
renewed, and why). `--no-wait` hands the running job over: the renewed bound lifted, and the job id
cleared only once KubeRay has taken it (v1.6+).

What it deliberately does not do: create or delete the RayJob (`jobs/creation.py`; the backend,
`jobs/kubernetes.py`, decides when), renew the orphan bound (`jobs/orphan_guard.py`, which calls
`end_at_deadline`), or word Kueue's and KubeRay's waits (`jobs/cluster_wait.py`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from raybridge.kueue.workload import WorkloadLike, eviction_summary, workload_state, workload_view
from raybridge.queues.decision.kueue_explain import progress_line
from raybridge.kueue.names import KUEUE_QUEUE_LABEL
from raybridge.core.deadline import Deadline
from raybridge.jobs.decision.orphan_guard import handover_notes, handover_patch
from raybridge.jobs.decision.spec import JobSpec
from raybridge.errors import BadInput, InfraError, JobEnded
from raybridge.jobapi.client import TERMINAL, RayJobs
from raybridge.kuberay.rayjob import ray_state
from raybridge.kube.client import Kube
from raybridge.kube.kueue import find_workload
from raybridge.kube.rayapi import RayObjects
from raybridge.jobs.dashboard import auth_headers, connect_dashboard
from raybridge.jobs.cluster_wait import Waiter, end_if_deactivated, observe_riding_out, wait_for_ready
from raybridge.jobs.handle import JobHandle
from raybridge.jobs.options import SubmitOptions
from raybridge.jobs.orphan_guard import OrphanGuard

#: How long a lost dashboard may stay lost while the RayJob says its job still runs.
SETTLE_SECONDS = 120.0
#: How many times in a row the dashboard may be reconnected without the job ending.
MAX_RECONNECTS = 5
#: `--no-wait` on KubeRay v1.6+: how long to wait for KubeRay to take the job id (status.jobId) before clearing
#: spec.jobId. It takes it at its next reconcile of Waiting, on the status write's own event or at most
#: RayJobDefaultRequeueDuration (3 s) later (kuberay@v1.7.0 rayjob_controller.go, case Waiting).
TAKE_JOB_ID_SECONDS = 15.0


class _EvictableJobs(RayJobs):
    """The Job API of a Ray cluster that Kueue may take away.

    A head that is being deleted can answer FAILED or STOPPED for a job that was
    only evicted; such an answer counts as the job's end only when the RayJob shows
    no eviction. Otherwise it is an error, and the handle recovers (resubmits).
    """

    evicted: Callable[[], bool] = staticmethod(lambda: False)  # type: ignore[assignment]

    def status(self, submission_id: str) -> str:
        status = super().status(submission_id)
        if status in ("FAILED", "STOPPED") and self.evicted():
            raise InfraError(f"job {submission_id} ended with its Ray cluster, which Kueue took away")
        return status


class RayJobRun:
    """One submitted RayJob: the cluster it runs on now, the Job API there, and how to carry on after an eviction."""

    def __init__(
        self, kube: Kube, rays: RayObjects, options: SubmitOptions, spec: JobSpec, name: str, runtime_env: dict[str, Any], queued: bool, submission_id: str
    ) -> None:
        self.kube, self.rays, self.options, self.spec = kube, rays, options, spec
        self.name, self.namespace = name, kube.namespace
        self.runtime_env, self.queued = runtime_env, queued
        self.forward: Optional[Any] = None
        self.jobs: Optional[RayJobs] = None
        self.submission_id = submission_id  # spec.jobId since creation: KubeRay polls it on every cluster
        self.reconnects = 0
        self.cluster = ""  # the Ray cluster the job was submitted to
        #: The operator honours preRunningDeadlineSeconds (v1.6+): the guard clears spec.jobId once KubeRay polls the job.
        self.pre_running = False
        #: Kueue enforces maxRunSeconds (its label); otherwise it lives in activeDeadlineSeconds.
        self.kueue_limits_run = False
        self.guard: Optional[OrphanGuard] = None
        #: KubeRay failed the RayJob at a deadline while the job ran (seen by the guard): the job is over.
        self.deadline_reached = False

    def end_at_deadline(self, obj: dict[str, Any]) -> None:
        """The guard saw KubeRay fail the RayJob at a deadline: stop the Ray job now (KubeRay stops nothing, and its
        cluster lives ttlSecondsAfterFinished longer), so the log stream ends and `recover` says why."""
        self.deadline_reached = True
        jobs = self.jobs
        if jobs is not None:
            try:
                jobs.stop(self.submission_id)
            except Exception:  # the cluster may be going already: the stream ends either way
                pass

    def guard_trouble(self) -> str:
        """Why the orphan bound was not renewed, when the guard knows: its renewals failing, and the last error."""
        guard = self.guard
        failing = guard.failing_for() if guard is not None else None
        if guard is None or failing is None:
            return ""
        return f"raybridge's renewals had failed for {failing:.0f}s (last: {guard.last_error})"

    def start(self, evicted_from: Optional[str] = None) -> None:
        """Wait until admitted and ready, reach the dashboard and submit under the RayJob's `spec.jobId`.

        `evicted_from`: the cluster the job ran on before an eviction; then only a new cluster counts.
        """
        if self.kube.deadline is None:  # a resubmission after an eviction gets a fresh --timeout
            self.kube.deadline = Deadline.after(self.options.timeout, time.monotonic)
        waiter = Waiter(self.options.progress, self.options.timeout)
        waiter.deadline = min(waiter.deadline, self.kube.deadline.at)
        if evicted_from is None:
            ready = wait_for_ready(self.kube, self.rays, "RayJob", self.name, self.namespace, waiter, queued=self.queued)
        else:
            ready = self._wait_for_new_cluster(waiter, evicted_from)
        self._connect(ready)
        assert self.jobs is not None
        self.options.before_upload()
        self.jobs.submit(
            self.spec.entrypoint or "", self.submission_id, self.runtime_env,
            metadata={"raybridge.io/job-name": self.name}, retry_for=min(60.0, max(waiter.deadline - time.monotonic(), 5.0)),
        )  # fmt: skip
        self.kube.deadline = None  # the job itself runs as long as it runs: each call keeps --request-timeout
        self.options.progress(f"submitted {self.submission_id} to {self.jobs.address}")
        if evicted_from is not None:
            self._hand_job_id_back()

    def _hand_job_id_back(self) -> None:
        """After a readmission: give KubeRay the job id again if the guard had cleared it (v1.6+), now that the
        new cluster runs the job, so it leaves Waiting and polls it. Set after the submission, so that KubeRay
        never polls an id the cluster has not heard of (an error return, and backoff, on v1.3 to v1.6)."""
        obj = self.rays.get("RayJob", self.name, self.namespace)
        if obj is not None and not ray_state(obj).spec_job_id:
            self.rays.patch("RayJob", self.name, self.namespace, {"spec": {"jobId": self.submission_id}})

    def _wait_for_new_cluster(self, waiter: Waiter, old_cluster: str) -> dict[str, Any]:
        """After an eviction: wait (within --timeout) until Kueue admits the RayJob again and KubeRay
        has a new, ready cluster (polling the job id there, which that cluster never ran)."""
        while True:
            obj, workload, position = observe_riding_out(self.kube, self.rays, "RayJob", self.name, self.namespace, self.queued, waiter)
            state = ray_state(obj)
            end_if_deactivated(f"RayJob {self.namespace}/{self.name}", workload)
            if state.ended or state.deployment == "ValidationFailed":
                raise InfraError(
                    f"RayJob {self.namespace}/{self.name} ended while waiting to be admitted again: "
                    f"{state.deployment} ({state.reason}: {state.message})"
                )
            if state.ready and state.cluster and state.cluster != old_cluster:
                waiter.say(f"admitted again: Ray cluster {state.cluster} is ready")
                return obj
            line = progress_line(obj, workload, position)
            waiter.say(line)
            if waiter.expired():
                raise InfraError(
                    f"RayJob {self.namespace}/{self.name} was not admitted again within {waiter.timeout:.0f}s "
                    f"after its eviction: {line}"
                )
            waiter.sleep()

    def _connect(self, obj: dict[str, Any]) -> None:
        self.close_forward()
        state = ray_state(obj)
        cluster = state.cluster
        address, self.forward = connect_dashboard(
            self.kube, self.namespace, cluster, state.dashboard or None, self.options.dashboard_address, self.options.progress
        )
        headers = auth_headers(self.kube, self.namespace, obj, cluster)
        self.cluster = cluster
        self.jobs = _EvictableJobs(address, headers=headers or None)
        self.jobs.evicted = self.evicted_now

    def close_forward(self) -> None:
        if self.forward is not None:
            self.forward.close()
            self.forward = None

    def _evicted(self, obj: dict[str, Any], workload: WorkloadLike) -> bool:
        """Whether the cluster the job was submitted to has been taken away by Kueue (or is gone).

        Any of: KubeRay suspending or suspended it; the Workload evicted or preempted; the RayJob
        on another cluster (or none) than the one the job went to -- readmission may be quick; the
        cluster deleted while the RayJob still says Running.
        """
        state = ray_state(obj)
        if state.ended:
            return False
        if state.suspended:
            return True
        if workload_state(workload) in ("evicted", "deactivated"):  # Evicted (also on preemption), no longer admitted
            return True
        if self.cluster and state.cluster != self.cluster:
            return True
        return bool(self.cluster) and self.rays.get("RayCluster", self.cluster, self.namespace) is None

    def evicted_now(self) -> bool:
        """Read the RayJob and its Workload now: has the job's cluster been taken away (or KubeRay failed the RayJob
        at a deadline)? False if unknown."""
        if self.deadline_reached:
            return True
        try:
            obj = self.rays.get("RayJob", self.name, self.namespace)
            if obj is None:
                return False
            workload = workload_view(find_workload(self.kube, self.namespace, obj)) if self.queued else None
            return self._evicted(obj, workload)
        except InfraError:
            return False

    def recover(self, handle: JobHandle) -> Optional[str]:
        """The Job API stopped answering: the final status from the RayJob, or resubmit after an eviction."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            obj = self.rays.get("RayJob", self.name, self.namespace)
            if obj is None:
                raise InfraError(f"RayJob {self.namespace}/{self.name} was deleted while its job ran")
            state = ray_state(obj)
            workload = workload_view(find_workload(self.kube, self.namespace, obj)) if self.queued else None
            end_if_deactivated(f"job {self.submission_id} of RayJob {self.namespace}/{self.name}", workload)
            if state.at_deadline:
                cause = _deadline_cause(obj, self.spec.max_run_seconds, self.kueue_limits_run, self.guard_trouble())
                raise JobEnded(f"RayJob {self.namespace}/{self.name} failed: {cause}")
            if state.ended:
                return state.job_status or "FAILED"
            if self._evicted(obj, workload):
                self._resubmit_after_eviction(obj, workload)
                handle.jobs, handle.submission_id = self.jobs, self.submission_id  # type: ignore[assignment]
                return None
            if state.job_status in TERMINAL and state.job_id in ("", self.submission_id):
                return state.job_status
            if state.deployment == "Running" and state.dashboard and self.reconnects < MAX_RECONNECTS:
                self.reconnects += 1
                self._connect(obj)  # the dashboard dropped out, the job goes on: reach it again
                handle.jobs = self.jobs  # type: ignore[assignment]
                return None
            if time.monotonic() > deadline:
                raise InfraError(
                    f"lost the Ray dashboard of RayJob {self.namespace}/{self.name} and it never reported an end "
                    f"(deployment {state.shown('unknown')}, job {state.job_status or 'unknown'})"
                )
            time.sleep(0.5)

    def _resubmit_after_eviction(self, obj: dict[str, Any], workload: WorkloadLike) -> None:
        queue = (obj.get("metadata") or {}).get("labels", {}).get(KUEUE_QUEUE_LABEL)
        old_cluster = self.cluster
        self.options.progress(
            f"evicted: {eviction_summary(workload, queue)}; Ray cluster {old_cluster} is gone and job {self.submission_id} with it; "
            f"waiting up to {self.options.timeout:.0f}s to be admitted again, then submitting the entrypoint again"
        )
        # The job is submitted again under the same id on the new cluster, which never ran it: before v1.6 spec.jobId
        # stayed, and KubeRay polls it there; from v1.6 the guard cleared it, and it is handed back after the submission.
        self.close_forward()
        self.reconnects = 0
        self.kube.deadline = None
        self.start(evicted_from=old_cluster)

    def handover(self) -> list[str]:
        """`--no-wait`: leave the running job to itself (no renewed bound); what still bounds it, in words.

        The job id is cleared (operator v1.6+) only once KubeRay has taken it into status.jobId: cleared
        while the RayJob is still in Waiting, KubeRay would never poll the job, and the RayJob would fail
        at preRunningDeadlineSeconds with its job still running.
        """
        bound, max_run, limits = self.options.orphan_bound, self.spec.max_run_seconds, self.kueue_limits_run
        notes: list[str] = []
        if self.pre_running:
            if self._job_id_taken():
                try:
                    self.rays.patch("RayJob", self.name, self.namespace, handover_patch(max_run, limits, bound, True), field_validation="Strict")
                    return []
                except BadInput as exc:
                    if "preRunningDeadlineSeconds" not in str(exc):
                        raise
            else:
                notes = [f"KubeRay had not taken job {self.submission_id} within {TAKE_JOB_ID_SECONDS:.0f}s: the RayJob keeps its job id"]
        # Before v1.6 (or not known to be later): the job id stays, so a readmitted RayJob is in Running, where the deadline acts.
        self.rays.patch("RayJob", self.name, self.namespace, handover_patch(max_run, limits, bound, False))
        return notes + handover_notes(False, self.queued, max_run, limits)

    def _job_id_taken(self) -> bool:
        """Whether KubeRay polls the job (status.jobId is its id) or the RayJob has ended, within TAKE_JOB_ID_SECONDS."""
        waiter = Waiter(self.options.progress, TAKE_JOB_ID_SECONDS)
        while True:
            obj = self.rays.get("RayJob", self.name, self.namespace)
            state = ray_state(obj)
            if obj is None or state.taken(self.submission_id):
                return True  # (a RayJob that is gone: the patch says so)
            if waiter.expired():
                return False
            if waiter.clock() - waiter.started >= 1.0:
                waiter.say(f"waiting for KubeRay to take job {self.submission_id} (RayJob {state.shown('new')})")
            waiter.sleep()


def _deadline_cause(obj: dict[str, Any], max_run_seconds: Optional[int], kueue_limits_run: bool, trouble: str = "") -> str:
    """Why a RayJob hit a deadline: the user's run-time limit, or the orphan bound not renewed (and why not)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    field = "preRunningDeadlineSeconds" if status.get("reason") == "PreRunningDeadlineExceeded" else "activeDeadlineSeconds"
    seconds = spec.get(field)
    if field == "activeDeadlineSeconds" and max_run_seconds and not kueue_limits_run and seconds == max_run_seconds:
        return f"the run-time limit of {max_run_seconds}s (maxRunSeconds) was reached"
    why = trouble or "raybridge could not renew it in time (was the machine asleep or the process stopped?)"
    return f"its orphan bound ({field}={seconds}) ran out: {why}"

