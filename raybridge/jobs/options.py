"""What a submission is asked to do, and which backend does it.

`SubmitOptions` carries everything besides the spec (backend, addresses,
cluster coordinates, timeout, keep); `choose_backend` is the one place that
decides local versus kubernetes; `runnable_problems` is the one check that a
spec can be submitted (a working dir that exists included), asked by every
command before anything is printed, started or created; `resolve_runtime_env`
then builds the Job API runtime env once.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Optional

from raybridge.core.consts import ORPHAN_BOUND_SECONDS
from raybridge.core.names import submission_id_problem
from raybridge.core.runtime_env import allocation_env, local_working_dir, submission_runtime_env
from raybridge.jobs.decision.upload import UploadPlan
from raybridge.jobs.upload import local_path_problems, plan_working_dir_upload, py_module_uploads
from raybridge.jobs.decision.sizing import SizingDecision
from raybridge.jobs.decision.spec import JobSpec, Purpose, entrypoint_problem
from raybridge.errors import BadInput
from raybridge.kube.config import DEFAULT_REQUEST_TIMEOUT
from raybridge.kube.target import ClusterTarget


def _quiet(_: str) -> None:
    """The default progress callback: services print nothing unless the caller asks."""


DEFAULT_TIMEOUT = 1800.0


@dataclass
class SubmitOptions:
    backend: Optional[str] = None  # "local" | "kubernetes" | None (choose)
    address: Optional[str] = None  # local: an existing Ray cluster
    dashboard_address: Optional[str] = None  # kubernetes: reach the dashboard here
    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    namespace: Optional[str] = None
    nodes_file: Optional[str] = None
    pods_file: Optional[str] = None
    timeout: float = DEFAULT_TIMEOUT
    keep: bool = False
    submission_id: Optional[str] = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    #: Kubernetes: how soon after raybridge stops renewing it a RayJob fails (`jobs/decision/orphan_guard.py`).
    orphan_bound: int = ORPHAN_BOUND_SECONDS
    progress: Callable[[str], None] = field(default=_quiet)
    #: Says what of the local directories goes to Ray; the backends call it just before the submission (set by
    #: `submit`, from the listing it checked first).
    before_upload: Callable[[], None] = field(default=lambda: None)

    @property
    def cluster(self) -> ClusterTarget:
        return ClusterTarget(self.kubeconfig, self.context, self.namespace, self.request_timeout)


def submit_options(**kwargs: Any) -> SubmitOptions:
    """SubmitOptions from keyword arguments; an unknown one is BadInput naming it and the known ones."""
    known = [f.name for f in fields(SubmitOptions)]
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise BadInput(f"unknown submit option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} (options: {', '.join(known)})")
    if kwargs.get("backend") not in (None, "local", "kubernetes"):
        raise BadInput(f"backend must be 'local' or 'kubernetes' (got {kwargs['backend']!r})")
    return SubmitOptions(**kwargs)


#: The environment variable Ray's own tools read for the cluster to use.
RAY_ADDRESS_ENV = "RAY_ADDRESS"


def ray_address(given: Optional[str]) -> Optional[str]:
    """The existing Ray cluster to use: `--address` (or the API's `address`), else $RAY_ADDRESS; None: none."""
    return given or os.environ.get(RAY_ADDRESS_ENV) or None


def choose_backend(options: SubmitOptions) -> tuple[str, str]:
    """(backend, why) — kubernetes when a cluster is configured, else local."""
    if options.backend:
        return options.backend, "as asked"
    if ray_address(options.address):
        return "local", "a Ray address is set"
    from raybridge.kube.config import cluster_configured

    if cluster_configured(options.kubeconfig):
        return "kubernetes", "a kubeconfig or in-cluster config was found"
    return "local", "no kubeconfig or in-cluster config was found"


def new_submission_id(name: str) -> str:
    return f"{name}-{secrets.token_hex(3)}"


def unique_name(prefix: str = "raybridge") -> str:
    """A fresh DNS-1035 name for a run that was not given one."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return f"{prefix}-{''.join(secrets.choice(alphabet) for _ in range(5))}"


def resolve_runtime_env(spec: JobSpec, decision: SizingDecision) -> dict[str, Any]:
    """The Job API runtime env: the spec's, its working dir (resolved to an absolute path), the allocation vars.

    The spec has passed `check_runnable` (`submit` asks it first), so a local
    working dir is a directory here.
    """
    working_dir = spec.working_dir or (spec.runtime_env or {}).get("working_dir")
    local = local_working_dir(spec.runtime_env, spec.working_dir)
    runtime_env = spec.runtime_env
    if local is not None:
        working_dir = str(Path(local).expanduser().resolve())
        # What raybridge leaves out of the upload (links leading out, secrets, special files).
        left_out = plan_working_dir_upload(working_dir, spec.runtime_env).excludes
        if left_out:
            runtime_env = {**(runtime_env or {}), "excludes": [*((runtime_env or {}).get("excludes") or []), *left_out]}
    allocation = allocation_env(decision.total_gpus, decision.replicas, decision.gpus_per_replica)
    return submission_runtime_env(runtime_env, working_dir, allocation, spec.env)


def working_dir_upload(spec: JobSpec) -> Optional[tuple[str, UploadPlan]]:
    """The local working dir a submission uploads and what goes of it, or None (none, or a URI)."""
    local = local_working_dir(spec.runtime_env, spec.working_dir)
    if local is None or not spec.ray or spec.resolved_kind != "RayJob":
        return None
    working_dir = str(Path(local).expanduser().resolve())
    return working_dir, plan_working_dir_upload(working_dir, spec.runtime_env)


def upload_lines(uploads: list[tuple[str, str, "UploadPlan"]], dry_run: bool = False) -> list[str]:
    """What `local_uploads` found, a line each: `uploading ...`, or `would upload ...` in a dry run."""
    lines = [plan.describe(where, what=what) for what, where, plan in uploads]
    return [("would upload" + line.removeprefix("uploading")) if dry_run else line for line in lines]


def local_uploads(spec: JobSpec) -> list[tuple[str, str, UploadPlan]]:
    """Every local directory a submission uploads, as (what, where, what goes of it): the working dir, then each
    py_modules one."""
    uploads = []
    working = working_dir_upload(spec)
    if working is not None:
        uploads.append(("working dir", *working))
    if spec.ray and spec.resolved_kind == "RayJob":
        uploads.extend(("py_modules", where, plan) for where, plan in py_module_uploads(spec.runtime_env))
    return uploads


def runnable_problems(spec: JobSpec, submission_id: Optional[str] = None, purpose: Purpose = "submit") -> list[str]:
    """What keeps this spec from going ahead for `purpose`, one sentence each; [] when it can.

    `plan` ("size"), `render` and `submit` (also `--dry-run`) all ask this first,
    so a refused job never leaves anything behind. The entrypoint follows the
    one rule of `core.spec.entrypoint_problem`: sizing needs none.
    """
    problems: list[str] = []
    entrypoint = entrypoint_problem(spec, purpose)
    if entrypoint:
        problems.append(entrypoint)
    local = local_working_dir(spec.runtime_env, spec.working_dir)
    if local is not None and not Path(local).expanduser().is_dir():
        problems.append(f"workingDir: {local!r} is not a directory")
    if purpose == "submit":
        problems.extend(local_path_problems(spec.runtime_env))
    if submission_id is not None:
        problem = submission_id_problem(submission_id)
        if problem:
            problems.append(f"--submission-id: {problem}")
    return problems


def check_runnable(spec: JobSpec, submission_id: Optional[str] = None, purpose: Purpose = "submit") -> None:
    """BadInput listing every problem `runnable_problems` finds."""
    problems = runnable_problems(spec, submission_id, purpose)
    if problems:
        raise BadInput(*problems)
