"""Every dependency of the package and of its extras is bounded above, below its next major release.

Why: a fresh install takes the newest release of each dependency; an unbounded one can pull a new
major (an API removed, a default changed) into a user's install or CI without anyone having run the
suite on it. With an upper bound a new major is taken on purpose, in a change that raises the bound.
"""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement

from tests.helpers import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
REQUIREMENTS = [*PROJECT["dependencies"], *(r for extra in PROJECT["optional-dependencies"].values() for r in extra)]


def upper_bound(requirement: str) -> str | None:
    """The release the requirement stays below (`<X`, `<=X`, `~=X` or `==X`), or None when it has none."""
    for spec in Requirement(requirement).specifier:
        if spec.operator in ("<", "<=", "~=", "==", "==="):
            return spec.version
    return None


def test_every_dependency_has_an_upper_bound() -> None:
    unbounded = [r for r in REQUIREMENTS if upper_bound(r) is None]
    assert unbounded == [], f"bound these below their next major release: {unbounded}"


def test_the_check_sees_a_missing_bound() -> None:
    assert upper_bound("kubernetes>=30") is None
    assert upper_bound("kubernetes>=30,<38") == "38"
    assert upper_bound("ray[default]>=2.52,<3") == "3"
