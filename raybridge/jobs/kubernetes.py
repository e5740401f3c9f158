"""The Kubernetes backend: a RayJob through Kueue and KubeRay, then the Ray Job API.

The steps, each with progress through the `progress` callback:
1. size against the Nodes and render an InteractiveMode RayJob labelled for
   Kueue, with `spec.jobId` already set to the submission id and the orphan
   bound in `spec.activeDeadlineSeconds` (`jobs/decision/orphan_guard.py` says why this
   frees quota on every KubeRay release);
2. preflight (`jobs/preflight.py`): the namespace, LocalQueue, ClusterQueue
   and WorkloadPriorityClass exist and the request can ever be admitted;
3. create it with strict field validation (a field this KubeRay does not know
   is refused, never dropped), read back what the server set (the queue Kueue
   defaulted, the protection kept), and start renewing the orphan bound
   (`jobs/orphan_guard.py`) until the job ends or is handed over;
4. wait: Kueue admission, then a ready cluster with a dashboardURL (KubeRay
   passes `Waiting` at once, the job id being set, and polls that id);
5. reach the dashboard (`jobs/dashboard.py`, with the cluster's token when
   it demands one) and submit the entrypoint under that id.

After an eviction or preemption KubeRay deletes the cluster and, once Kueue
admits the job again, builds a new one that knows nothing of the job; this
backend notices (KubeRay suspending the RayJob, the Workload evicted, the
RayJob on another cluster than the job went to, or that cluster gone; a
FAILED or STOPPED from a dying head is not taken as the job's end while any of
these holds), says who preempted it, waits for the readmission within the
timeout and submits the entrypoint again, under the same id, which KubeRay
polls on the new cluster. A Workload that Kueue deactivated (the run-time
limit reached, or stopped by an admin) is never readmitted: that is the end
of the job (exit 1), said in plain words, and the RayJob is deleted.

If anything fails or is interrupted before the handle is returned, or the
handle gives up, the RayJob is deleted (its RayCluster and Workload follow by
owner reference), so nothing is left holding Kueue quota.

A RayCluster (`--kind RayCluster`) is created and waited for the same way,
then left running for the user (`create_cluster`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Callable, Optional

from raybridge.kueue.workload import WorkloadLike, eviction_summary, workload_state, workload_view
from raybridge.queues.decision.kueue_explain import progress_line
from raybridge.kuberay.names import DASHBOARD_PORT
from raybridge.kueue.names import KUEUE_QUEUE_LABEL
from raybridge.core.deadline import Deadline
from raybridge.jobs.decision.images import unpinned_image_warning
from raybridge.core.dra import CLAIM_TEMPLATE_KIND
from raybridge.jobs.decision.manifests import FINISHED_CLUSTER_TTL_SECONDS, INTERACTIVE_MODE, claim_template_name, image_for, workload_of
from raybridge.jobs.decision.planning import plan_job, render_job
from raybridge.jobs.decision.orphan_guard import (
    Renewal, eviction_bound_note, handover_notes, handover_patch, kueue_limits_run, protections_of, unknown_fields,
)
from raybridge.jobs.decision.sizing import SizingDecision
from raybridge.jobs.decision.spec import JobSpec
from raybridge.errors import BadInput, InfraError, JobEnded
from raybridge.jobapi.client import TERMINAL, RayJobs
from raybridge.kuberay.rayjob import ray_state
from raybridge.kuberay.releases import pre_running_supported
from raybridge.jobapi.ray_import import installed_ray_version, local_python
from raybridge.kube.calls import NotFound
from raybridge.kube.client import Kube
from raybridge.kube.dra import create_claim_template, delete_claim_template, own_claim_template
from raybridge.kube.kueue import find_workload, kueue_dra_settings, list_local_queue_names, served_versions, wait_workload_gone
from raybridge.kueue.dra import dra_counting
from raybridge.kube.operators import kuberay_operator_release
from raybridge.kube.rayapi import RayObjects
from raybridge.jobs.dashboard import auth_headers, connect_dashboard
from raybridge.jobs.cluster_wait import Waiter, end_if_deactivated, observe_riding_out, wait_for_ready
from raybridge.jobs.discovery import discover_inventory
from raybridge.jobs.handle import JobHandle
from raybridge.jobs.options import SubmitOptions, new_submission_id, resolve_runtime_env, unique_name
from raybridge.jobs.orphan_guard import OrphanGuard
from raybridge.noise import verbose
from raybridge.jobs.preflight import MULTIKUEUE_CONTROLLER, Preflight, multikueue_refusal, preflight

#: What a kept or handed-over RayJob does after its job ends (FINISHED_CLUSTER_TTL_SECONDS in jobs/decision/manifests.py).
_LINGER_NOTE = (
    f"when the job ends, Kueue frees its quota at once but KubeRay keeps its Ray cluster, GPU pods included, "
    f"{FINISHED_CLUSTER_TTL_SECONDS}s longer for its logs"
)
#: How long a lost dashboard may stay lost while the RayJob says its job still runs.
SETTLE_SECONDS = 120.0
#: How many times in a row the dashboard may be reconnected without the job ending.
MAX_RECONNECTS = 5
#: `--no-wait` on KubeRay v1.6+: how long to wait for KubeRay to take the job id (status.jobId) before clearing
#: spec.jobId. It takes it at its next reconcile of Waiting, on the status write's own event or at most
#: RayJobDefaultRequeueDuration (3 s) later (kuberay@v1.7.0 rayjob_controller.go, case Waiting).
TAKE_JOB_ID_SECONDS = 15.0

__all__ = ["Waiter", "connect_dashboard", "create_cluster", "delete_and_wait", "submit_kubernetes", "wait_for_ready", "wait_released"]


@dataclass
class Prepared:
    """A job sized and rendered for the cluster, not yet created: its client, where, what, and its submission id."""

    kube: Kube
    namespace: str
    name: str
    decision: SizingDecision
    objects: list[dict[str, Any]]
    node_labels: Optional[list[dict[str, str]]]
    submission_id: str


def prepare(spec: JobSpec, options: SubmitOptions, submission_mode: str = INTERACTIVE_MODE) -> Prepared:
    """Size against the cluster and render; in K8sJobMode (`jobs/queued.py`) without the local working dir, which
    travels another way. --timeout bounds the whole command up to the job's submission: every API call meanwhile
    gets the time left."""
    kube = replace(options.cluster, namespace=spec.namespace or options.namespace).connect(Deadline.after(options.timeout, time.monotonic))
    inventory = discover_inventory(nodes_file=options.nodes_file, pods_file=options.pods_file, tolerations=spec.tolerations, kube=kube)
    decision = plan_job(spec, inventory)
    for text in decision.notes:
        options.progress(f"note: {text}")
    for text in decision.warnings:
        options.progress(f"warning: {text}")
    ray_version = installed_ray_version()
    warning = unpinned_image_warning(spec.image, image_for(spec, decision, ray_version, local_python()), ray_version)
    if warning:
        options.progress(f"warning: {warning}")
    name = spec.name or unique_name()
    submission_id = options.submission_id or new_submission_id(name)
    rendered = spec
    if submission_mode != INTERACTIVE_MODE:
        rendered = spec.model_copy(update={"working_dir": None, "runtime_env": {k: v for k, v in (spec.runtime_env or {}).items() if k != "working_dir"} or None})
    objects = render_job(rendered, decision, name=name, namespace=kube.namespace, job_id=submission_id, orphan_bound=options.orphan_bound,
                         submission_mode=submission_mode, ray_version=ray_version, python=local_python())
    labels = [dict(n.labels) for n in inventory.nodes] if inventory.source in ("kubernetes", "file") else None
    return Prepared(kube, kube.namespace, name, decision, objects, labels, submission_id)


def preflight_job(prepared: Prepared, options: SubmitOptions, followed: bool = True) -> Preflight:
    """`preflight` of the workload, its DRA devices counted as Kueue counts them; BadInput when Kueue would queue the
    job and leave its DRA devices uncounted or hold it for good (`kueue/dra.py`). Its notes said."""
    kube, decision = prepared.kube, prepared.decision
    counting, claim_templates = None, {}
    if decision.dra and decision.device_class and served_versions(kube):
        counting = dra_counting(kueue_dra_settings(kube), decision.device_class, int(decision.total_gpus))
        if counting.resource is not None:
            claim_templates = {claim_template_name(prepared.name): {counting.resource: Decimal(int(decision.gpus_per_replica))}}
    found = preflight(kube, prepared.namespace, workload_of(prepared.objects), prepared.node_labels, claim_templates, followed=followed)
    if counting is not None and found.queue is not None:
        if counting.problem:
            raise BadInput(f"{counting.problem}; nothing was created")
        if counting.note:
            options.progress(f"note: {counting.note}")
        if counting.resource:
            options.progress(f"note: Kueue counts the job's DRA devices as {counting.resource}")
    for text in found.notes:
        options.progress(f"note: {text}")
    return found


def create_claim_template_of(kube: Kube, objects: list[dict[str, Any]]) -> Optional[str]:
    """Create the job's ResourceClaimTemplate where it claims DRA GPUs (rendered before the workload); its name."""
    templates = [o for o in objects[:-1] if o.get("kind") == CLAIM_TEMPLATE_KIND]
    for template in templates:
        create_claim_template(kube, template)
    return templates[0]["metadata"]["name"] if templates else None


