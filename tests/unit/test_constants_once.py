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
