"""How soon the Ray Job API adapter notices that a job has ended.

Why this module exists: Ray's log WebSocket stays open a few seconds after a job ends (its
tail loop sleeps between reads), and the job's result should not wait for it: a short job's
end must be noticed within a fraction of a second, with its whole output and nothing twice.
Also a just-started head answers 500 until its job agent registers; the retry must follow
quickly. It uses fake JobSubmissionClients, no Ray.

What it deliberately does not do: test Ray's own client or a real dashboard (tests/e2e).
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import AsyncIterator

import pytest

from raybridge.jobapi.client import RayJobs

WHOLE_LOG = "line 1\nline 2\nsum of squares: 285\n"


class LingeringStreamClient:
    """Streams the first line; the job ends after `runs_for` seconds; the WebSocket stays open for a minute."""

    def __init__(self, runs_for: float) -> None:
        self.ends_at = time.monotonic() + runs_for

    async def tail_job_logs(self, submission_id: str) -> AsyncIterator[str]:
        yield "line 1\n"
        await asyncio.sleep(60)
        yield "never\n"

    def get_job_status(self, submission_id: str) -> SimpleNamespace:
        return SimpleNamespace(value="RUNNING" if time.monotonic() < self.ends_at else "SUCCEEDED")

    def get_job_logs(self, submission_id: str) -> str:
        return WHOLE_LOG


def _adapter(client: object) -> RayJobs:
    jobs = RayJobs.__new__(RayJobs)  # the adapter without a dashboard to connect to
    jobs.address, jobs.client = "http://127.0.0.1:8265", client
    return jobs


@pytest.mark.realtime
@pytest.mark.parametrize("runs_for", [0.0, 0.5, 1.5])
def test_a_jobs_end_is_noticed_at_once_with_the_whole_output_once(runs_for: float) -> None:
    written: list[str] = []
    start = time.monotonic()
    final = _adapter(LingeringStreamClient(runs_for)).stream_logs("job-1", written.append)
    noticed_after = time.monotonic() - start - runs_for
    assert final == "SUCCEEDED"
    assert "".join(written) == WHOLE_LOG
    assert noticed_after < 1.0, f"the end was noticed {noticed_after:.2f}s late"


class AgentNotReadyClient:
    """Answers 500 until `ready_after` submissions have been tried."""

    def __init__(self, ready_after: int) -> None:
        self.tries = 0
        self.ready_after = ready_after

    def submit_job(self, **kwargs: object) -> str:
        self.tries += 1
        if self.tries <= self.ready_after:
            raise RuntimeError("Request failed with status code 500: No available agent to submit job")
        return str(kwargs["submission_id"])


@pytest.mark.realtime
def test_a_submission_to_a_head_whose_agent_is_not_up_yet_is_retried_quickly() -> None:
    client = AgentNotReadyClient(ready_after=3)
    start = time.monotonic()
    assert _adapter(client).submit("python main.py", "job-1", None, retry_for=30) == "job-1"
    assert client.tries == 4
    assert time.monotonic() - start < 1.5
