"""The Python API takes what users pass it: a path, a mapping or a JobSpec; a bad one is BadInput naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

import raybridge
from raybridge.jobs.handle import JobHandle
from raybridge.jobs.options import submit_options
from raybridge.jobs.spec_file import as_spec

ROOT = Path(__file__).resolve().parents[2]


# (case, what is passed, the entrypoint of the spec it becomes)
SPEC_ROWS = [
    ("a path as text", str(ROOT / "examples" / "hello.yaml"), "python main.py"),
    ("a Path", ROOT / "examples" / "hello.yaml", "python main.py"),
    ("a mapping, camelCase", {"entrypoint": "python a.py", "maxRunSeconds": 60}, "python a.py"),
    ("a mapping, snake_case", {"entrypoint": "python b.py", "max_run_seconds": 60}, "python b.py"),
    ("a JobSpec", raybridge.load_spec(None, {"entrypoint": "python c.py"}), "python c.py"),
]


@pytest.mark.parametrize("case,given,entrypoint", SPEC_ROWS, ids=[r[0] for r in SPEC_ROWS])
def test_a_spec_from_what_is_passed(case, given, entrypoint):
    assert as_spec(given).entrypoint == entrypoint


# (case, what is passed, the problem named)
BAD_SPEC_ROWS = [
    ("a number", 42, "not int"),
    ("a list", ["python x.py"], "not list"),
    ("a path that is not there", "no/such/spec.yaml", "spec file 'no/such/spec.yaml' does not exist"),
    ("a field of the wrong type", {"entrypoint": "x", "gpus": "many"}, "gpus: input should be a valid integer"),
    ("an unknown field", {"entrypoint": "x", "gpuz": 1}, "gpuz: unknown field"),
]


@pytest.mark.parametrize("case,given,problem", BAD_SPEC_ROWS, ids=[r[0] for r in BAD_SPEC_ROWS])
def test_a_bad_spec_is_bad_input_naming_it_never_an_attribute_error(case, given, problem):
    with pytest.raises(raybridge.BadInput) as refused:
        raybridge.submit(given, backend="local")
    assert problem in str(refused.value)


@pytest.mark.parametrize(
    "kwargs,problem",
    [({"backnd": "local"}, "unknown submit option backnd (options: backend, "), ({"backend": "kube"}, "backend must be 'local' or 'kubernetes'")],
)
def test_a_bad_option_is_bad_input_naming_it(kwargs, problem):
    with pytest.raises(raybridge.BadInput) as refused:
        submit_options(**kwargs)
    assert problem in str(refused.value)


class ScriptedJobs:
    """A Job API whose log stream delivers these chunks, then the status."""

    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks
        self.address = "http://127.0.0.1:1"

    def stream_logs(self, submission_id: str, write: Any) -> Optional[str]:
        for chunk in self.chunks:
            write(chunk)
        return "SUCCEEDED"


RAY_LOG = [
    "2026-11-27 10:00:00,000\tINFO job_manager.py:530 -- Runtime env is setting up.\n",
    "Running entrypoint for job raybridge-1: python main.py\n",
    "\x1b[32msum of squares: 285\x1b[0m\n",
    "2026-11-27 10:00:01,000\tINFO worker.py:1832 -- Connecting to existing Ray cluster at address: 127.0.0.1:6379...\n",
    "done\n",
]


@pytest.mark.parametrize("raw,expected", [
    (False, "sum of squares: 285\ndone\n"),
    (True, "".join(RAY_LOG)),
], ids=["the job's own output, as the CLI shows it", "raw: as Ray writes it"])  # fmt: skip
def test_stream_logs_leaves_out_rays_lines_and_colours_unless_raw(raw, expected):
    handle = JobHandle(backend="local", name="j", namespace="", submission_id="raybridge-1", jobs=ScriptedJobs(RAY_LOG), decision=None)  # type: ignore[arg-type]
    seen: list[str] = []
    assert handle.stream_logs(seen.append, raw=raw) == "SUCCEEDED"
    assert "".join(seen) == expected
