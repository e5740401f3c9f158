"""raybridge refuses to start Ray where Ray would die importing a broken amdsmi, and says why."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from raybridge.gpu import ray_start as compat

BROKEN_AMDSMI = "print('Unable to find libamd_smi.so library')\nraise KeyError('libamd_smi.so')\n"
WORKING_AMDSMI = "VERSION = 'fake'\n"

ROWS = [
    # ray version, amdsmi module text (None: not installed), problem expected
    ("2.60.0", BROKEN_AMDSMI, True),
    ("2.56.0", BROKEN_AMDSMI, True),
    ("2.55.1", BROKEN_AMDSMI, False),  # talks to the library through ctypes, never imports amdsmi
    ("2.60.0", WORKING_AMDSMI, False),
    ("2.60.0", None, False),
]


@pytest.mark.parametrize("ray_version, amdsmi_source, expected", ROWS)
def test_ray_import_problem(ray_version, amdsmi_source, expected, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "version", lambda name: ray_version)
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    if amdsmi_source is not None:
        (tmp_path / "amdsmi.py").write_text(amdsmi_source)
        monkeypatch.syspath_prepend(str(tmp_path))
    else:
        monkeypatch.setattr(compat, "find_spec", lambda name: None)
    problem = compat.ray_import_problem()
    assert (problem is not None) == expected
    if expected:
        assert "pip uninstall amdsmi" in problem and ray_version in problem and "KeyError" in problem
