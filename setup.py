"""The one compiled part of raybridge: the exact packing's searches, built with mypyc where the build can.

Everything else is in pyproject.toml. `raybridge/adjuster/decision/exact_search.py` stays the source and runs as it
is wherever nothing was built; the build compiles a copy of it under another name, `_exact_search_native`, with the
source's SHA-256 appended, so an edited source is never shadowed by an older build
(`raybridge/adjuster/decision/searches.py` compares the two at import and takes the source when they differ).
Compiled, the searches visit the same states and count the same steps, three to five times as fast.

What this deliberately does not do: fail an install. Without mypy in the build environment, without a C compiler,
or with `RAYBRIDGE_BUILD_PURE=1`, the package installs as pure Python and decides the same, more slowly.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
SOURCE = Path("raybridge", "adjuster", "decision", "exact_search.py")
NATIVE_NAME = "_exact_search_native"
#: where the copy is staged: a tree of its own, so the compiled module's name is raybridge.adjuster.decision.<NATIVE_NAME>
STAGING = Path("build", "native-src")


def _warn(message: str) -> None:
    print(f"raybridge: {message}; installing the exact packing's searches as pure Python (the same decisions, slower)", file=sys.stderr)


def native_extensions() -> list:
    """mypyc's extensions for the staged copy, or none where the build cannot make them."""
    if os.environ.get("RAYBRIDGE_BUILD_PURE"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _warn("mypy is not in the build environment")
        return []
    source = (ROOT / SOURCE).read_bytes()
    package = STAGING / SOURCE.parent
    package.mkdir(parents=True, exist_ok=True)
    for folder in (STAGING / "raybridge", STAGING / "raybridge" / "adjuster", package):
        (folder / "__init__.py").write_text("")
    staged = package / f"{NATIVE_NAME}.py"
    digest = hashlib.sha256(source).hexdigest()
    staged.write_bytes(source + f'\n\n#: the SHA-256 of the exact_search.py this was compiled from\nBUILT_FROM_SHA256 = "{digest}"\n'.encode())
    try:
        return mypycify([str(staged)], opt_level="3", target_dir=str(Path("build", "mypyc")))
    except (Exception, SystemExit) as error:  # mypy reports type errors by exiting
        _warn(f"mypyc could not compile {SOURCE} ({error})")
        return []


class OptionalBuildExt(build_ext):
    """build_ext that installs pure Python where the C compiler is missing or fails."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:
            _warn(f"the C build failed ({error})")

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as error:
            _warn(f"the C build of {ext.name} failed ({error})")


setup(ext_modules=native_extensions(), cmdclass={"build_ext": OptionalBuildExt})
