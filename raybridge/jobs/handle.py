"""`JobHandle`: a submitted Ray job and what was created for it.

Both backends return one. It waits, reads logs, streams them, stops the job
and, on `close()` or leaving a `with` block, removes what the run created
(the private head; the RayJob unless kept). It holds no opinion on how the
job got there and prints nothing: streamed logs go to the sink the caller
passes (the CLI passes stdout), never to a default.

Dropping a handle removes nothing: a notebook that loses its variable must
not kill a running job. Clean-up happens on `close()`, on leaving a `with`
block, and when `submit` fails or is interrupted before returning. A
private local head still ends with the Python process that started it.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from raybridge.jobs.decision.sizing import SizingDecision
from raybridge.errors import InfraError
from raybridge.jobapi.client import TERMINAL, JobOutcome, RayJobs
from raybridge.noise import JobOutput


class JobHandle:
    """A submitted Ray job and what was created for it.

    `recover`, given by a backend whose cluster can disappear under the job
    (Kubernetes: the job ended and KubeRay deleted the cluster, or Kueue
    evicted it), is called when the Job API stops answering before the job
    has ended. It returns the final status, or None after it has submitted
    the job again (updating `jobs` and `submission_id`), or raises.
    """

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
        recover: Optional[Callable[["JobHandle"], Optional[str]]] = None,
        handover: Optional[Callable[[], list[str]]] = None,
        entrypoint: str = "",
    ) -> None:
        self.backend = backend
        #: The command the job runs, as submitted (Ray echoes it into the log; `stream_logs` leaves the echo out).
        self.entrypoint = entrypoint
        self.name = name
        self.namespace = namespace
        self.submission_id = submission_id
        self.jobs = jobs
        self.decision = decision
        self.keep = keep
        self._cleanup = cleanup
        self._recover = recover
        self._handover = handover
        self.final_status: Optional[str] = None

    @property
    def dashboard_url(self) -> str:
        return self.jobs.address

    def status(self) -> str:
        return self.jobs.status(self.submission_id)

    def _settle(self) -> Optional[str]:
        """After the Job API went quiet: the final status, or None when the job runs again elsewhere."""
        try:
            status = self.jobs.status(self.submission_id)
            if status in TERMINAL or self._recover is None:
                return status if status in TERMINAL else None
        except InfraError:
            if self._recover is None:
                raise
        return self._recover(self)

    def wait(self, timeout: Optional[float] = None) -> str:
        """Block until the job ends (or `timeout` passes: then the status as it is)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                status = self.jobs.wait(self.submission_id, timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
            except InfraError:
                if self._recover is None:
                    raise
                settled = self._recover(self)
                if settled is None:
                    continue
                status = settled
            if status in TERMINAL:
                self.final_status = status
                return status
            if deadline is not None and time.monotonic() >= deadline:
                return status

    def outcome(self) -> JobOutcome:
        """How the job ended: status, Ray's message and the exit code (status alone once the cluster is gone)."""
        try:
            return self.jobs.outcome(self.submission_id)
        except InfraError:
            return JobOutcome(self.final_status or self.wait())

    def logs(self) -> str:
        return self.jobs.logs(self.submission_id)

    def stream_logs(self, write: Callable[[str], Any], raw: bool = False) -> str:
        """Stream the job's output into `write` until the job ends (through resubmissions after an eviction); the
        final status. Ray's own INFO lines about running the job and ANSI colours are left out, as the command
        line leaves them out; `raw=True` passes the log as Ray writes it."""
        output = write if raw else JobOutput(write, plain=True, quiet=True, entrypoint=self.entrypoint)
        try:
            while True:
                final = self.jobs.stream_logs(self.submission_id, output)
                if final in TERMINAL:
                    self.final_status = final
                    return final
                settled = self._settle()
                if settled is not None:
                    self.final_status = settled
                    return settled
        finally:
            if isinstance(output, JobOutput):
                output.close()

    def stop(self) -> None:
        self.jobs.stop(self.submission_id)

    @property
    def owns_private_head(self) -> bool:
        """True when closing this handle ends the Ray head the job runs on."""
        return self.backend == "local" and self._cleanup is not None

    def detach(self) -> list[str]:
        """Leave everything running: `close()` will remove nothing. The backend hands the job over
        (Kubernetes: the RayJob no longer depends on this process); what it says about that comes back."""
        self._cleanup = None
        handover, self._handover = self._handover, None
        return handover() if handover is not None else []

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
