"""The Ray Job API adapter's log stream when the WebSocket breaks before the job ends.

Why this module exists: a proxy in front of a dashboard (an ingress, a port-forward, a
KubeRay auth proxy) may close the log WebSocket (close code 1006) while the job still
runs. The user must still get the whole output once the job ends, the final status,
and no asyncio traceback. It uses a fake JobSubmissionClient, no Ray.

What it deliberately does not do: test Ray's own client or a real dashboard (tests/e2e).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import AsyncIterator

import pytest

from raybridge.jobapi.client import RayJobs

WHOLE_LOG = "line 1\nline 2\nsum of squares: 285\n"


class BrokenStreamClient:
    """Yields the first line, then the WebSocket closes; the job runs for two more status polls."""

    def __init__(self, polls_before_end: int = 2) -> None:
        self.polls_left = polls_before_end

    async def tail_job_logs(self, submission_id: str) -> AsyncIterator[str]:
        yield "line 1\n"
        raise RuntimeError("WebSocket connection closed unexpectedly with close code 1006")

    def get_job_status(self, submission_id: str) -> SimpleNamespace:
        self.polls_left -= 1
        return SimpleNamespace(value="RUNNING" if self.polls_left >= 0 else "SUCCEEDED")

    def get_job_logs(self, submission_id: str) -> str:
        return WHOLE_LOG


def test_a_broken_log_stream_still_delivers_the_whole_output_and_the_final_status(capsys: pytest.CaptureFixture) -> None:
    jobs = RayJobs.__new__(RayJobs)  # the adapter without a dashboard to connect to
    jobs.address, jobs.client = "http://127.0.0.1:8265", BrokenStreamClient()
    written: list[str] = []
    final = jobs.stream_logs("job-1", written.append, poll=0.01)
    assert final == "SUCCEEDED"
    assert "".join(written) == WHOLE_LOG
    assert "Task exception was never retrieved" not in capsys.readouterr().err
