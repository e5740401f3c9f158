"""A test that fails while it holds a stack names where that stack's logs are kept (pytest_plugin.py).

Why: a stack removes its directory when it stops, so a failure that does not come again left nothing to read (a
Ray head that stopped answering in one whole run). Run as a user runs pytest: a session of its own, in a process of
its own, with the plugin and a stack stood for by a RealCluster whose logs are a directory of this test's.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

from testcluster.pytest_plugin import RealCluster, stack_logs_of

ROOT = Path(__file__).resolve().parents[2]

SESSION = textwrap.dedent('''
    import pytest
    from testcluster.pytest_plugin import RealCluster

    @pytest.fixture
    def stack(tmp_path):
        logs = tmp_path / "testcluster-abc123" / "logs"
        logs.mkdir(parents=True)
        (logs / "ray-head.log").write_text("the head's last words\\n")
        session = tmp_path / "testcluster-abc123" / "ray" / "session_2026-12-01_07-00-00_000000_1" / "logs"
        session.mkdir(parents=True)
        (session / "dashboard.log").write_text("the dashboard's last words\\n")
        (session.parent.parent / "session_latest").symlink_to(session.parent.name)
        return RealCluster(tmp_path / "admin.kubeconfig", "https://127.0.0.1:1", logs, tmp_path / "pki")

    def test_fails_with_a_stack(stack):
        assert False, "failed with a stack"

    def test_passes_with_a_stack(stack):
        pass

    def test_fails_without_a_stack():
        assert False, "failed without a stack"
''')


def test_a_failed_test_with_a_stack_names_a_private_copy_of_its_logs(tmp_path: Path) -> None:
    (tmp_path / "test_session.py").write_text(SESSION)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAYBRIDGE_TESTCLUSTER": "0", "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "testcluster.pytest_plugin", "-p", "no:cacheprovider", "-q", "-n", "0",
                          "test_session.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "2 failed, 1 passed" in out.stdout, out.stdout + out.stderr
    kept = re.findall(r"the logs of the stack this test used are kept in (\S+)", out.stdout)
    assert len(kept) == 1, out.stdout  # the failed test with a stack alone
    copy = Path(kept[0])
    assert copy.name == "testcluster-abc123" and (copy / "ray-head.log").read_text() == "the head's last words\n"
    assert (copy / "ray-session" / "dashboard.log").read_text() == "the dashboard's last words\n"
    assert stat.S_IMODE(copy.parent.stat().st_mode) == 0o700, "another local user could read the kept logs"
    assert copy.parent.parent == tmp_path and copy.parent.name.startswith("testcluster-failed-logs-")


def test_the_stacks_among_a_tests_fixture_values(tmp_path: Path) -> None:
    session_logs, own = tmp_path / "session" / "logs", tmp_path / "own"
    session_logs.mkdir(parents=True)
    (own / "logs").mkdir(parents=True)
    session = RealCluster(tmp_path / "kc", "https://127.0.0.1:1", session_logs, tmp_path / "pki")
    stopped = SimpleNamespace(workdir=tmp_path / "gone")  # a stack whose directory was removed
    values = [session, "text", None, SimpleNamespace(workdir=own), session, stopped, SimpleNamespace(workdir="not a path")]
    assert stack_logs_of(values) == [session_logs, own / "logs"]
