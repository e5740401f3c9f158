"""The CRD schemas of each supported release, as JSON Schema validators.

Used by the manifest and config tests, offline, so that what they accept a real API server with strict field
validation would accept too (the shipped configs also go through the real one: tests/e2e). The CRD files are read
where they lie (never copied into the project): the same files the stack installs.

Where each release's CRDs come from (`MODULE_RELEASES`, `SHARED_RELEASES`), decided here once:
- the releases the test cluster builds (testcluster/programs.py), from their Go
  module in the Go module cache, found by testcluster/sources.py (`CRD_FOLDERS`,
  `cached_module_dir`: the same files the real stack installs): `kuberay-v1.3.2`,
  `kueue-v0.13.10`, and the newest of each project the test cluster builds
  (`kuberay-newest` is KubeRay v1.6.1, `kueue-newest` Kueue v0.19.2); KAI's Queue
  from KAI's module, the ProvisioningRequest from cluster-autoscaler's apis
  module at the version Kueue requires;
- the releases the Go module proxy does not serve (`kuberay-v1.5.2`,
  `kueue-v0.15.8`), from `../shared/crds/versions/<id>/` (or
  `$RAYBRIDGE_SHARED_DIR/crds/versions/<id>/`), the folder beside the clone.
`crds(kuberay=..., kueue=...)` gives the CRDs of one combination;
`release_pair(release)` turns one release id into that combination (the other
project at its newest), which is what a test parametrized over `RELEASES`
checks against.

Where a source is absent (no Go build yet on this machine, or a clone with
nothing beside it), every function that reads it raises `CrdsAbsent`, naming
what is missing, instead of checking fewer kinds; crds_skip.py turns that
into a skip of the test that asked. A
source that is present but lacks a file is not covered: that is an error.

What this does not check: CEL rules (`x-kubernetes-validations`) and list-map
uniqueness; the real kube-apiserver checks both where the tests send it the objects.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import Any, Iterator

import jsonschema


KUBERAY_NEWEST = "kuberay-newest"
KUEUE_NEWEST = "kueue-newest"
KUBERAY_RELEASES = ("kuberay-v1.3.2", "kuberay-v1.5.2", KUBERAY_NEWEST)
KUEUE_RELEASES = ("kueue-v0.13.10", "kueue-v0.15.8", KUEUE_NEWEST)
# Every release the project supports; use these strings as pytest ids.
RELEASES = KUBERAY_RELEASES + KUEUE_RELEASES
#: The releases read from the Go module the test cluster builds: id -> (project, version) (testcluster/programs.py RELEASES).
MODULE_RELEASES = {
    "kuberay-v1.3.2": ("kuberay", "v1.3.2"),
    KUBERAY_NEWEST: ("kuberay", "v1.6.1"),
    "kueue-v0.13.10": ("kueue", "v0.13.10"),
    KUEUE_NEWEST: ("kueue", "v0.19.2"),
}
#: The releases the module proxy does not serve, read from `../shared/crds/versions/<id>/`.
SHARED_RELEASES = ("kuberay-v1.5.2", "kueue-v0.15.8")
_AUTOSCALER_APIS = "k8s.io/autoscaler/cluster-autoscaler/apis"
#: The kinds checked, of all the CRDs the modules hold: those raybridge and the simulated controllers use. Left out:
#: Kueue's MultiKueue and Topology kinds, KAI's BindRequest, Config, SchedulingShard and Topology, KubeRay's RayCronJob.
CHECKED_KINDS = frozenset({
    "RayCluster", "RayJob", "RayService",
    "AdmissionCheck", "ClusterQueue", "Cohort", "LocalQueue", "ProvisioningRequestConfig", "ResourceFlavor",
    "WorkloadPriorityClass", "Workload",
    "Queue", "PodGroup", "ProvisioningRequest",
})  # fmt: skip


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


def _module_source(project: str, module_at_version: str) -> Path:
    """The CRD folder's module source, or CrdsAbsent naming the module the Go module cache lacks."""
    from testcluster.sources import ModuleNotCached, cached_module_dir

    try:
        return cached_module_dir(module_at_version)
    except ModuleNotCached as absent:
        raise CrdsAbsent(f"needs the {project} CRDs from the Go module cache: {absent}") from None


