"""`submit(spec)`: pick the backend and hand the spec to it.

Whatever fails on the way, including Ctrl-C, what this run created is
removed before the error propagates (unless `keep=True`); each backend
guarantees that for its own objects.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Optional

from raybridge.errors import BadInput
from raybridge.jobs.handle import JobHandle
from raybridge.jobs.options import SubmitOptions, check_runnable, choose_backend, local_uploads, submit_options, upload_lines
from raybridge.jobs.spec_file import SpecLike, as_spec


def submit(spec: SpecLike, options: Optional[SubmitOptions] = None, **kwargs: Any) -> JobHandle:
    """Size, launch and submit; returns once the Ray job is submitted.

    `spec`: a JobSpec, a spec file's path, or a mapping of the spec's fields (`{"entrypoint": "python x.py",
    "gpus": 1}`); `kwargs` are SubmitOptions' fields (`backend="local"`, `timeout=600`, ...).
    """
    spec = as_spec(spec)
    options = options or submit_options(**kwargs)
    check_runnable(spec, options.submission_id)
    lines = upload_lines(local_uploads(spec))  # refuses what Ray would refuse, before anything exists
    options = replace(options, before_upload=partial(_say, options.progress, lines))
    backend, why = choose_backend(options)
    options.progress(f"backend: {backend} ({why})")
    if spec.resolved_kind not in ("RayJob", "RayCluster") or not spec.ray:
        raise BadInput(f"submit runs Ray jobs; for a plain {spec.resolved_kind} use `raybridge render ... | kubectl apply -f -`")
    if backend == "local":
        from raybridge.jobs.local import submit_local

        return submit_local(spec, options)
    from raybridge.jobs.kubernetes import submit_kubernetes

    return submit_kubernetes(spec, options)


def _say(progress: Any, lines: list[str]) -> None:
    for line in lines:
        progress(line)
