"""`submit --no-wait` on Kubernetes: the job queued to run by itself, and raybridge gone within seconds.

A user who queues a job on a shared cluster leaves: the job may wait hours for quota, and may be preempted
and readmitted while nobody watches. So nothing here waits for Kueue or KubeRay: the RayJob is created in
K8sJobMode (`jobs/decision/queued.py` says why and how), with the zipped working dir in a ConfigMap it owns,
and the command returns. KubeRay's submitter runs the job once Kueue admits it, and again on the new cluster
after each readmission; where the operator honours `preRunningDeadlineSeconds` (v1.6+), a cluster that never
starts fails within the orphan bound of each admission and frees its quota, and a job that ends frees it at
once (KubeRay deletes its cluster `ttlSecondsAfterFinished` later).

Before anything exists the same checks as a watched submit run (sizing, the queue and its quota with the
submitter's pod counted, the working dir's filter), plus what a queued job cannot carry: a working dir that
zips past a ConfigMap's 1 MiB, local py_modules, local pip/conda/uv files. If anything fails after the RayJob
exists (the ConfigMap refused, Kueue holding a queueless job for ever), the RayJob is deleted: nothing is left
half-made. It does not follow the job: `status`, `logs -f`, `stop` and `delete` do, later.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from raybridge.kueue.names import KUEUE_QUEUE_LABEL
from raybridge.core.runtime_env import local_working_dir
from raybridge.errors import BadInput
from raybridge.jobs.decision.manifests import K8S_JOB_MODE, workload_of
from raybridge.jobs.decision.queued import (
    WORKING_DIR_ZIP_MAX_BYTES, queued_rayjob, queued_runtime_env, runtime_env_problems, working_dir_config_map,
    working_dir_config_map_name,
)  # fmt: skip
from raybridge.jobs.decision.sizing import SizingDecision
from raybridge.jobs.decision.spec import JobSpec
from raybridge.jobs.decision.upload import format_bytes
from raybridge.jobs.creation import CreatedWorkload, create_protected, create_workload, prepare, preflight_job, refuse_if_suspended_without_queue
from raybridge.jobs.options import SubmitOptions, resolve_runtime_env
from raybridge.jobs.upload import FILE_FIELDS, local_py_modules, zip_working_dir
from raybridge.kube.calls import api_call
from raybridge.kube.operators import kuberay_operator_release
from raybridge.kube.rayapi import RayObjects
from raybridge.kuberay.releases import pre_running_supported


@dataclass(frozen=True)
class QueuedJob:
    """A RayJob created to run by itself: what `submit --no-wait` reports."""

    name: str
    namespace: str
    submission_id: str
    decision: SizingDecision
    queue: Optional[str]
    backend: str = "kubernetes"
    dashboard_url: Optional[str] = None
    notes: tuple[str, ...] = field(default=())


def _local_files(runtime_env: Optional[dict[str, Any]]) -> list[tuple[str, str]]:
    """(field, path) of the pip/conda/uv fields that name a file here, which the submitter's pod would not find."""
    found = []
    for name in FILE_FIELDS:
        value = (runtime_env or {}).get(name)
        if isinstance(value, str) and value.strip() and Path(value).expanduser().exists():
            found.append((name, value))
    return found


def pre_running_bound(operator_version: Optional[str], orphan_bound: int, multikueue: bool) -> Optional[int]:
    """The RayJob's `preRunningDeadlineSeconds`: where this cluster's operator honours it (v1.6+), and always for a
    MultiKueue queue, whose job a worker's operator runs, of a release not visible from here: Kueue copies the spec
    whole (kueue@v0.17.0 pkg/controller/jobs/rayjob/rayjob_multikueue_adapter.go copyJobSpec), an operator there of
    v1.6 or later honours it, an older one's CRD prunes it as an unknown field."""
    return orphan_bound if multikueue or pre_running_supported(operator_version) else None


def orphan_note(name: str, bound: Optional[int], operator: str, multikueue: bool) -> str:
    """What bounds a Ray cluster that never starts: the RayJob's stored `preRunningDeadlineSeconds` (`bound`) and whose
    operator honours it (`operator`: this cluster's, in words; a MultiKueue job's is the worker's)."""
    if bound and multikueue:
        return (
            f"orphan protection: where the worker cluster's KubeRay operator is v1.6 or later (its release is not visible "
            f"from here), a Ray cluster that does not start fails within {bound}s of each admission and frees its quota "
            "(spec.preRunningDeadlineSeconds)"
        )
    if bound:
        return f"orphan protection: a Ray cluster that does not start fails within {bound}s of each admission and frees its quota (spec.preRunningDeadlineSeconds)"
    if multikueue:
        return (
            "this cluster's RayJob CRD does not know preRunningDeadlineSeconds (KubeRay v1.6), so the job Kueue copies to the "
            f"worker carries none: nothing bounds a Ray cluster that never starts; `raybridge status {name}` shows it, "
            f"`raybridge delete {name}` frees it"
        )
    return (
        f"KubeRay operator {operator} honours no preRunningDeadlineSeconds (v1.6): nothing bounds a Ray cluster "
        f"that never starts; `raybridge status {name}` shows it, `raybridge delete {name}` frees it"
    )


