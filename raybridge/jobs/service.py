"""`submit(spec)`: pick the backend and hand the spec to it.

Whatever fails on the way, including Ctrl-C, what this run created is
removed before the error propagates (unless `keep=True`); each backend
guarantees that for its own objects.
"""

from __future__ import annotations

from typing import Any, Optional

from raybridge.jobs.decision.spec import JobSpec
from raybridge.errors import BadInput
from raybridge.jobs.handle import JobHandle
from raybridge.jobs.options import SubmitOptions, check_runnable, choose_backend


def submit(spec: JobSpec, options: Optional[SubmitOptions] = None, **kwargs: Any) -> JobHandle:
    """Size, launch and submit; returns once the Ray job is submitted."""
    options = options or SubmitOptions(**kwargs)
    check_runnable(spec, options.submission_id)
    backend, why = choose_backend(options)
    options.progress(f"backend: {backend} ({why})")
    if spec.resolved_kind not in ("RayJob", "RayCluster") or not spec.ray:
        raise BadInput(f"submit runs Ray jobs; for a plain {spec.resolved_kind} use `raybridge render ... | kubectl apply -f -`")
    if backend == "local":
        from raybridge.jobs.local import submit_local

        return submit_local(spec, options)
    from raybridge.jobs.kubernetes import submit_kubernetes

    return submit_kubernetes(spec, options)