def _create_strict(rays: RayObjects, obj: dict[str, Any]) -> dict[str, Any]:
    try:
        return rays.create(obj)
    except NotFound:
        # The namespace was found by the preflight: a 404 here is the API server serving no such kind (no CRD).
        raise BadInput(
            f"this cluster does not serve {obj['kind']} ({obj['apiVersion']}): KubeRay is not installed (`raybridge check` "
            "says what the cluster offers; install KubeRay, or run without a cluster with --backend local); nothing was created"
        ) from None
    except BadInput as exc:
        if "already exists" in str(exc):
            meta = obj["metadata"]
            raise BadInput(
                f"a {obj['kind']} named {meta['name']} already exists in {meta['namespace']}; "
                f"choose another --name or `raybridge delete {meta['name']}`"
            ) from None
        raise


def create_protected(rays: RayObjects, obj: dict[str, Any]) -> dict[str, Any]:
    """Create with strict field validation; the object as the server stored it.

    Every field raybridge renders for a RayJob exists in every supported KubeRay
    except `authOptions`; a field the release does not know is refused (BadInput,
    saying which), never dropped.
    """
    try:
        return _create_strict(rays, obj)
    except BadInput as exc:
        fields = unknown_fields(str(exc))
        if not fields:
            raise
        if any("secretName" in f for f in fields):
            # kuberay@v1.6.0 ray-operator/apis/ray/v1/raycluster_types.go: AuthOptions.SecretName first appears.
            raise BadInput(
                "authSecret: naming the token's Secret needs KubeRay v1.6.0 or later; this cluster's KubeRay does not know "
                "spec.rayClusterSpec.authOptions.secretName (leave authSecret out: KubeRay makes a Secret per cluster)"
            ) from None
        if any("authOptions" in f for f in fields):
            # kuberay@v1.5.1 ray-operator/apis/ray/v1/raycluster_types.go: AuthOptions first appears (not in v1.5.0).
            raise BadInput(
                "authMode: token authentication needs KubeRay v1.5.1 or later; this cluster's KubeRay does not know "
                "spec.rayClusterSpec.authOptions"
            ) from None
        raise BadInput(f"this cluster's KubeRay does not know {', '.join(fields)}: {exc.problems[0]}") from None


