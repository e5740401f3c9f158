"""Reading the files a user names on the command line, with errors a user can act on.

One place so that a missing or unreadable spec, node list or pod list is
reported the same way: `BadInput` naming the flag and the path. It reads and
parses; what the objects mean is the pure core's business (`load_spec` reads
the spec file and leaves every rule about its fields to `core.spec.parse_spec`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from raybridge.core.inventory import items_of
from raybridge.errors import BadInput


def read_user_file(path: str | Path, what: str) -> str:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise BadInput(f"{what} file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise BadInput(f"{what} file {str(path)!r} is a directory") from None
    except OSError as exc:
        raise BadInput(f"{what} file {str(path)!r} cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{what} file {str(path)!r} is not text") from None


def load_spec(path: Optional[str | Path], overrides: Optional[dict[str, Any]] = None) -> Any:
    """The JobSpec in a YAML file (or none), non-None `overrides` on top; a relative workingDir is relative to the file."""
    from raybridge.core.spec import parse_spec

    if path is None:
        return parse_spec(None, overrides=overrides)
    text = read_user_file(path, "spec")
    return parse_spec(text, f"spec file {str(path)!r}", str(Path(path).resolve().parent), overrides)


def read_json_or_yaml(path: str, what: str) -> Any:
    text = read_user_file(path, what)
    try:
        return json.loads(text)
    except ValueError:
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            raise BadInput(f"{what} file {path!r} is neither JSON nor YAML") from None


def load_objects(path: str, kind: str) -> list[dict[str, Any]]:
    document = read_json_or_yaml(path, f"--{kind.lower()}s")
    try:
        return items_of(document, kind)
    except ValueError as exc:
        raise BadInput(f"--{kind.lower()}s {path!r}: {exc}") from None


def read_yaml_documents(path: str, what: str) -> list[Any]:
    """Every document of a YAML (or JSON) file, for multi-document manifests."""
    import yaml

    text = read_user_file(path, what)
    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise BadInput(f"{what} file {path!r} is not valid YAML{where}") from None
