"""kubesim stands on its own: no module of it imports raybridge or raybridge's test suite.

Why: raybridge's tests and benchmarks judge raybridge against this simulated
cluster; a simulation that borrowed raybridge's code (its manifests, its
constants, its decisions) would agree with raybridge by construction and hide
the very bugs it exists to find.
What this deliberately does not do: check the other direction (raybridge's
tests import kubesim, as they should), or imports built at run time
(`importlib.import_module` with a computed name; kubesim has none).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

KUBESIM = Path(__file__).resolve().parents[1]
#: Top-level packages of the raybridge repository that kubesim must not reach into.
FORBIDDEN = ("raybridge", "tests", "benchmarks")
MODULES = sorted(KUBESIM.rglob("*.py"))


def absolute_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) for every absolute import in `source`, however deeply nested (functions, `try`)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and _imports_by_name(node):
            found.append((node.lineno, node.args[0].value))
    return found


def _imports_by_name(call: ast.Call) -> bool:
    """`importlib.import_module("x")`, `__import__("x")`, `pytest.importorskip("x")` with a literal name."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    literal = bool(call.args) and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
    return name in ("import_module", "__import__", "importorskip") and literal


def forbidden_imports(source: str) -> list[str]:
    return [f"line {line}: {module}" for line, module in absolute_imports(source) if module.split(".")[0] in FORBIDDEN]


# (source, what the check must find in it)
ROWS = [
    ("import raybridge", ["line 1: raybridge"]),
    ("from raybridge.core import spec", ["line 1: raybridge.core"]),
    ("import os, raybridge.kube as kube", ["line 1: raybridge.kube"]),
    ("def f():\n    from tests.helpers import ROOT", ["line 2: tests.helpers"]),
    ("try:\n    import benchmarks.x\nexcept ImportError:\n    pass", ["line 2: benchmarks.x"]),
    ("import importlib\nimportlib.import_module('raybridge.cli')", ["line 2: raybridge.cli"]),
    ("import pytest\npytest.importorskip('tests.helpers')", ["line 2: tests.helpers"]),
    ("from . import sim_gpu\nfrom .tests import x\nimport kubesim.sim_gpu", []),
    ("import raybridgex\nimport testsuite", []),
]


@pytest.mark.parametrize(("source", "found"), ROWS, ids=[r[0].splitlines()[-1].strip() for r in ROWS])
def test_the_check_finds_imports_of_raybridge_wherever_they_stand(source: str, found: list[str]) -> None:
    assert forbidden_imports(source) == found


def test_the_check_sees_every_module() -> None:
    names = {p.relative_to(KUBESIM).as_posix() for p in MODULES}
    assert {"__init__.py", "sim_gpu.py", "sim_kueue.py", "real_api.py", "tests/test_independence.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=[p.relative_to(KUBESIM).as_posix() for p in MODULES])
def test_no_kubesim_module_imports_raybridge(path: Path) -> None:
    assert forbidden_imports(path.read_text()) == []
