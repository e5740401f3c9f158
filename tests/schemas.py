"""The CRD schemas from ../shared/crds, as JSON Schema validators.

Used by the manifest tests and by the test API server, so that what either
accepts, a real API server with strict field validation would accept too.
The CRD files are read where they lie (never copied into the project).

What this does not check: CEL rules (`x-kubernetes-validations`) and list-map
uniqueness, which need a real API server; the opt-in e2e suite covers them.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def shared_dir() -> Path:
    env = os.environ.get("RAYBRIDGE_SHARED_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared"


def crd_dir() -> Path:
    return shared_dir() / "crds"


def _structural(schema: Any) -> Any:
    """Kubernetes structural-schema extensions -> plain JSON Schema, strict on unknown fields."""
    if isinstance(schema, list):
        return [_structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _structural(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if (
        out.get("type") == "object"
        and "properties" in out
        and "additionalProperties" not in out
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.lru_cache(maxsize=None)
def crds() -> dict[tuple[str, str], dict[str, Any]]:
    """(group, kind) -> the CRD object, for every CRD file under crds/."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(crd_dir().glob("*/*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=_LOADER):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                spec = doc["spec"]
                found[(spec["group"], spec["names"]["kind"])] = doc
    return found


@functools.lru_cache(maxsize=None)
def validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    """A validator for one served version of a CRD kind; KeyError if unknown."""
    group, _, version = api_version.rpartition("/")
    crd = crds()[(group, kind)]
    for served in crd["spec"]["versions"]:
        if served["name"] == version and served.get("served", True):
            schema = copy.deepcopy(served["schema"]["openAPIV3Schema"])
            schema = _structural(schema)
            # apiVersion/kind/metadata are checked by the API server itself.
            schema.setdefault("properties", {})["metadata"] = {"type": "object"}
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
            return cls(schema)
    raise KeyError(f"{kind}.{group} does not serve {version}")


def is_crd_kind(api_version: str, kind: str) -> bool:
    group = api_version.rpartition("/")[0]
    return (group, kind) in crds()


def schema_errors(obj: dict[str, Any]) -> list[str]:
    """Human-readable schema violations of a custom object (empty when valid)."""
    checker = validator(obj.get("apiVersion", ""), obj.get("kind", ""))
    return [_describe(e) for e in _sorted(checker.iter_errors(obj))]


def _sorted(errors: Iterator[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    return sorted(errors, key=lambda e: list(map(str, e.absolute_path)))


def _describe(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in error.absolute_path) or "<root>"
    return f"{path}: {error.message}"
