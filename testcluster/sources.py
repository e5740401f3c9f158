"""Where an upstream program's source is on this machine, and its YAML read: what every component of the stack reads
its manifests, CRDs and default configuration from.

Why it exists: each component (kwok's stages, Kueue's and KAI's CRDs, Karpenter's) reads files of its own
release's Go module; one home for finding that module and reading its YAML keeps the components from reaching
into each other. It is also the one home for "where is the CRD of release X" (`CRD_FOLDERS`, `crd_files`): the
stack installs those files, and crd_schemas.py's offline schema checks read the same files of the same releases
(`cached_module_dir`, which never downloads, so a test run on a machine that has not built the stack can say so
and skip).

What it does not do: `module_dir` downloads a module through the Go module proxy when the cache lacks it and does
nothing else; `cached_module_dir` only looks in the cache (no Go toolchain needed where `$GOMODCACHE` is set).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional

import yaml

from testcluster.processes import StartError

__all__ = ["CRDS_ONLY", "CRD_FOLDERS", "ModuleNotCached", "cached_module_dir", "crd_files", "module_cache", "module_dir",
           "release_crds", "required_version", "yaml_documents"]  # fmt: skip

#: The folders of a release's Go module that hold its CustomResourceDefinitions, per upstream project (what the
#: stack installs and crd_schemas.py validates against). KubeRay: ray-operator/config/crd/bases; Kueue:
#: config/components/crd/bases (its kustomization adds the conversion webhook, testcluster/kueue.py); KAI:
#: deployments/kai-scheduler/crds (its Helm chart's crds/); Karpenter with its kwok provider: what the kwok chart
#: installs plus the KWOKNodeClass; cluster-autoscaler's apis module (ProvisioningRequest): config/crd.
CRD_FOLDERS: dict[str, tuple[str, ...]] = {
    "kuberay": ("config/crd/bases",),
    "kueue": ("config/components/crd/bases",),
    "kai": ("deployments/kai-scheduler/crds",),
    "karpenter": ("kwok/charts/crds", "kwok/apis/crds"),
    "autoscaler": ("config/crd",),
}


#: The projects whose CRDs a stack installs with no operator of theirs (`StackOptions.crds_only`): KubeRay's, KAI's,
#: Karpenter's (NodePools the adjuster reads), and cluster-autoscaler's ProvisioningRequest (whose presence Kueue checks as it starts: it then runs its provisioning
#: admission check controller, cmd/kueue/main.go `ServerSupportsProvisioningRequest` at v0.17.0).
CRDS_ONLY = ("kuberay", "kai", "karpenter", "autoscaler")
AUTOSCALER_APIS = "k8s.io/autoscaler/cluster-autoscaler/apis"


class ModuleNotCached(LookupError):
    """The Go module cache lacks a module version (the test cluster has not been built on this machine)."""


def module_dir(module_at_version: str, wrapper: Path) -> Path:
    """Where the Go module cache holds `module version`'s source (downloaded if missing)."""
    module, version = module_at_version.split()
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"], cwd=wrapper, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if out.returncode != 0:
        raise StartError(f"go mod download {module}@{version} failed: {out.stderr.strip() or out.stdout.strip()}")
    return Path(json.loads(out.stdout)["Dir"])


def module_cache() -> Path:
    """The Go module cache: `$GOMODCACHE`, else what `go env GOMODCACHE` says, else `$GOPATH/pkg/mod` (the first
    GOPATH entry, `~/go` by default), as cmd/go/internal/cfg/cfg.go `gopathDir("pkg/mod")` decides."""
    configured = os.environ.get("GOMODCACHE") or _go_env_module_cache()
    if configured:
        return Path(configured)
    gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0]
    return (Path(gopath) if gopath else Path.home() / "go") / "pkg" / "mod"


@functools.lru_cache(maxsize=1)
def _go_env_module_cache() -> str:
    """What `go env GOMODCACHE` says (asked once a process; its go.env and GOENV settings included), or ""."""
    go = shutil.which("go")
    if go is None:
        return ""
    try:
        out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _escaped(path: str) -> str:
    """A module path or version as the cache spells it on disk: each upper-case letter becomes `!` and its lower
    case (golang.org/x/mod/module/module.go `EscapePath`, `escapeString`)."""
    return "".join(f"!{c.lower()}" if c.isupper() else c for c in path)


