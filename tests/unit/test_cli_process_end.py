"""A command that leaves threads it cannot stop ends the process without finalizing, its output and status kept.

`adjuster run` asks for it: the official leader election module's daemon thread has no cancel, and a daemon thread
writing to stderr during interpreter shutdown made the process abort (exit -6) under load. Here a command asks for
it in a child process whose atexit handler would print: the handler never runs, the command's output is all there
(flushed before the exit) and its exit status is the process's."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT

FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "adjuster"

# (case, the command's arguments, its exit status, what its output holds)
ROWS = [
    ("a command that succeeds", ["adjuster", "plan", "--pods", str(FIXTURES / "pods.yaml"), "-o", "json"], 0, '"totalGpus"'),
    ("a command refused as bad input", ["adjuster", "plan", "--pods", str(FIXTURES / "pods.yaml"), "--grace-period", "-1"], 2, "error: "),
]


@pytest.mark.parametrize("case, argv, status, said", ROWS, ids=[r[0] for r in ROWS])
def test_the_process_ends_at_once_with_the_command_s_status_and_output(case: str, argv: list[str], status: int, said: str) -> None:
    script = textwrap.dedent(f"""
        import atexit, sys
        atexit.register(lambda: sys.stderr.write("finalized\\n"))
        from raybridge.cli.main import main
        from raybridge.cli.process import end_process_without_finalizing
        end_process_without_finalizing()
        sys.exit(main({argv!r}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == status, (case, done.stderr)
    assert said in done.stdout + done.stderr, (case, done.stdout, done.stderr)
    assert "finalized" not in done.stderr, case