def _create(rays: RayObjects, rayjob: dict[str, Any]) -> dict[str, Any]:
    """`create_protected`; a CRD older than the operator (Helm never upgrades CRDs) that does not know
    preRunningDeadlineSeconds gets the RayJob without it (the note then says nothing bounds a cluster's start)."""
    try:
        return create_protected(rays, rayjob)
    except BadInput as exc:
        if "preRunningDeadlineSeconds" not in str(exc):
            raise
    without = {**rayjob, "spec": {k: v for k, v in rayjob["spec"].items() if k != "preRunningDeadlineSeconds"}}
    return create_protected(rays, without)


def queue_kubernetes(spec: JobSpec, options: SubmitOptions) -> QueuedJob:
    """Create the job's RayJob to run by itself (K8sJobMode) and return once it exists."""
    if spec.resolved_kind == "RayCluster":
        raise BadInput("kind RayCluster is created with create_cluster(), not queued")
    problems = runtime_env_problems(local_py_modules(spec.runtime_env), _local_files(spec.runtime_env))
    if problems:
        raise BadInput(*problems)
    prepared = prepare(spec, options, submission_mode=K8S_JOB_MODE)
    kube, namespace, name = prepared.kube, prepared.namespace, prepared.name
    runtime_env = resolve_runtime_env(spec, prepared.decision)
    local = local_working_dir(spec.runtime_env, spec.working_dir)
    zipped: Optional[bytes] = None
    notes: list[str] = []
    if local is not None:
        zipped, plan = zip_working_dir(local, spec.runtime_env, WORKING_DIR_ZIP_MAX_BYTES, "the most a ConfigMap holds (what carries a queued job's working dir)")
        notes.append(
            f"working dir {Path(local).expanduser().resolve()}: {plan.files} file{'s' if plan.files != 1 else ''}, "
            f"{format_bytes(len(zipped))} zipped into ConfigMap {namespace}/{working_dir_config_map_name(name)} "
            f"(a queued job carries at most {format_bytes(WORKING_DIR_ZIP_MAX_BYTES)})"
            + (f"; left out: {plan.left_out_text()}" if plan.left_out else "")
        )
    operator = kuberay_operator_release(kube)
    pre_running = pre_running_bound(operator.version, options.orphan_bound, multikueue=False)
    config_map = working_dir_config_map_name(name) if zipped is not None else None
    rendered, submitted_env = workload_of(prepared.objects), queued_runtime_env(runtime_env, zipped is not None)
    rayjob = queued_rayjob(rendered, submitted_env, config_map, pre_running)
    prepared.objects[-1] = rayjob
    found = preflight_job(prepared, options, followed=False)
    if found.multikueue and pre_running is None:  # the worker's operator runs it, not this cluster's
        pre_running = pre_running_bound(operator.version, options.orphan_bound, multikueue=True)
        rayjob = queued_rayjob(rendered, submitted_env, config_map, pre_running)
        prepared.objects[-1] = rayjob
    if found.multikueue and zipped is not None:
        raise BadInput(
            f"ClusterQueue {found.cluster_queue} sends its jobs to worker clusters (MultiKueue admission check {found.multikueue}): "
            "Kueue copies the RayJob there, not the ConfigMap that would carry its local working dir; give workingDir a URI "
            "(s3://, gs://, https://) or use a queue of this cluster"
        )
    if found.multikueue:
        notes.append(
            f"ClusterQueue {found.cluster_queue} sends its jobs to worker clusters (MultiKueue): KubeRay in the worker runs it; "
            f"`raybridge status {name}` shows what Kueue copies back here, its Ray cluster and logs live in the worker cluster"
        )
    record = CreatedWorkload(kube, RayObjects(kube), "RayJob", name, namespace)
    try:
        stored = create_workload(record, prepared.objects, _create)
        if zipped is not None:
            body = working_dir_config_map(name, namespace, stored, base64.b64encode(zipped).decode("ascii"))
            api_call(f"creating ConfigMap {namespace}/{config_map}", kube.core().create_namespaced_config_map, namespace, body, _preload_content=False)
        refuse_if_suspended_without_queue(kube, stored, namespace, name)
    except BaseException:
        record.undo(False, options.progress)  # a job queued and left is kept only once it is wholly made
        raise
    queue = ((stored.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    options.progress(
        f"created RayJob {namespace}/{name}" + (f" in queue {queue}" if queue else " (not queued by Kueue)")
        + f": it runs by itself{' once Kueue admits it, and again after each readmission' if queue else ''} "
        "(KubeRay's submitter submits it: K8sJobMode)"
    )  # fmt: skip
    bound = (stored.get("spec") or {}).get("preRunningDeadlineSeconds")
    notes.append(orphan_note(name, bound, operator.describe(), bool(found.multikueue)))
    return QueuedJob(name, namespace, prepared.submission_id, prepared.decision, queue, notes=tuple(notes))


__all__ = ["QueuedJob", "orphan_note", "pre_running_bound", "queue_kubernetes"]