def cached_module_dir(module_at_version: str) -> Path:
    """Where the Go module cache holds `module version`'s source, without downloading; ModuleNotCached otherwise.

    A folder with a `.partial` file beside it is an extraction that did not finish (cmd/go/internal/modfetch/fetch.go
    `download` writes the `.partial` mark first and removes it last), and counts as absent.
    """
    module, version = module_at_version.split()
    cache = module_cache()
    folder = cache / f"{_escaped(module)}@{_escaped(version)}"
    if not folder.is_dir() or Path(f"{folder}.partial").exists():
        raise ModuleNotCached(f"the Go module cache ({cache}) lacks {module}@{version}: the test cluster's Go build "
                              "downloads it (python -m testcluster build)")  # fmt: skip
    return folder


def required_version(wrapper: Path, module: str) -> str:
    """`module version` as the wrapper module's go.mod requires it (directly or as `// indirect`)."""
    for line in (wrapper / "go.mod").read_text().splitlines():
        words = line.strip().removeprefix("require ").split()
        if len(words) >= 2 and words[0] == module:
            return f"{module} {words[1]}"
    raise LookupError(f"{wrapper / 'go.mod'} does not require {module}")


def crd_files(project: str, source: Path) -> list[Path]:
    """The CRD files of one release of `project` (a key of `CRD_FOLDERS`), whose module source is at `source`."""
    return [path for folder in CRD_FOLDERS[project] for path in sorted((source / folder).glob("*.yaml"))]


#: PyYAML's C loader where it is built with libyaml: the pure-Python one took a stack's start 10 to 20 CPU-seconds
#: of a test process for the CRDs alone.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def yaml_documents(path: Path) -> list[dict]:
    """The non-empty documents of a YAML file, read through a JSON copy kept in the test cluster's cache
    (`_json_cache`), named by the file's path, size and modification time: the CRDs of KubeRay and Kueue, parsed at
    every stack's start and by every test process's first schema check, are megabytes of YAML, and reading the JSON
    takes a few hundredths of a second. Each call returns objects of its own (callers edit them). Without a cache of
    this user's own, parsed each time."""
    return [doc for doc in _parsed(path) if doc]


def _parsed(path: Path) -> list[Any]:
    stat = path.stat()
    folder = _json_cache()
    if folder is None:
        return list(yaml.load_all(path.read_text(), Loader=_LOADER))
    key = hashlib.sha256(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:40]
    copy_path = folder / f"{key}.json"
    try:
        return json.loads(copy_path.read_bytes())
    except (OSError, ValueError):
        pass
    documents = list(yaml.load_all(path.read_text(), Loader=_LOADER))
    try:
        data = json.dumps(documents).encode()
    except (TypeError, ValueError):  # a value JSON cannot hold (a YAML date): no copy
        return documents
    from testcluster.private_files import replace_privately

    try:
        replace_privately(copy_path, data)
    except OSError:  # no copy this time; the documents are right all the same
        pass
    return documents


@functools.lru_cache(maxsize=None)
def _json_cache() -> Optional[Path]:
    """`crd-json/` in the test cluster's cache (testcluster/programs.py `cache_dir`), made owner-only; None where it
    is not this user's alone (another user's, or writable by others), so nothing read from it can be planted."""
    from testcluster.programs import cache_dir

    folder = cache_dir() / "crd-json"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = os.lstat(folder)
    except OSError:
        return None
    if not os.path.isdir(folder) or os.path.islink(folder) or found.st_uid != os.getuid() or found.st_mode & 0o022:
        return None
    return folder


def release_crds(project: str, programs: dict, versions: dict[str, str]) -> list[dict]:
    """The CRD documents of `project` (one of CRDS_ONLY) at a stack's releases: `programs` the stack's (by name), else
    the release `versions` names, else the default. cluster-autoscaler's ProvisioningRequest comes at the version the
    stack's Kueue requires (its go.mod), as that Kueue reads it. Downloaded through `module_dir` where missing."""
    from testcluster.programs import program

    if project == "autoscaler":
        wrapper = (programs.get("kueue") or program("kueue", versions.get("kueue"))).module_dir
        source = module_dir(required_version(wrapper, AUTOSCALER_APIS), wrapper)
    else:
        if project in ("kuberay", "karpenter"):
            owner = programs.get(project) or program(project, versions.get(project))
        else:  # KAI's CRDs are in the module every KAI program is built from
            owner = program("kai-scheduler", versions.get("kai"))
        source = module_dir(owner.upstream_module(), owner.module_dir)
    return [doc for path in crd_files(project, source) for doc in yaml_documents(path)]
