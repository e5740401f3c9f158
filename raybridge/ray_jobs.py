"""The Ray Job API, through `ray.job_submission.JobSubmissionClient`.

A thin adapter: submit, status, logs (streamed or whole), stop, with the
client's connection errors turned into raybridge's `InfraError`. Both
backends use it, so a local run and a KubeRay run look the same to the user.

It does not start or find clusters; it is handed a dashboard address.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Optional

from raybridge.errors import InfraError

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


class RayJobs:
    def __init__(self, address: str, headers: Optional[dict[str, str]] = None) -> None:
        from ray.job_submission import JobSubmissionClient

        self.address = address
        try:
            self.client = JobSubmissionClient(address, headers=headers)
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError from the client
            raise InfraError(f"cannot reach the Ray Job API at {address}: {_first_line(exc)}") from None

    def submit(
        self,
        entrypoint: str,
        submission_id: str,
        runtime_env: Optional[dict[str, Any]],
        metadata: Optional[dict[str, str]] = None,
        retry_for: float = 0.0,
    ) -> str:
        """Submit once; with `retry_for`, keep trying server errors that long.

        A head that has just started can answer 500 until its job agent has
        registered. The submission id is fixed, so a retry never runs the job twice.
        """
        deadline = time.monotonic() + retry_for
        failed_before = False
        while True:
            try:
                return self.client.submit_job(
                    entrypoint=entrypoint, submission_id=submission_id, runtime_env=runtime_env or None, metadata=metadata
                )
            except Exception as exc:
                text = str(exc)
                if failed_before and "already exists" in text:
                    return submission_id  # an earlier attempt got through after all
                if "status code 5" not in text or time.monotonic() > deadline:
                    raise InfraError(f"submitting to the Ray Job API at {self.address} failed: {_first_line(exc)}") from None
                failed_before = True
                time.sleep(1.0)

    def status(self, submission_id: str) -> str:
        try:
            return str(self.client.get_job_status(submission_id).value)
        except Exception as exc:
            raise InfraError(f"reading job {submission_id} from {self.address}: {_first_line(exc)}") from None

    def info(self, submission_id: str) -> Any:
        return self.client.get_job_info(submission_id)

    def logs(self, submission_id: str) -> str:
        try:
            return self.client.get_job_logs(submission_id)
        except Exception as exc:
            raise InfraError(f"reading logs of {submission_id} from {self.address}: {_first_line(exc)}") from None

    def stop(self, submission_id: str) -> bool:
        try:
            return bool(self.client.stop_job(submission_id))
        except Exception:
            return False

    def stream_logs(self, submission_id: str, write: Callable[[str], None]) -> None:
        """Write log chunks as they come, until the job ends (or the stream breaks)."""

        async def tail() -> None:
            async for chunk in self.client.tail_job_logs(submission_id):
                write(chunk)

        try:
            asyncio.run(tail())
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception:
            pass  # the caller falls back to polling the status

    def wait(self, submission_id: str, timeout: Optional[float] = None, poll: float = 0.5) -> str:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status(submission_id)
            if status in TERMINAL:
                return status
            if deadline is not None and time.monotonic() > deadline:
                return status
            time.sleep(poll)


def _first_line(exc: BaseException) -> str:
    """The telling line of an error: the exception line of a server-side traceback, else the first."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if "Traceback (most recent call last)" in lines[0]:
        return f"{lines[0].split('Traceback')[0].strip()} {lines[-1].strip()}".strip()
    return lines[0]
