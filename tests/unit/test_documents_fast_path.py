"""The JSON depth bound as the command line meets it: a single-threaded process, where the parser bounds the depth
itself (no second pass over a large `kubectl get -o json`), refuses exactly what the checked path refuses.

Each row runs in a fresh process (a command line's), so the calibration of the bound runs there too."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from raybridge.core.documents import MAX_DEPTH
from tests.helpers import ROOT

# (case, the text, what comes back: "ok" or the refusal's words)
ROWS = [
    ("a list at the bound", "[" * MAX_DEPTH + "]" * MAX_DEPTH, "ok"),
    ("a list one past the bound", "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested more than 64 levels"),
    ("objects at the bound", '{"a":' * MAX_DEPTH + "1" + "}" * MAX_DEPTH, "ok"),
    ("objects one past the bound", '{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1), "nested more than 64 levels"),
    ("far past the bound", "[" * 200_000 + "]" * 200_000, "nested more than 64 levels"),
    ("a NaN", '{"a": [1, NaN]}', "not finite"),
    ("an Infinity", '{"a": -Infinity}', "not finite"),
    ("a number that overflows to infinity (the checked path)", '{"a": 1e400}', "not finite"),
    ("a whole document that overflows", "1e400", "not finite"),
    ("a digest that looks like a number inside a string is a string", '{"d": "sha256:5e123"}', "ok"),
    ("a float at the bound", "[" * (MAX_DEPTH - 1) + "[1.5]" + "]" * (MAX_DEPTH - 1), "ok"),
    ("an integer of 5,000 digits", '{"a": ' + "9" * 5000 + "}", "more than 4300 digits"),
]


@pytest.mark.parametrize("case, text, expected", ROWS, ids=[r[0] for r in ROWS])
def test_a_command_line_process_bounds_json_as_the_checked_path_does(case: str, text: str, expected: str, tmp_path) -> None:
    path = tmp_path / "doc.json"
    path.write_text(text)
    script = textwrap.dedent(f"""
        from raybridge.core.documents import load_json_or_yaml
        from raybridge.errors import BadInput
        try:
            load_json_or_yaml(open({str(path)!r}).read(), "doc.json")
            print("ok")
        except BadInput as exc:
            print(exc.problems[0])
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout, (case, done.stdout)
