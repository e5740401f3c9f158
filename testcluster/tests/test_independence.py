"""testcluster stands on its own: no module of it imports raybridge, raybridge's tests or kubesim.

Why: the real cluster judges raybridge; a harness that borrowed raybridge's code (its manifests,
its constants) or the simulation's ideas would agree with them by construction. The check itself
is kubesim's (`forbidden_imports`, with its own table of cases); kubesim is imported here, by the
test, not by testcluster.
What this deliberately does not do: check the other direction (the tests import testcluster).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesim.tests.test_independence import absolute_imports

TESTCLUSTER = Path(__file__).resolve().parents[1]
FORBIDDEN = ("raybridge", "tests", "benchmarks", "kubesim")
#: testcluster's own modules; its tests may use kubesim's import check.
MODULES = sorted(p for p in TESTCLUSTER.rglob("*.py") if "tests" not in p.relative_to(TESTCLUSTER).parts)


def test_the_check_sees_every_module() -> None:
    names = {p.relative_to(TESTCLUSTER).as_posix() for p in MODULES}
    assert {"__init__.py", "stack.py", "programs.py", "pytest_plugin.py", "client.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=[p.relative_to(TESTCLUSTER).as_posix() for p in MODULES])
def test_no_testcluster_module_imports_raybridge_or_kubesim(path: Path) -> None:
    found = [f"line {line}: {module}" for line, module in absolute_imports(path.read_text()) if module.split(".")[0] in FORBIDDEN]
    assert found == []
