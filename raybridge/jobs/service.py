"""`submit(spec)`: decide the submission once (`prepare_submit`), then hand it to its backend (`launch`).

Whatever fails on the way, including Ctrl-C, what this run created is
removed before the error propagates (unless `keep=True`); each backend
guarantees that for its own objects.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Mapping, Optional

from raybridge.errors import BadInput
from raybridge.jobs.handle import JobHandle
from raybridge.jobs.options import SubmitOptions, check_runnable, choose_backend, local_uploads, submit_options, upload_lines
from raybridge.jobs.decision.spec import JobSpec
from raybridge.jobs.decision.upload import UploadPlan
from raybridge.jobs.spec_file import SpecLike, as_spec


@dataclass(frozen=True)
class SubmitRequest:
    """A submission decided once: the spec, its options, the backend and why, and what of this machine it uploads.

    The CLI previews, checks its flags against and launches the same value; nothing decided here is decided again.
    """

    spec: JobSpec
    options: SubmitOptions
    backend: str
    why: str
    #: (what, where, plan) per local directory uploaded: `options.local_uploads`.
    uploads: tuple[tuple[str, str, UploadPlan], ...]


def prepare_submit(
    spec: SpecLike, options: Optional[SubmitOptions] = None, *, overrides: Optional[Mapping[str, Any]] = None, **kwargs: Any
) -> SubmitRequest:
    """Check the spec, find what it uploads and choose the backend: everything refused here leaves nothing behind.
    `overrides`: spec fields that win over the spec's own (`as_spec`)."""
    spec = as_spec(spec, overrides)
    options = options or submit_options(**kwargs)
    if spec.resolved_kind not in ("RayJob", "RayCluster") or not spec.ray:
        raise BadInput(f"submit runs Ray jobs; for a plain {spec.resolved_kind} use `raybridge render ... | kubectl apply -f -`")
    check_runnable(spec, options.submission_id)
    uploads = tuple(local_uploads(spec))  # refuses what Ray would refuse, before anything exists
    backend, why = choose_backend(options)
    return SubmitRequest(spec, options, backend, why, uploads)


def queue(request: SubmitRequest) -> Any:
    """Create a Kubernetes job to run by itself and return at once (`submit --no-wait`): a `jobs.queued.QueuedJob`."""
    request.options.progress(f"backend: {request.backend} ({request.why})")
    if request.backend != "kubernetes" or request.spec.resolved_kind != "RayJob" or not request.spec.ray:
        raise BadInput("a job queued to run by itself (--no-wait) is a Kubernetes RayJob")
    from raybridge.jobs.queued import queue_kubernetes

    return queue_kubernetes(request.spec, request.options)


def queue_job(spec: SpecLike, options: Optional[SubmitOptions] = None, *, overrides: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> Any:
    """What `submit --no-wait` does on Kubernetes, from Python: the RayJob created to run by itself when Kueue admits
    it (and again after each readmission), returned at once as a `jobs.queued.QueuedJob` (name, namespace,
    submission id, the sizing decision, notes). Follow it with the lifecycle commands; nothing here waits."""
    return queue(prepare_submit(spec, options, overrides=overrides, **{"backend": "kubernetes", **kwargs}))


def launch(request: SubmitRequest) -> JobHandle:
    """Hand a prepared submission to its backend; returns once the Ray job is submitted."""
    options = replace(request.options, before_upload=partial(_say, request.options.progress, upload_lines(list(request.uploads))))
    options.progress(f"backend: {request.backend} ({request.why})")
    if request.backend == "local":
        from raybridge.jobs.local import submit_local

        return submit_local(request.spec, options)
    from raybridge.jobs.kubernetes import submit_kubernetes

    return submit_kubernetes(request.spec, options)


def submit(spec: SpecLike, options: Optional[SubmitOptions] = None, *, overrides: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> JobHandle:
    """Size, launch and submit; returns once the Ray job is submitted.

    `spec`: a JobSpec, a spec file's path, or a mapping of the spec's fields (`{"entrypoint": "python x.py",
    "gpus": 1}`); `overrides`: spec fields that win over the spec's own, as the CLI's flags win over a spec file
    (`overrides={"queue": "team-b"}`); `kwargs` are SubmitOptions' fields (`backend="local"`, `timeout=600`, ...).
    """
    return launch(prepare_submit(spec, options, overrides=overrides, **kwargs))


def _say(progress: Any, lines: list[str]) -> None:
    for line in lines:
        progress(line)
