"""Launching: `submit(spec) -> JobHandle`, on a local Ray or on Kubernetes.

The service the CLI and the Python API share. It picks the backend, sizes
the job, gets it running and hands back a `JobHandle` with `wait()`,
`logs()`, `stream_logs()`, `stop()` and `close()`. Whatever fails on the
way, including Ctrl-C, what this run created is removed before the error
propagates (unless `keep=True`).

It prints nothing itself: progress goes to the `progress` callback.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from raybridge.core.sizing import SizingDecision
from raybridge.core.spec import JobSpec
from raybridge.errors import BadInput, InfraError
from raybridge.output import progress
from raybridge.ray_jobs import TERMINAL, RayJobs

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
    progress: Callable[[str], None] = field(default=progress)


def choose_backend(options: SubmitOptions) -> tuple[str, str]:
    """(backend, why) — kubernetes when a cluster is configured, else local."""
    if options.backend:
        return options.backend, "as asked"
    if options.address or os.environ.get("RAY_ADDRESS"):
        return "local", "a Ray address is set"
    from raybridge.kube.client import cluster_configured

    if cluster_configured(options.kubeconfig):
        return "kubernetes", "a kubeconfig or in-cluster config was found"
    return "local", "no kubeconfig or in-cluster config was found"


def new_submission_id(name: str) -> str:
    return f"{name}-{secrets.token_hex(3)}"


def runtime_env_for(spec: JobSpec, decision: SizingDecision) -> dict[str, Any]:
    """The spec's runtime env, plus its working dir and the allocation env vars."""
    env: dict[str, Any] = dict(spec.runtime_env or {})
    if spec.working_dir:
        env["working_dir"] = spec.working_dir
    if env.get("working_dir") and "://" not in str(env["working_dir"]):
        path = Path(str(env["working_dir"])).expanduser()
        if not path.is_dir():
            raise BadInput(f"workingDir: {str(path)!r} is not a directory")
        env["working_dir"] = str(path.resolve())
    env_vars = dict(env.get("env_vars") or {})
    env_vars.update(
        {
            "NUM_GPUS": str(decision.total_gpus),
            "NUM_REPLICAS": str(decision.replicas),
            "NUM_GPUS_PER_REPLICA": str(decision.to_dict()["gpusPerReplica"]),
        }
    )
    env_vars.update(spec.env)
    env["env_vars"] = env_vars
    return env


class JobHandle:
    """A submitted Ray job and what was created for it."""

    def __init__(
        self,
        *,
        backend: str,
        name: str,
        submission_id: str,
        jobs: RayJobs,
        decision: SizingDecision,
        namespace: Optional[str] = None,
        cleanup: Optional[Callable[[], None]] = None,
        keep: bool = False,
        status_fallback: Optional[Callable[[], Optional[str]]] = None,
    ) -> None:
        self.backend = backend
        self.name = name
        self.namespace = namespace
        self.submission_id = submission_id
        self.jobs = jobs
        self.decision = decision
        self.keep = keep
        self._cleanup = cleanup
        self._status_fallback = status_fallback
        self.final_status: Optional[str] = None

    @property
    def dashboard_url(self) -> str:
        return self.jobs.address

    def status(self) -> str:
        return self.jobs.status(self.submission_id)

    def wait(self, timeout: Optional[float] = None) -> str:
        try:
            status = self.jobs.wait(self.submission_id, timeout=timeout)
        except InfraError:
            # KubeRay deletes the cluster (and its dashboard) as soon as the job ends;
            # the RayJob's status still says how it ended.
            if self._status_fallback is None:
                raise
            status = self._wait_fallback(timeout)
        if status in TERMINAL:
            self.final_status = status
        return status

    def _wait_fallback(self, timeout: Optional[float], poll: float = 0.5) -> str:
        assert self._status_fallback is not None
        deadline = time.monotonic() + (timeout if timeout is not None else 120.0)
        while True:
            status = self._status_fallback()
            if status in TERMINAL:
                return str(status)
            if time.monotonic() > deadline:
                raise InfraError(f"lost the Ray dashboard and the RayJob never reported an end (last: {status or 'unknown'})")
            time.sleep(poll)

    def logs(self) -> str:
        return self.jobs.logs(self.submission_id)

    def stream_logs(self, write: Callable[[str], None] = sys.stdout.write) -> str:
        """Stream the logs until the job ends; returns the final status."""
        self.jobs.stream_logs(self.submission_id, write)
        return self.wait()

    def stop(self) -> None:
        self.jobs.stop(self.submission_id)

    @property
    def owns_private_head(self) -> bool:
        """True when closing this handle ends the Ray head the job runs on."""
        return self.backend == "local" and self._cleanup is not None

    def detach(self) -> None:
        """Leave everything running: `close()` will remove nothing."""
        self._cleanup = None

    def close(self) -> None:
        """Remove what this run created (the private head; the RayJob unless kept)."""
        cleanup, self._cleanup = self._cleanup, None
        if cleanup is not None:
            cleanup()

    def __enter__(self) -> "JobHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None and self.final_status is None:
            self.stop()
        self.close()

    def __del__(self) -> None:  # a notebook that forgets close() still frees the head
        try:
            self.close()
        except Exception:
            pass


def submit(spec: JobSpec, options: Optional[SubmitOptions] = None, **kwargs: Any) -> JobHandle:
    """Size, launch and submit; returns once the Ray job is submitted."""
    options = options or SubmitOptions(**kwargs)
    backend, why = choose_backend(options)
    options.progress(f"backend: {backend} ({why})")
    if spec.resolved_kind not in ("RayJob", "RayCluster") or not spec.ray:
        raise BadInput(f"submit runs Ray jobs; for a plain {spec.resolved_kind} use `raybridge render ... | kubectl apply -f -`")
    if backend == "local":
        from raybridge.launch.local_run import submit_local

        return submit_local(spec, options)
    from raybridge.launch.kube_run import submit_kubernetes

    return submit_kubernetes(spec, options)
