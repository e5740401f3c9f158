"""The README's install, as a user makes it, imports this package from anywhere: also from the folder that holds
the clone.

Why this module exists: installed with setuptools' default editable mode, `import raybridge` run from the folder
holding the clone (a notebook beside it) found the clone's folder `raybridge` first, took it for an empty namespace
package, and `raybridge.submit` was "no attribute" (setuptools' editable finder comes after Python's path search,
which settles on the namespace package: pypa/setuptools issue 3592). The README's command installs in
`editable_mode=compat`, which puts the clone on the path, where the package wins over the namespace portion.

What it deliberately does not do: install the dependencies (`--no-deps`: the test run's own environment has them;
a fresh install of Ray is minutes and a network's worth of wheels), or run a job from the new environment.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT


def readme_install() -> list[str]:
    """The README's `pip install ...` of the first command (Set up), as words."""
    text = (ROOT / "README.md").read_text()
    line = re.search(r"```bash\n(python3 -m venv .*)\n```", text[text.index("## Set up") :]).group(1)  # type: ignore[union-attr]
    install = next(part.strip() for part in line.split("&&") if part.strip().startswith("pip install"))
    return shlex.split(install)


def test_the_readme_install_imports_the_package_from_the_folder_that_holds_the_clone(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}  # the new environment's path alone
    # Not the compiled searches: an editable build deletes the clone's own copy and writes it again, while other tests
    # may be importing it (setuptools/_distutils/file_util.py _copy_file_contents), and compiling takes a minute.
    env["RAYBRIDGE_BUILD_PURE"] = "1"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    words = readme_install()
    assert words[:3] == ["pip", "install", "-e"] and words[3] == ".", words
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), *words[1:], "--no-deps", "-q"], cwd=str(ROOT), capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    if installed.returncode != 0 and re.search(r"NewConnectionError|Temporary failure in name resolution|No matching distribution", installed.stderr):
        pytest.skip(f"pip could not fetch the build backend: {installed.stderr.strip().splitlines()[-1]}")
    assert installed.returncode == 0, installed.stderr
    parent = tmp_path / "notebooks"
    parent.mkdir()
    (parent / "raybridge").symlink_to(ROOT, target_is_directory=True)  # the clone, under its usual name
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import raybridge; print(raybridge.__file__)"], cwd=str(parent),
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(ROOT / "raybridge" / "__init__.py"), found.stdout
