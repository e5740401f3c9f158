"""Each name raybridge shares with the cluster (a label key, an API group, a class) is written in one module.

Two modules that spell the same value each on their own drift apart unseen; the others import the one
definition (`core/consts.py` for what several domains share). Values that are equal by coincidence, not
one name, are listed with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "raybridge"
#: Equal values that are not one name: (value, why).
COINCIDENCES = {
    "auth_token": "a file name in the private head's folder and a key of the dashboard's config: two formats",
    "default": "the default namespace and the default LocalQueue's name",
}


def string_constants() -> dict[str, list[str]]:
    """Value -> every `module:NAME` that assigns it as a string literal at module level."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                continue
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.isupper() and len(node.value.value) >= 6:
                    found.setdefault(node.value.value, []).append(f"{path.relative_to(PACKAGE.parent)}:{target.id}")
    return found


def test_each_shared_name_is_defined_in_one_module():
    twice = {value: where for value, where in string_constants().items()
             if len({w.split(":")[0] for w in where}) > 1 and value not in COINCIDENCES}
    assert not twice, "\n".join(f"{value!r}: {', '.join(where)}" for value, where in sorted(twice.items()))


def environment_reads() -> dict[str, set[str]]:
    """Variable name -> the modules that read it (`os.environ.get(X)`, `os.environ[X]`, `os.getenv(X)`; X a literal or a
    module-level constant)."""
    named = {where.split(":")[1]: value for value, places in string_constants().items() for where in places}

    def name_of(node: ast.AST) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        return named.get(node.id) if isinstance(node, ast.Name) else None  # a module-level constant such as RAY_ADDRESS_ENV

    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = str(path.relative_to(PACKAGE.parent))
        for node in ast.walk(ast.parse(path.read_text())):
            key = None
            if isinstance(node, ast.Call) and node.args and ast.unparse(node.func) in ("os.environ.get", "os.getenv", "environ.get"):
                key = name_of(node.args[0])
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ"):
                key = name_of(node.slice)
            if isinstance(key, str):
                found.setdefault(key, set()).add(module)
    return found


def test_each_environment_variable_is_read_in_one_module():
    """A variable read in several places is a rule in several places: each is read by one function the others call."""
    twice = {name: sorted(where) for name, where in environment_reads().items() if len(where) > 1}
    assert not twice, "\n".join(f"{name}: {', '.join(where)}" for name, where in sorted(twice.items()))
