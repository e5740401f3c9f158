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


def _private_reaches(source: str) -> list[str]:
    """Private names one module takes from another: `from testcluster.x import _name`, and `stack._name` (a Stack's
    private attributes, used from a component's own file)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("testcluster"):
            found += [f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if isinstance(node.value, ast.Name) and node.value.id == "stack":
                found.append(f"line {node.lineno}: stack.{node.attr}")
    return found


@pytest.mark.parametrize("path", MODULES, ids=[p.relative_to(TESTCLUSTER).as_posix() for p in MODULES])
def test_no_component_reaches_into_another_s_private_names(path: Path) -> None:
    """One component per file, as envtest and kwokctl lay them out: each file takes from another only what it offers."""
    assert _private_reaches(path.read_text()) == []


def test_the_private_name_check_finds_what_it_looks_for() -> None:
    source = "from testcluster.stack import _module_dir, Stack\nstack._install_crds([])\nstack.install_crds([])\n"
    assert _private_reaches(source) == ["line 1: from testcluster.stack import _module_dir", "line 2: stack._install_crds"]
