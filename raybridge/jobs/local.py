"""Submitting to a local Ray: the private head's lifecycle around one job.

Sizes against this machine (so a spec asking for more GPUs than it has is
refused with what was found), starts the private head unless an address is
given, submits through the Job API and returns a handle whose `close()`
stops the head. `options.timeout` bounds the wait for the head to start and
answer and for the submission to be accepted: past it, the head is stopped
and `InfraError` raised (exit 3 on the command line). Which inventory to size
against is `jobs/discovery.py`'s decision, not this module's.
"""

from __future__ import annotations

import time

from raybridge.core.inventory import Inventory
from raybridge.jobs.decision.spec import JobSpec
from raybridge.errors import BadInput, InfraError
from raybridge.jobs.discovery import submission_inventory
from raybridge.jobs.handle import JobHandle
from raybridge.jobs.options import SubmitOptions, new_submission_id, ray_address, resolve_runtime_env
from raybridge.jobs.private_head import START_TIMEOUT, PrivateRayHead
from raybridge.jobs.decision.sizing import SizingRequest, unsized_decision
from raybridge.jobs.decision.planning import plan_job
from raybridge.jobapi.client import RayJobs


def _found(inventory: Inventory) -> str:
    vendors = inventory.vendors()
    if vendors:
        return ", ".join(f"{n} {v} GPU{'s' if n != 1 else ''}" for v, n in vendors.items())
    reasons = "; ".join(inventory.notes)
    return "no GPUs" + (f" ({reasons})" if reasons else "")


#: How long a just-started head may answer 500 before its job agent is up.
_HEAD_SUBMIT_RETRY = 60.0


def _left(deadline: float, timeout: float, waiting_for: str) -> float:
    """Seconds left before `deadline`; InfraError once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise InfraError(f"gave up waiting {waiting_for}: --timeout {timeout:g}s has passed")
    return left


def submit_local(spec: JobSpec, options: SubmitOptions) -> JobHandle:
    if spec.resolved_kind == "RayCluster":
        raise BadInput("kind RayCluster needs the kubernetes backend; locally, start one with `ray start --head`")
    deadline = time.monotonic() + options.timeout
    name = spec.name or "raybridge"
    head = None
    inventory = submission_inventory("local", options, spec.tolerations)
    if inventory is None:
        # An existing cluster places the work itself (it may autoscale): pass the request on unsized.
        decision = unsized_decision(SizingRequest.from_spec(spec))
        dashboard = ray_address(options.address) or ""
    else:
        try:
            decision = plan_job(spec, inventory)
        except BadInput as exc:
            asked = spec.gpus or spec.gpus_per_replica
            raise BadInput(f"the spec asks for {asked} GPUs but this machine has {_found(inventory)}: {exc.problems[0]}") from None
        if decision.total_gpus > decision.cluster_gpus:
            raise BadInput(f"the spec asks for {decision.total_gpus} GPUs but this machine has {_found(inventory)}")
    runtime_env = resolve_runtime_env(spec, decision)
    if inventory is not None:
        head = PrivateRayHead(num_gpus=decision.cluster_gpus or 0)
        try:
            dashboard = head.start(options.progress, timeout=min(START_TIMEOUT, _left(deadline, options.timeout, "for the local Ray head to start")))
        except InfraError:
            head.stop()
            _left(deadline, options.timeout, "for the local Ray head to start")  # the bound, said as the user gave it
            raise
        except BaseException:
            head.stop()
            raise
    try:
        jobs = head.job_api() if head is not None else RayJobs(dashboard)
        submission_id = options.submission_id or new_submission_id(name)
        retry_for = min(_HEAD_SUBMIT_RETRY, _left(deadline, options.timeout, "to submit the job")) if head else 0.0
        options.before_upload()
        jobs.submit(spec.entrypoint, submission_id, runtime_env, metadata={"raybridge.io/job-name": name}, retry_for=retry_for)
        options.progress(f"submitted {submission_id} to {jobs.address}")
    except BaseException:
        if head is not None:
            head.stop()
        raise
    return JobHandle(
        backend="local",
        name=name,
        submission_id=submission_id,
        jobs=jobs,
        decision=decision,
        cleanup=head.release if head is not None else None,
        entrypoint=spec.entrypoint or "",
    )
