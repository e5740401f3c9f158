"""Reading a job spec file: the one place where a spec's text comes from disk.

Why it exists: the spec parser (`jobs/decision/spec.py`) is pure and reads no file, and the
file reader (`files.py`) knows nothing of what a job spec is; `load_spec` joins them for the
CLI and the Python API. It does not validate the spec beyond what the parser does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from pydantic.alias_generators import to_snake

from raybridge.errors import BadInput
from raybridge.files import read_user_file
from raybridge.jobs.decision.spec import JobSpec, build_spec, parse_spec

#: What the Python API takes as a job: a JobSpec, a spec file's path, or a mapping of the spec's fields.
SpecLike = Union[JobSpec, str, "os.PathLike[str]", Mapping[str, Any]]


def load_spec(path: Optional[str | Path], overrides: Optional[dict[str, Any]] = None) -> Any:
    """The JobSpec in a YAML file (or none), non-None `overrides` on top; a relative workingDir is relative to the file."""
    if path is None:
        return parse_spec(None, overrides=overrides)
    text = read_user_file(path, "spec")
    return parse_spec(text, f"spec file {str(path)!r}", str(Path(path).resolve().parent), overrides)


def as_spec(spec: Any, overrides: Optional[Mapping[str, Any]] = None) -> JobSpec:
    """A JobSpec from what a Python caller passed: a JobSpec as it is, a path (str or PathLike) read as a spec
    file, a mapping validated as the spec's fields (camelCase or snake_case); anything else is BadInput.

    `overrides`: spec fields (camelCase or snake_case) that win over the spec's own, as the command line's flags
    win over a spec file (`queue`, `gpus`, `name`, ...); None values are left out, as unset flags are."""
    if overrides is not None and not isinstance(overrides, Mapping):
        raise BadInput(f"overrides must be a mapping of spec fields, not {type(overrides).__name__}")
    given = {to_snake(str(key)): value for key, value in (overrides or {}).items() if value is not None}
    if isinstance(spec, JobSpec):
        return build_spec({**spec.model_dump(exclude_none=True), **given}) if given else spec
    if isinstance(spec, (str, os.PathLike)):
        return load_spec(spec, given)
    if isinstance(spec, Mapping):
        return build_spec({**{to_snake(str(k)): v for k, v in spec.items()}, **given}) if given else build_spec(dict(spec))
    raise BadInput(f"the spec must be a JobSpec, a spec file's path or a mapping of its fields, not {type(spec).__name__}")