def _module_files(release: str) -> list[Path]:
    from testcluster.programs import program
    from testcluster.sources import crd_files

    project, version = MODULE_RELEASES[release]
    return crd_files(project, _module_source(project, program(project, version).upstream_module()))


def _kai_files() -> list[Path]:
    from testcluster.programs import program
    from testcluster.sources import crd_files

    return crd_files("kai", _module_source("KAI", program("kai-scheduler").upstream_module()))


def _autoscaler_files() -> list[Path]:
    """cluster-autoscaler's ProvisioningRequest CRD, at the version the newest Kueue requires (so its build downloads it)."""
    from testcluster.programs import program
    from testcluster.sources import crd_files, required_version

    kueue = program("kueue", MODULE_RELEASES[KUEUE_NEWEST][1])
    return crd_files("autoscaler", _module_source("ProvisioningRequest", required_version(kueue.module_dir, _AUTOSCALER_APIS)))


def crds_present() -> bool:
    """Whether every source of every release is here (the Go modules in the cache and the folder beside the clone)."""
    try:
        for release in RELEASES:
            release_files(release)
        _kai_files()
        _autoscaler_files()
    except CrdsAbsent:
        return False
    return True


def require_crds() -> Path:
    """`crd_dir()`, the folder beside the clone, or CrdsAbsent (with what to do about it) where it does not exist."""
    folder = crd_dir()
    if not folder.is_dir():
        raise CrdsAbsent(
            f"needs ../shared/crds (KubeRay/Kueue CRD schemas of the releases the Go module proxy does not serve), "
            f"absent here ({folder}); set RAYBRIDGE_SHARED_DIR to the folder that holds crds/"
        )
    return folder


def release_files(release: str) -> list[Path]:
    """The CRD files of one release id; ValueError for an unknown id, CrdsAbsent where its source is absent."""
    if release in MODULE_RELEASES:
        return _module_files(release)
    if release in SHARED_RELEASES:
        return sorted((require_crds() / "versions" / release).glob("*.yaml"))
    raise ValueError(f"unknown release {release!r}; known: {', '.join(RELEASES)}")


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
def _file_crds(path: Path) -> tuple[dict[str, Any], ...]:
    """The CRDs of one file whose kind is checked (`CHECKED_KINDS`)."""
    from testcluster.sources import yaml_documents

    return tuple(
        doc for doc in yaml_documents(path)
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
        and doc["spec"]["names"]["kind"] in CHECKED_KINDS
    )  # fmt: skip


@functools.lru_cache(maxsize=None)
def crds(kuberay: str = KUBERAY_NEWEST, kueue: str = KUEUE_NEWEST) -> dict[tuple[str, str], dict[str, Any]]:
    """(group, kind) -> the CRD object, for the given KubeRay and Kueue releases (newest by default).

    CrdsAbsent where a source is absent.
    """
    if kuberay not in KUBERAY_RELEASES:
        raise ValueError(f"unknown KubeRay release {kuberay!r}; known: {', '.join(KUBERAY_RELEASES)}")
    if kueue not in KUEUE_RELEASES:
        raise ValueError(f"unknown Kueue release {kueue!r}; known: {', '.join(KUEUE_RELEASES)}")
    paths = [*release_files(kuberay), *release_files(kueue), *_kai_files(), *_autoscaler_files()]
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in paths:
        for doc in _file_crds(path):
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


# --- one release's own CRDs (no KAI, no ProvisioningRequest) ------------------------------------


@functools.lru_cache(maxsize=None)
def release_crds(release: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(group, kind) -> CRD object, for the CRD files of one release."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in release_files(release):
        for doc in _file_crds(path):
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
