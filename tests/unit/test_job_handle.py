"""JobHandle cleans up on close, context exit and error only: dropping it must not kill a running job."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from raybridge.jobs.decision.sizing import SizingDecision
from raybridge.jobs.handle import JobHandle


class _Jobs:
    address = "http://127.0.0.1:1"

    def __init__(self) -> None:
        self.stopped: list[str] = []

    def stop(self, submission_id: str) -> bool:
        self.stopped.append(submission_id)
        return True

    def wait(self, submission_id: str, timeout: Any = None) -> str:
        return "SUCCEEDED"


def _handle(calls: list[str], jobs: _Jobs) -> JobHandle:
    decision = SizingDecision(None, None, 1, 0, 0, False, 0, 0, 0)
    return JobHandle(backend="kubernetes", name="j", submission_id="j-1", jobs=jobs, decision=decision, cleanup=lambda: calls.append("cleanup"))  # type: ignore[arg-type]


def test_dropping_a_handle_removes_nothing():
    calls: list[str] = []
    jobs = _Jobs()
    handle = _handle(calls, jobs)
    del handle
    gc.collect()
    assert calls == [] and jobs.stopped == []


def test_close_cleans_up_once():
    calls: list[str] = []
    handle = _handle(calls, _Jobs())
    handle.close()
    handle.close()
    assert calls == ["cleanup"]


def test_leaving_a_with_block_on_an_error_stops_the_job_and_cleans_up():
    calls: list[str] = []
    jobs = _Jobs()
    with pytest.raises(RuntimeError):
        with _handle(calls, jobs):
            raise RuntimeError("boom")
    assert jobs.stopped == ["j-1"] and calls == ["cleanup"]


def test_detach_leaves_everything_running():
    calls: list[str] = []
    handle = _handle(calls, _Jobs())
    handle.detach()
    handle.close()
    assert calls == []


class _StreamingJobs(_Jobs):
    def stream_logs(self, submission_id: str, write: Any) -> str:
        write("line 1\n")
        return "SUCCEEDED"


def test_logs_go_to_the_sink_the_caller_passes_and_never_to_stdout(capsys):
    handle = _handle([], _StreamingJobs())
    with pytest.raises(TypeError):
        handle.stream_logs()  # type: ignore[call-arg]  # no default that prints
    written: list[str] = []
    assert handle.stream_logs(written.append) == "SUCCEEDED"
    assert written == ["line 1\n"] and capsys.readouterr().out == ""
