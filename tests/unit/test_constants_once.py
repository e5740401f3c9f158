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
    "--context": "a flag's name where the CLI parses it and where discovery names what it read (jobs/ may not import cli/)",
    "--kubeconfig": "as --context",
    "--request-timeout": "as --context",
    "provisioning-request": "the adjuster's mode and its requests' component label: two names that read alike",
}


def _strings_in(value: ast.AST) -> list[str]:
    """The string literals a module-level value holds: itself, or the items of a tuple, list or set, a dict's keys
    and values, and those of `frozenset(...)`/`tuple(...)` of such a literal, nested."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return [value.value]
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        held = [s for item in value.elts for s in _strings_in(item)]
    elif isinstance(value, ast.Dict):
        held = [s for item in [*value.keys, *value.values] if item is not None for s in _strings_in(item)]
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("frozenset", "tuple", "set") and value.args:
        held = _strings_in(value.args[0])
    else:
        return []
    # Inside a collection, the names of the cluster's objects count (a label key, a resource, a class: they hold a
    # '/', '.' or '-'); plain words ("memory", "Running", "RayJob") are the vocabulary every table shares.
    return [s for s in held if any(c in s for c in "/.-")]


def string_constants() -> dict[str, list[str]]:
    """Value -> every `module:NAME` that assigns it at module level, alone or inside a tuple, list, set or dict."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Name) and target.id.isupper():
                    for text in dict.fromkeys(_strings_in(value)):
                        if len(text) >= 6:
                            found.setdefault(text, []).append(f"{path.relative_to(PACKAGE.parent)}:{target.id}")
    return found


def test_the_search_looks_inside_tuples_and_dicts(tmp_path: Path) -> None:
    tree = ast.parse("A = ('kai-resource-reservation', 1)\nB: dict = {'x': frozenset({'nvidia.com/gpu'})}\n")
    assert [s for node in tree.body for s in _strings_in(node.value)] == ["kai-resource-reservation", "nvidia.com/gpu"]


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