def delete_and_wait(kube: Kube, rays: RayObjects, kind: str, name: str, namespace: str, progress: Callable[[str], None], wait: float = 30.0) -> bool:
    """Delete the object and wait (bounded) until it is gone with its Workload; True once gone, False if only requested."""
    try:
        deleted = rays.delete(kind, name, namespace)
    except Exception as exc:  # clean-up must not hide the original error
        progress(f"warning: could not delete {kind} {namespace}/{name}: {exc} -- delete it with `raybridge delete {name}`")
        return False
    if deleted is None:
        gone = True
    else:
        gone = wait_released(kube, rays, deleted, kind, name, namespace, wait)
        progress(f"deleted {kind} {namespace}/{name}" if gone else f"deletion of {kind} {namespace}/{name} requested")
    if (kind, namespace, name) in rays.unanswered_creates:
        progress(f"a create of {kind} {namespace}/{name} went unanswered and may still land: watching for it, to delete it")
        if rays.sweep_late_create(kind, name, namespace):
            progress(f"deleted {kind} {namespace}/{name}, created late by the unanswered request")
    return gone


def wait_released(kube: Kube, rays: RayObjects, deleted: dict[str, Any], kind: str, name: str, namespace: str, wait: float = 30.0) -> bool:
    """True once a deleted RayJob or RayCluster is gone and so is any Kueue Workload of it, so nothing of it
    holds GPUs or quota; False if something is still there after `wait` seconds (the deletion goes on)."""
    deadline = time.monotonic() + wait
    if not rays.wait_gone(kind, name, namespace, wait):
        return False
    return wait_workload_gone(kube, namespace, deleted, max(0.0, deadline - time.monotonic()))


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


class _RayJobRun:
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


