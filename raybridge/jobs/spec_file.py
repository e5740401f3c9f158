"""Reading a job spec file: the one place where a spec's text comes from disk.

Why it exists: the spec parser (`jobs/decision/spec.py`) is pure and reads no file, and the
file reader (`files.py`) knows nothing of what a job spec is; `load_spec` joins them for the
CLI and the Python API. It does not validate the spec beyond what the parser does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from raybridge.files import read_user_file
from raybridge.jobs.decision.spec import parse_spec


def load_spec(path: Optional[str | Path], overrides: Optional[dict[str, Any]] = None) -> Any:
    """The JobSpec in a YAML file (or none), non-None `overrides` on top; a relative workingDir is relative to the file."""
    if path is None:
        return parse_spec(None, overrides=overrides)
    text = read_user_file(path, "spec")
    return parse_spec(text, f"spec file {str(path)!r}", str(Path(path).resolve().parent), overrides)
