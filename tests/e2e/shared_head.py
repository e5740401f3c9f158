"""The Job API of the session's shared Ray head, for tests that must end a run as a real head pod's end would.

Every head pod of the test cluster stands for one local Ray head (tests/conftest.py `ray_head`), which outlives the
head pod that a Kueue eviction deletes: the evicted run goes on in it and its log stays on its disk. A test whose
job must be unknown to the next cluster (as on a real cluster, where the new head has never heard of it) ends
that run here: stopped, deleted until Ray's job monitor has let it go, its log removed. Used by
test_kube_eviction.py and test_release_matrix.py (queued jobs through a preemption).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

from tests.waits import wait_for

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
#: How long a job must stay deleted on the shared head to be gone for good: three of Ray's job-monitor periods.
MONITOR_PERIODS_GONE = 3.0


class HeadJobs:
    """The Job API of the session's shared Ray head, which every head pod stands for."""

    def __init__(self, dashboard_url: str) -> None:
        self.url = dashboard_url.rstrip("/")
        self.seen: set[str] = set()

    def _call(self, method: str, path: str) -> tuple[int, Any]:
        request = urllib.request.Request(self.url + path, method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, None

    def status(self, submission_id: str) -> Optional[str]:
        code, info = self._call("GET", f"/api/jobs/{submission_id}")
        return (info or {}).get("status") if code == 200 else None

    def end(self, submission_id: str, log: Optional[Path] = None) -> None:
        """End the run as the death of its head pod would on a real cluster: stopped, then forgotten, so
        that a new cluster's head has never heard of the id, and its `log` file removed (a new head's disk
        holds no log of that id, and Ray appends a run under the same id to the file it finds).

        Ray's job monitor writes a job deleted before it noticed its supervisor's exit back, as FAILED
        ("Job supervisor actor died": ray dashboard/modules/job/job_manager.py _monitor_job_internal,
        which looks once a JOB_MONITOR_LOOP_PERIOD_S, 1 s), so the job is deleted again until it has
        stayed gone for a few of the monitor's periods.
        """
        if self.status(submission_id) is not None:
            self._call("POST", f"/api/jobs/{submission_id}/stop")
            wait_for(lambda: self.status(submission_id) in TERMINAL, timeout=60, what=f"job {submission_id} to stop on the shared head")
            self._forget(submission_id)
        if log is not None:
            log.unlink(missing_ok=True)

    def _forget(self, submission_id: str) -> None:
        gone_since: list[float] = []

        def forgotten() -> bool:
            if self.status(submission_id) is not None:
                self._call("DELETE", f"/api/jobs/{submission_id}")
                gone_since.clear()
                return False
            gone_since[:] = gone_since or [time.monotonic()]
            return time.monotonic() - gone_since[0] >= MONITOR_PERIODS_GONE

        wait_for(forgotten, timeout=60, interval=0.25, what=f"job {submission_id} forgotten by the shared head")

    def track(self, output: str) -> list[str]:
        """The submission ids raybridge says it submitted in `output`; ended after the test."""
        ids = re.findall(r"submitted (\S+) to ", output)
        self.seen.update(ids)
        return ids
