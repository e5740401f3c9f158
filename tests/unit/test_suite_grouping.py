"""The suite's own parallel plumbing: tests of one `xdist_group` run on one worker, one after another.

Why: a module's real cluster (a release of the matrix, the shipped example's, the queue
generator's) is a module fixture shared through an xdist group; a group split across workers,
or pulled apart by the run order, starts that cluster once per piece (a minute each). pytest
9.2 silently broke xdist's grouping (pytest-dev/pytest-xdist#1386); this fails if it breaks again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

TOY = '''
import os, pytest

def record(group):
    with open(os.path.join(os.environ["GROUPING_OUT"], group), "a") as out:
        out.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")

@pytest.fixture(scope="module", params=[pytest.param(g, marks=pytest.mark.xdist_group(g)) for g in ("p1", "p2", "p3")])
def release(request):
    return request.param

@pytest.mark.parametrize("n", range(3))
def test_param_group(release, n):
    record(release)

@pytest.mark.xdist_group("mod")
@pytest.mark.parametrize("n", range(6))
def test_marked_group(n):
    record("mod")
'''


def test_each_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_toy.py").write_text(TOY)
    (tmp_path / "none.ini").write_text("[pytest]\n")  # none of the suite's settings or plugins
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup", "-c", str(tmp_path / "none.ini"),
         "--rootdir", str(tmp_path), str(tmp_path / "test_toy.py")],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, env={**os.environ, "GROUPING_OUT": str(out_dir)},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    workers = {path.name: set(path.read_text().split()) for path in out_dir.iterdir()}
    assert sorted(workers) == ["mod", "p1", "p2", "p3"], workers
    assert all(len(seen) == 1 for seen in workers.values()), f"a group ran on several workers: {workers}"


def test_the_run_order_keeps_each_group_together() -> None:
    """The suite's run order (conftest.py: the longest first) moves a group as a whole: the release matrix's
    tests of one release stay next to each other, so its cluster is set up once."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "tests/e2e/test_release_matrix.py", "tests/e2e/test_examples.py"],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "RAYBRIDGE_TESTCLUSTER": "0"},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    ids = [line for line in run.stdout.splitlines() if "::" in line]
    positions: dict[str, list[int]] = defaultdict(list)
    for index, test_id in enumerate(ids):
        if "test_release_matrix" in test_id:
            positions[test_id.rsplit("[", 1)[1].rstrip("]")].append(index)
    assert len(positions) >= 3, ids
    for release, where in positions.items():
        assert where == list(range(where[0], where[0] + len(where))), f"{release}'s tests are apart: {where}"
