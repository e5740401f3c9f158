"""Names and environment variables are checked whole: no trailing newline, no empty name, no allocation variable by the back door.

Each row is a spec field (or flag) a user gives; the command exits 2 naming the field, before
anything is sized, rendered or started.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raybridge.core.names import dns_label_problem, label_value_problem, name_problem, queue_name_problem, submission_id_problem, subdomain_problem
from tests.helpers import EXAMPLES, run_cli

NODES = str(EXAMPLES / "cluster" / "nodes.json")

# (case, spec fields, the field the message names)
REFUSED_SPECS = [
    ("name with a trailing newline", {"name": "hello\n"}, "name:"),
    ("namespace with a trailing newline", {"namespace": "team-a\n"}, "namespace:"),
    ("queue with a trailing newline", {"queue": "team-a\n"}, "queue:"),
    ("priority class with a trailing newline", {"priorityClass": "train\n"}, "priorityClass:"),
    ("env var with an empty name", {"env": {"": "x"}}, "env:"),
    ("env var name with '='", {"env": {"A=B": "x"}}, "env:"),
    ("env var name starting with a digit", {"env": {"1A": "x"}}, "env:"),
    ("runtimeEnv sets an allocation variable", {"runtimeEnv": {"env_vars": {"NUM_GPUS": "8"}}}, "runtimeEnv:"),
    ("runtimeEnv env var with an empty name", {"runtimeEnv": {"env_vars": {"": "x"}}}, "runtimeEnv:"),
    ("runtimeEnv env_vars not a mapping of strings", {"runtimeEnv": {"env_vars": {"A": 1}}}, "runtimeEnv:"),
]


@pytest.mark.parametrize("case, fields, named", REFUSED_SPECS, ids=[r[0] for r in REFUSED_SPECS])
def test_a_bad_name_or_env_var_in_the_spec_is_refused(tmp_path: Path, case: str, fields: dict[str, object], named: str) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"entrypoint": "python main.py", "gpus": 1, **fields}))
    out = run_cli("render", str(spec), "--nodes", NODES)
    assert out.returncode == 2, (case, out.stdout, out.stderr)
    assert named in out.stderr and "Traceback" not in out.stderr, case
    assert out.stdout == "", case


def test_a_submission_id_with_a_trailing_newline_is_refused_before_anything_starts() -> None:
    out = run_cli("submit", "--backend", "local", "--submission-id", "job-1\n", "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert "submission" in out.stderr and "Traceback" not in out.stderr


# (check, a valid value)
CHECKS = [
    (lambda v: name_problem("RayJob", v), "hello"),
    (dns_label_problem, "team-a"),
    (label_value_problem, "team-a"),
    (queue_name_problem, "team-a"),
    (subdomain_problem, "a.b"),
    (submission_id_problem, "job-1"),
]


@pytest.mark.parametrize("check, valid", CHECKS)
@pytest.mark.parametrize("tail", ["\n"])
def test_every_name_check_refuses_a_trailing_newline(check: object, valid: str, tail: str) -> None:
    assert check(valid) is None  # type: ignore[operator]
    assert check(valid + tail) is not None  # type: ignore[operator]