def submit_kubernetes(spec: JobSpec, options: SubmitOptions) -> JobHandle:
    if spec.resolved_kind == "RayCluster":
        raise BadInput("kind RayCluster is created with create_cluster(), not submitted")
    prepared = prepare(spec, options)
    kube, namespace, name = prepared.kube, prepared.namespace, prepared.name
    rayjob = workload_of(prepared.objects)
    runtime_env = resolve_runtime_env(spec, prepared.decision)  # validates workingDir before anything exists
    found = preflight_job(prepared, options)
    operator = kuberay_operator_release(kube)
    submitted = _Submitted(kube, RayObjects(kube), name, namespace, options)
    try:
        submitted.claim_template = create_claim_template_of(kube, prepared.objects)
        stored = create_protected(submitted.rays, rayjob)
        submitted.created = True
        if submitted.claim_template is not None:
            own_claim_template(kube, submitted.claim_template, namespace, stored)
        queued = _announce_created(stored, namespace, name, options, spec.max_run_seconds)
        refuse_if_suspended_without_queue(kube, stored, namespace, name)
        if (stored.get("spec") or {}).get("managedBy") == MULTIKUEUE_CONTROLLER:
            # Kueue's webhook hands a MultiKueue queue's job to its MultiKueue controller (kueue@v0.19.2 RayJob
            # SetManagedBy): where the preflight could not read the AdmissionCheck, this is how it shows.
            queue = (stored["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL) or "?"
            raise BadInput(multikueue_refusal(queue, found.cluster_queue or "?", "?").replace(" (MultiKueue admission check ?)", " (MultiKueue)"))
        run = _RayJobRun(kube, submitted.rays, options, spec, name, runtime_env, queued=queued, submission_id=prepared.submission_id)
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

    kube: Kube
    rays: RayObjects
    name: str
    namespace: str
    options: SubmitOptions
    created: bool = False
    run: Optional[_RayJobRun] = None
    guard: Optional[OrphanGuard] = None
    #: The job's ResourceClaimTemplate, once created (DRA GPUs): owned by the RayJob once that exists.
    claim_template: Optional[str] = None

    def cleanup(self) -> None:
        """Stop renewing, close the port-forward, delete the RayJob (and its claim template) unless it is kept."""
        if self.guard is not None:
            self.guard.stop()
        if self.run is not None:
            self.run.close_forward()
        if self.created and not self.options.keep:
            delete_and_wait(self.kube, self.rays, "RayJob", self.name, self.namespace, self.options.progress)
        if self.claim_template is not None and (not self.created or not self.options.keep):
            delete_claim_template(self.kube, self.claim_template, self.namespace)
        if self.created and self.options.keep:
            self.options.progress(
                f"kept RayJob {self.namespace}/{self.name} (`raybridge delete {self.name}` removes it); {_LINGER_NOTE}"
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


def refuse_if_suspended_without_queue(kube: Kube, stored: dict[str, Any], namespace: str, name: str) -> None:
    """BadInput when Kueue suspended the RayJob although it names no queue: nothing will ever admit it.

    Kueue's webhook suspends a job without a queue name when it manages every job (manageJobsWithoutQueueName)
    and LocalQueue defaulting found no LocalQueue named `default` in the namespace (kueue@v0.13.10
    pkg/controller/jobframework/defaults.go, ApplyDefaultForSuspend and ApplyDefaultLocalQueue).
    """
    labels = (stored.get("metadata") or {}).get("labels") or {}
    if labels.get(KUEUE_QUEUE_LABEL) or not (stored.get("spec") or {}).get("suspend"):
        return
    queues = list_local_queue_names(kube, namespace)
    known = f"LocalQueues in {namespace}: {', '.join(queues)}" if queues else f"{namespace} has no LocalQueue"
    raise BadInput(
        f"RayJob {namespace}/{name} names no queue and was suspended on creation: this cluster's Kueue manages jobs "
        f"without a queue name (manageJobsWithoutQueueName) and {namespace} has no LocalQueue named 'default', so "
        f"nothing would ever admit it; pass --queue ({known})"
    )


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
    cluster = workload_of(prepared.objects)
    preflight_job(prepared, options)
    rays = RayObjects(kube)
    created = False
    claim_template = None
    try:
        claim_template = create_claim_template_of(kube, prepared.objects)
        stored = create_protected(rays, cluster)
        created = True
        if claim_template is not None:
            own_claim_template(kube, claim_template, namespace, stored)
        queue = (stored["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        options.progress(f"created RayCluster {namespace}/{name}" + (f" in queue {queue}" if queue else ""))
        waiter = Waiter(options.progress, options.timeout)
        waiter.deadline = min(waiter.deadline, kube.deadline.at) if kube.deadline is not None else waiter.deadline
        ready = wait_for_ready(kube, rays, "RayCluster", name, namespace, waiter, queued=bool(queue))
    except BaseException:
        if created and not options.keep:
            delete_and_wait(kube, rays, "RayCluster", name, namespace, options.progress)
        if claim_template is not None and (not created or not options.keep):
            delete_claim_template(kube, claim_template, namespace)
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
