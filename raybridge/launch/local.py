"""Submitting to a local Ray: the private head's lifecycle around one job.

Sizes against this machine (so a spec asking for more GPUs than it has is
refused with what was found), starts the private head unless an address is
given, submits through the Job API and returns a handle whose `close()`
stops the head.
"""

from __future__ import annotations

import os

from raybridge.core.inventory import Inventory
from raybridge.core.spec import JobSpec
from raybridge.errors import BadInput
from raybridge.launch.handle import JobHandle
from raybridge.launch.options import SubmitOptions, new_submission_id, resolve_runtime_env
from raybridge.launch.private_head import PrivateRayHead
from raybridge.core.sizing import SizingRequest, unsized_decision
from raybridge.core.planning import plan_job
from raybridge.jobapi.client import RayJobs


def _found(inventory: Inventory) -> str:
    vendors = inventory.vendors()
    if vendors:
        return ", ".join(f"{n} {v} GPU{'s' if n != 1 else ''}" for v, n in vendors.items())
    reasons = "; ".join(inventory.notes)
    return "no GPUs" + (f" ({reasons})" if reasons else "")


def submit_local(spec: JobSpec, options: SubmitOptions) -> JobHandle:
    if spec.resolved_kind == "RayCluster":
        raise BadInput("kind RayCluster needs the kubernetes backend; locally, start one with `ray start --head`")
    address = options.address or os.environ.get("RAY_ADDRESS")
    name = spec.name or "raybridge"
    head = None
    if address:
        # An existing cluster places the work itself (it may autoscale): pass the request on unsized.
        decision = unsized_decision(SizingRequest.from_spec(spec))
        dashboard = address
    else:
        from raybridge.gpu import local_inventory

        inventory = local_inventory()
        try:
            decision = plan_job(spec, inventory)
        except BadInput as exc:
            asked = spec.gpus or spec.gpus_per_replica
            raise BadInput(f"the spec asks for {asked} GPUs but this machine has {_found(inventory)}: {exc.problems[0]}") from None
        if decision.total_gpus > decision.cluster_gpus:
            raise BadInput(f"the spec asks for {decision.total_gpus} GPUs but this machine has {_found(inventory)}")
    runtime_env = resolve_runtime_env(spec, decision)  # a bad workingDir is refused before anything starts
    if not address:
        head = PrivateRayHead(num_gpus=decision.cluster_gpus or 0)
        try:
            dashboard = head.start(options.progress)
        except BaseException:
            head.stop()
            raise
    try:
        jobs = RayJobs(dashboard)
        submission_id = options.submission_id or new_submission_id(name)
        jobs.submit(spec.entrypoint, submission_id, runtime_env, metadata={"raybridge.io/job-name": name}, retry_for=60.0 if head else 0.0)
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
    )
