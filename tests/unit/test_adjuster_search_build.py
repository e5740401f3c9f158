"""Which build of the exact packing's searches runs: the compiled copy only where it was built from this very source.

Why: setup.py compiles a copy of exact_search.py; an editable install keeps that copy beside the source, so an edited
source would silently run as it was before the edit if the copy were taken on its name alone. And an install that
could compile should have: a build that quietly fell back to pure Python costs three to five times the CPU per pass.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import types
from pathlib import Path

import pytest

from raybridge.adjuster.decision import exact_search, packing, searches

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIGEST = hashlib.sha256(Path(exact_search.__file__).read_bytes()).hexdigest()


def _fake_native(monkeypatch: pytest.MonkeyPatch, digest: object) -> str:
    name = "raybridge_test_fake_native_search"
    module = types.ModuleType(name)
    if digest is not None:
        module.BUILT_FROM_SHA256 = digest  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, module)
    return name


@pytest.mark.parametrize(
    ("digest", "kind", "reason"),
    [
        (SOURCE_DIGEST, "compiled", "mypyc, built from this exact_search.py"),
        ("0" * 64, "interpreted", "built from another exact_search.py: install raybridge again"),
        (None, "interpreted", "built from another exact_search.py"),
    ],
    ids=["built-from-this-source", "built-from-another", "no-digest"],
)
def test_the_compiled_copy_runs_only_when_built_from_this_source(monkeypatch: pytest.MonkeyPatch, digest: object, kind: str, reason: str) -> None:
    module, build = searches.choose(native_name=_fake_native(monkeypatch, digest))
    assert build.kind == kind and reason in build.reason
    assert (module is exact_search) == (kind == "interpreted")


def test_no_compiled_copy_runs_the_source() -> None:
    module, build = searches.choose(native_name="raybridge_test_no_such_module")
    assert module is exact_search and build.kind == "interpreted" and "no compiled copy" in build.reason


def test_an_unreadable_source_runs_the_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    source = types.ModuleType("exact_search_elsewhere")
    source.__file__ = str(tmp_path / "gone.py")
    module, build = searches.choose(source=source, native_name=_fake_native(monkeypatch, SOURCE_DIGEST))
    assert module is source and build.kind == "interpreted" and "cannot read" in build.reason


def test_packing_searches_with_the_chosen_build() -> None:
    chosen = sys.modules[searches.NATIVE_MODULE] if searches.BUILD.kind == "compiled" else exact_search
    assert packing.BinCompletion is chosen.BinCompletion and packing.BranchAndBound is chosen.BranchAndBound


def _compiler_present() -> bool:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(compiler) is not None


#: Why this install is pure Python by design, or "" where it compiles the searches.
PURE_BY_DESIGN = ("RAYBRIDGE_BUILD_PURE asked the install for pure Python" if os.environ.get("RAYBRIDGE_BUILD_PURE")
                  else "" if _compiler_present() else "no C compiler on this machine: the install is pure Python by design")
on_a_compiling_install = pytest.mark.skipif(bool(PURE_BY_DESIGN), reason=PURE_BY_DESIGN or "the install compiles the searches")


@on_a_compiling_install
def test_an_install_with_a_compiler_compiled_the_searches() -> None:
    """The README's install (`pip install -e '.[test]'`) on a machine with a C compiler runs the compiled searches.
    Fails after an edit of exact_search.py until the install runs again, which is when the copy is rebuilt."""
    assert searches.BUILD.kind == "compiled", f"the searches run {searches.BUILD}"


def _dockerfile_check() -> str:
    """The code the image's runtime stage runs after installing the wheel (`python -c "..."`)."""
    text = (ROOT / "Dockerfile").read_text()
    match = re.search(r'python -c "(from raybridge\.adjuster\.decision\.searches import BUILD[^"]*)"', text)
    assert match, "the Dockerfile no longer checks that the image's searches are compiled"
    return match.group(1)


def test_the_image_build_fails_where_its_searches_would_run_interpreted() -> None:
    hide_native = f"import sys\nsys.modules[{searches.NATIVE_MODULE!r}] = None\n"  # an import of it raises ImportError
    done = subprocess.run([sys.executable, "-c", hide_native + _dockerfile_check()], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "AssertionError: interpreted (no compiled copy" in done.stderr


@on_a_compiling_install
def test_the_image_build_passes_where_its_searches_are_compiled() -> None:
    done = subprocess.run([sys.executable, "-c", _dockerfile_check()], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_controller_says_which_build_it_runs_in_its_metrics() -> None:
    from raybridge.adjuster.controller import Controller
    from tests.adjuster_world import run_settings

    registry = Controller(run_settings(), kube=None).metrics.registry  # type: ignore[arg-type] - no API call is made
    said = {build: registry.get_sample_value("raybridge_adjuster_exact_search_build", {"build": build}) for build in ("compiled", "interpreted")}
    assert said == {"compiled": float(searches.BUILD.kind == "compiled"), "interpreted": float(searches.BUILD.kind == "interpreted")}
