"""The CRD schemas from ../shared/crds, per supported release, as JSON Schema validators.

Used by the manifest tests and by the test API server, so that what either
accepts, a real API server with strict field validation would accept too.
The CRD files are read where they lie (never copied into the project).

Releases: `../shared/crds/kuberay` and `../shared/crds/kueue` hold the newest
KubeRay and Kueue CRDs (ids `kuberay-newest`, `kueue-newest`);
`../shared/crds/versions/<id>/` holds older releases (`kuberay-v1.3.2`, ...).
`crds(kuberay=..., kueue=...)` gives the CRDs of one combination; the KAI
Queue and ProvisioningRequest CRDs always come from the top folder.
`release_pair(release)` turns one release id into that combination (the other
project at its newest), which is what a test parametrized over `RELEASES`
starts its server with.

Where the CRD folder is absent (a clone with nothing beside it), every function
that reads it raises `CrdsAbsent` instead of serving fewer kinds; the pytest
plugin (kubesim/pytest_plugin.py) turns that into a skip of the test that asked.
A folder that is present but lacks a release is not covered: that is an error.

What this does not check: CEL rules (`x-kubernetes-validations`) and list-map
uniqueness; the test API server checks both (kubesim/cel.py, validation.py).
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

KUBERAY_NEWEST = "kuberay-newest"
KUEUE_NEWEST = "kueue-newest"
KUBERAY_RELEASES = ("kuberay-v1.3.2", "kuberay-v1.5.2", KUBERAY_NEWEST)
KUEUE_RELEASES = ("kueue-v0.13.10", "kueue-v0.15.8", KUEUE_NEWEST)
# Every release the project supports; use these strings as pytest ids.
RELEASES = KUBERAY_RELEASES + KUEUE_RELEASES
_NEWEST_FOLDERS = {KUBERAY_NEWEST: "kuberay", KUEUE_NEWEST: "kueue"}
_ALWAYS_NEWEST = ("kai", "autoscaler")
#: Hand-written minimal CRDs for kinds whose real CRD is not in ../shared/crds (KAI's PodGroup); see the files.
TEST_ONLY_CRDS = Path(__file__).resolve().parent / "crds"


def shared_dir() -> Path:
    env = os.environ.get("RAYBRIDGE_SHARED_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared"


def crd_dir() -> Path:
    return shared_dir() / "crds"


class CrdsAbsent(Exception):
    """The CRD folder (`crd_dir()`) does not exist, so no KubeRay, Kueue or KAI CRD can be read.

    Deliberately not an OSError or LookupError: code that handles a missing file or an unknown
    kind must not take this for one (and so go on with fewer CRDs than the project has).
    """


def crds_present() -> bool:
    return crd_dir().is_dir()


def require_crds() -> Path:
    """`crd_dir()`, or CrdsAbsent (with what to do about it) where that folder does not exist."""
    folder = crd_dir()
    if not folder.is_dir():
        raise CrdsAbsent(
            f"needs ../shared/crds (KubeRay/Kueue CRD schemas), absent here ({folder}); "
            "set RAYBRIDGE_SHARED_DIR to the folder that holds crds/"
        )
    return folder


def release_dir(release: str) -> Path:
    """The folder holding the CRDs of one release id; ValueError for an unknown id, CrdsAbsent without the CRD folder."""
    if release not in RELEASES:
        raise ValueError(f"unknown release {release!r}; known: {', '.join(RELEASES)}")
    folder = require_crds()
    if release in _NEWEST_FOLDERS:
        return folder / _NEWEST_FOLDERS[release]
    return folder / "versions" / release


def release_pair(release: str) -> tuple[str, str]:
    """(kuberay, kueue) for one release id: the named one, the other project at its newest."""
    if release in KUBERAY_RELEASES:
        return release, KUEUE_NEWEST
    if release in KUEUE_RELEASES:
        return KUBERAY_NEWEST, release
    raise ValueError(f"unknown release {release!r}; known: {', '.join(RELEASES)}")


def _structural(schema: Any) -> Any:
    """Kubernetes structural-schema extensions -> plain JSON Schema, strict on unknown fields."""
    if isinstance(schema, list):
        return [_structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _structural(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if isinstance(out.get("pattern"), str):
        out["pattern"] = _python_pattern(out["pattern"])
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


def _python_pattern(pattern: str) -> str:
    """A Go (RE2) pattern for Python's re: an inline flag such as `^(?i)...` must lead the expression.

    Kueue's AdmissionCheck `parameters.kind` pattern is `^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$`; RE2
    applies the flag from where it stands, which at the start of the match is the whole pattern.
    """
    for flag in ("(?i)", "(?s)", "(?m)"):
        if flag in pattern and not pattern.startswith(flag):
            pattern = flag + pattern.replace(flag, "")
    return pattern


@functools.lru_cache(maxsize=None)
def _folder_crds(folder: Path) -> tuple[dict[str, Any], ...]:
    found = []
    for path in sorted(folder.glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=_LOADER):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                found.append(doc)
    return tuple(found)


@functools.lru_cache(maxsize=None)
def crds(kuberay: str = KUBERAY_NEWEST, kueue: str = KUEUE_NEWEST) -> dict[tuple[str, str], dict[str, Any]]:
    """(group, kind) -> the CRD object, for the given KubeRay and Kueue releases (newest by default).

    CrdsAbsent where the CRD folder does not exist (never just the test-only CRDs).
    """
    if kuberay not in KUBERAY_RELEASES:
        raise ValueError(f"unknown KubeRay release {kuberay!r}; known: {', '.join(KUBERAY_RELEASES)}")
    if kueue not in KUEUE_RELEASES:
        raise ValueError(f"unknown Kueue release {kueue!r}; known: {', '.join(KUEUE_RELEASES)}")
    folders = [release_dir(kuberay), release_dir(kueue), *(crd_dir() / name for name in _ALWAYS_NEWEST), TEST_ONLY_CRDS]
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for folder in folders:
        for doc in _folder_crds(folder):
            spec = doc["spec"]
            found[(spec["group"], spec["names"]["kind"])] = doc
    return found


def served_versions(crd: dict[str, Any]) -> list[str]:
    return [v["name"] for v in crd["spec"]["versions"] if v.get("served", True)]


@functools.lru_cache(maxsize=None)
def validator(
    api_version: str, kind: str, kuberay: str = KUBERAY_NEWEST, kueue: str = KUEUE_NEWEST
) -> jsonschema.protocols.Validator:
    """A validator for one served version of a CRD kind; KeyError if unknown or not served."""
    group, _, version = api_version.rpartition("/")
    return crd_validator(crds(kuberay, kueue)[(group, kind)], version)


_CRD_VALIDATORS: dict[tuple[int, str], tuple[dict[str, Any], jsonschema.protocols.Validator]] = {}


def crd_validator(crd: dict[str, Any], version: str) -> jsonschema.protocols.Validator:
    """The JSON Schema validator of one served version of a CRD object (cached per CRD object)."""
    key = (id(crd), version)
    cached = _CRD_VALIDATORS.get(key)
    if cached is not None and cached[0] is crd:
        return cached[1]
    for served in crd["spec"]["versions"]:
        if served["name"] == version and served.get("served", True):
            schema = copy.deepcopy(served["schema"]["openAPIV3Schema"])
            schema = _structural(schema)
            # apiVersion/kind/metadata are checked by the API server itself.
            schema.setdefault("properties", {})["metadata"] = {"type": "object"}
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
            checker = cls(schema)
            _CRD_VALIDATORS[key] = (crd, checker)  # the CRD is kept alive, so its id stays unique
            return checker
    raise KeyError(f"{crd['spec']['names']['kind']}.{crd['spec']['group']} does not serve {version}")


def is_crd_kind(api_version: str, kind: str, kuberay: str = KUBERAY_NEWEST, kueue: str = KUEUE_NEWEST) -> bool:
    group = api_version.rpartition("/")[0]
    return (group, kind) in crds(kuberay, kueue)


def schema_errors(obj: dict[str, Any], kuberay: str = KUBERAY_NEWEST, kueue: str = KUEUE_NEWEST) -> list[str]:
    """Human-readable schema violations of a custom object (empty when valid)."""
    checker = validator(obj.get("apiVersion", ""), obj.get("kind", ""), kuberay, kueue)
    return [_describe(e) for e in _sorted(checker.iter_errors(obj))]


def _sorted(errors: Iterator[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    return sorted(errors, key=lambda e: list(map(str, e.absolute_path)))


def _describe(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in error.absolute_path) or "<root>"
    return f"{path}: {error.message}"


# --- older releases (crds/versions/<project>-<tag>/) --------------------------------------------


def releases() -> list[str]:
    """The release folders under crds/versions, e.g. "kueue-v0.13.10"."""
    return sorted(p.name for p in (require_crds() / "versions").iterdir() if p.is_dir())


@functools.lru_cache(maxsize=None)
def release_crds(release: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(group, kind) -> CRD object, for the CRD files of one release folder."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted((require_crds() / "versions" / release).glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=_LOADER):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                found[(doc["spec"]["group"], doc["spec"]["names"]["kind"])] = doc
    return found


def release_serves(release: str, api_version: str, kind: str) -> bool | None:
    """True/False whether the release serves that version of the kind; None when it has no such CRD."""
    group, _, version = api_version.rpartition("/")
    crd = release_crds(release).get((group, kind))
    if crd is None:
        return None
    return any(v["name"] == version and v.get("served", True) for v in crd["spec"]["versions"])


@functools.lru_cache(maxsize=None)
def _release_validator(release: str, api_version: str, kind: str) -> jsonschema.protocols.Validator:
    group, _, version = api_version.rpartition("/")
    crd = release_crds(release)[(group, kind)]
    for served in crd["spec"]["versions"]:
        if served["name"] == version and served.get("served", True):
            schema = _structural(copy.deepcopy(served["schema"]["openAPIV3Schema"]))
            schema.setdefault("properties", {})["metadata"] = {"type": "object"}
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
            return cls(schema)
    raise KeyError(f"{kind}.{group} {version} is not served by {release}")


def release_schema_errors(obj: dict[str, Any], release: str) -> list[str]:
    """Schema violations of a custom object against one older release's CRD (empty when valid)."""
    checker = _release_validator(release, obj.get("apiVersion", ""), obj.get("kind", ""))
    return [_describe(e) for e in _sorted(checker.iter_errors(obj))]
