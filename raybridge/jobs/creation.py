"""A job's objects on the cluster, made and unmade: sized and rendered, preflighted, created strictly, deleted.

Why this module exists: the interactive submit (`jobs/kubernetes.py`), `submit --no-wait` (`jobs/queued.py`),
a long-lived RayCluster and `raybridge delete` (`jobs/lifecycle.py`) all make and unmake the same objects the
same way: `prepare` sizes against the Nodes and renders with the submission id as `spec.jobId` and the orphan
bound set; `preflight_job` checks the queue and counts DRA devices as Kueue counts them; `create_protected`
creates with strict field validation, so a field this KubeRay does not know is refused, saying which, never
dropped; `delete_and_wait` deletes and waits, bounded, until the object and its Kueue Workload are gone, so
nothing of it holds quota; `refuse_if_suspended_without_queue` refuses a RayJob nothing would ever admit.

What it deliberately does not do: wait for admission or a ready cluster (`jobs/cluster_wait.py`), submit to
the Job API or follow an eviction (`jobs/rayjob_run.py`), renew the orphan bound (`jobs/orphan_guard.py`), or
decide when to clean up (each caller does, on its own failure paths).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Callable, Optional

from raybridge.kueue.names import KUEUE_QUEUE_LABEL
from raybridge.core.deadline import Deadline
from raybridge.jobs.decision.images import unpinned_image_warning
from raybridge.core.dra import CLAIM_TEMPLATE_KIND
from raybridge.jobs.decision.manifests import INTERACTIVE_MODE, claim_template_name, image_for, workload_of
from raybridge.jobs.decision.planning import plan_job, render_job
from raybridge.jobs.decision.orphan_guard import unknown_fields
from raybridge.jobs.decision.sizing import SizingDecision
from raybridge.jobs.decision.spec import JobSpec
from raybridge.errors import BadInput
from raybridge.jobapi.ray_import import installed_ray_version, local_python
from raybridge.kube.calls import NotFound
from raybridge.kube.client import Kube
from raybridge.kube.dra import create_claim_template, delete_claim_template, own_claim_template
from raybridge.kube.kueue import kueue_dra_settings, list_local_queue_names, served_versions, wait_workload_gone
from raybridge.kueue.dra import dra_counting
from raybridge.kube.rayapi import RayObjects
from raybridge.jobs.discovery import discover_inventory
from raybridge.jobs.options import SubmitOptions, new_submission_id, unique_name
from raybridge.jobs.preflight import Preflight, preflight


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


@dataclass
class CreatedWorkload:
    """What of a job's workload (its RayJob or RayCluster) and its ResourceClaimTemplate exists so far, as
    `create_workload` makes them: what undoing a failed or interrupted submit deletes."""

    kube: Kube
    rays: RayObjects
    kind: str
    name: str
    namespace: str
    #: The job's ResourceClaimTemplate, once created (DRA GPUs): owned by the workload once that exists.
    claim_template: Optional[str] = None
    #: The workload as the API server stored it, once created.
    stored: Optional[dict[str, Any]] = None

    def undo(self, keep: bool, progress: Callable[[str], None]) -> None:
        """Delete the workload unless `keep`, and its claim template unless the kept workload holds it."""
        if self.stored is not None and not keep:
            delete_and_wait(self.kube, self.rays, self.kind, self.name, self.namespace, progress)
        if self.claim_template is not None and (self.stored is None or not keep):
            delete_claim_template(self.kube, self.claim_template, self.namespace)


def create_workload(
    record: CreatedWorkload, objects: list[dict[str, Any]], create: Optional[Callable[[RayObjects, dict[str, Any]], dict[str, Any]]] = None,
) -> dict[str, Any]:
    """The job's claim template (DRA GPUs), then its workload (`create_protected`, or `create`), the template then
    owned by the workload; `record` says at each step what exists, so that its `undo` takes back what a failure
    left. The workload as stored."""
    record.claim_template = create_claim_template_of(record.kube, objects)
    record.stored = (create or create_protected)(record.rays, workload_of(objects))
    if record.claim_template is not None:
        own_claim_template(record.kube, record.claim_template, record.namespace, record.stored)
    return record.stored


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
    if queues and "default" in queues:
        raise BadInput(
            f"RayJob {namespace}/{name} names no queue and was suspended on creation: this cluster's Kueue manages jobs "
            f"without a queue name (manageJobsWithoutQueueName) and had not yet seen LocalQueue 'default' in {namespace} "
            "(made moments ago?), so nothing would ever admit it; pass --queue default, or submit again in a few seconds"
        )
    raise BadInput(
        f"RayJob {namespace}/{name} names no queue and was suspended on creation: this cluster's Kueue manages jobs "
        f"without a queue name (manageJobsWithoutQueueName) and {namespace} has no LocalQueue named 'default', so "
        f"nothing would ever admit it; pass --queue ({known})"
    )

