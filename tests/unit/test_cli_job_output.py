"""`noise.JobOutput`: a job's own output, without Ray's lines about running it, however the chunks are cut."""

from __future__ import annotations

import pytest

from raybridge import noise

RAY_LOG = (
    "2026-11-25 20:20:09,714\tINFO job_manager.py:581 -- Runtime env is setting up.\n"
    "Running entrypoint for job hello-45dfe6: python main.py\n"
    "2026-11-25 20:20:12,277\tINFO worker.py:1691 -- Using address 127.0.0.1:40935 set in the environment variable RAY_ADDRESS\n"
    "2026-11-25 20:20:12,324\tINFO worker.py:2029 -- Connected to Ray cluster. View the dashboard at \x1b[1m\x1b[32mhttp://127.0.0.1:54323 \x1b[39m\x1b[22m\n"
    "sum of squares: 285\n"
    "\x1b[36m(f pid=12)\x1b[0m from a task\n"
    "2026-11-25 20:20:13,000\tWARNING worker.py:1 -- a warning stays\n"
    "2020 was a year\n"
    "progress 50%"
)

# (case, verbose, plain, what comes out)
ROWS = [
    ("quiet and piped", False, True,
     "sum of squares: 285\n(f pid=12) from a task\n2026-11-25 20:20:13,000\tWARNING worker.py:1 -- a warning stays\n2020 was a year\nprogress 50%"),
    ("quiet on a terminal keeps colours", False, False,
     "sum of squares: 285\n\x1b[36m(f pid=12)\x1b[0m from a task\n2026-11-25 20:20:13,000\tWARNING worker.py:1 -- a warning stays\n2020 was a year\nprogress 50%"),
    ("-v on a terminal: everything", True, False, RAY_LOG),
]


@pytest.mark.parametrize("case,verbose,plain,expected", ROWS, ids=[r[0] for r in ROWS])
@pytest.mark.parametrize("size", [1, 7, 64, 10_000])
def test_job_output(monkeypatch: pytest.MonkeyPatch, case: str, verbose: bool, plain: bool, expected: str, size: int) -> None:
    monkeypatch.setattr(noise, "_quiet", not verbose)
    written: list[str] = []
    output = noise.JobOutput(written.append, plain=plain)
    for start in range(0, len(RAY_LOG), size):
        output(RAY_LOG[start : start + size])
    output.close()
    assert "".join(written) == expected


def test_a_line_that_cannot_be_ray_s_is_written_before_its_newline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise, "_quiet", True)
    written: list[str] = []
    noise.JobOutput(written.append, plain=True)("epoch 1/10 ...")
    assert written == ["epoch 1/10 ..."]


MULTI_LINE = "python -c 'print(1)'\npython -c 'print(2)'\n  python tail.py"


@pytest.mark.parametrize("size", [1, 5, 64, 10_000])
def test_an_entrypoint_of_several_lines_is_not_echoed_and_the_drivers_own_lines_stay(size: int) -> None:
    """Ray echoes the whole entrypoint (job_supervisor.py); its later lines are left out, not a line of the job's own
    output even when it happens to repeat one of them later."""
    log = (
        f"Running entrypoint for job j-1: {MULTI_LINE}\n"
        "1\n2\npython -c 'print(2)'\n"
    )
    written: list[str] = []
    output = noise.JobOutput(written.append, plain=True, quiet=True, entrypoint=MULTI_LINE)
    for start in range(0, len(log), size):
        output(log[start : start + size])
    output.close()
    assert "".join(written) == "1\n2\npython -c 'print(2)'\n"

