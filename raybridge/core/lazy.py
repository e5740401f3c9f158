"""Lazy re-exports for the packages' `__init__`s: a name is imported from its module on first use.

Why it exists: each package's `__init__` only re-exports, and importing one
module of a package must not load the rest of it (a lifecycle command would
load the submit path and the spec's models; `--help` would load ray or
kubernetes). One rule, used by every `__init__` that re-exports.
What it deliberately does not do: no caching beyond Python's module cache, no
star-imports, no import at all until a name is asked for.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[list[str], Callable[[str], Any]]:
    """`(__all__, __getattr__)` for `package`: each name of `exports` from the module beside it (absolute, or
    relative to `package` where it starts with a dot)."""

    def lazy_attribute(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module, package), name)

    return sorted(exports), lazy_attribute
