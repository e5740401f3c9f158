"""The upstream programs a test cluster is made of, and building them from their Go modules.

Why: the tests judge raybridge against the real kube-apiserver, etcd, scheduler,
controller manager, kwok, KubeRay and Kueue, not against our idea of them. Each
program is built from its published Go module through a small wrapper module in
`gomod/` (committed with its `go.sum`, so every build is the same source): a
wrapper requires the upstream module at one version and pins the command in
`tools.go`; Kubernetes' wrapper also replaces each staging module, which
`k8s.io/kubernetes` requires at v0.0.0, by its published release.

A binary is built once into a cache (`$RAYBRIDGE_TESTCLUSTER_CACHE`, else
`~/.cache/raybridge-testcluster`), named by program, version, Go version and a hash
of the wrapper's go.mod and go.sum, so a new version or a new Go builds anew and
nothing else does.

Where a release has a bug its own later patch releases fixed and the proxy serves none of them, the program
is built with that fix as a `SourceEdit` (a few lines of ours, made in a copy of the module that the wrapper
replaces it with for that build; the module cache is untouched): each names the upstream fix and is listed in
kubesim/FIDELITY.md.

What this does not do: no downloads of prebuilt binaries or images (everything comes
from the Go module proxy), no cross-compiling, no builds in parallel (one Go build
already uses every core).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

__all__ = [
    "GOMOD",
    "PROGRAMS",
    "RELEASES",
    "BuildError",
    "GoMissing",
    "Program",
    "SourceEdit",
    "cache_dir",
    "ensure_built",
    "go_version",
    "program",
]

GOMOD = Path(__file__).resolve().parent / "gomod"


class GoMissing(RuntimeError):
    """No Go toolchain: the real-stack tests cannot run here."""


class BuildError(RuntimeError):
    """A program did not build; the message ends with the build's last lines."""


@dataclass(frozen=True)
class SourceEdit:
    """`old` replaced by `new` (each found exactly once) in `path` of the upstream module, for the build only;
    `fix` names the upstream change that does the same in a later release."""

    path: str
    old: str
    new: str
    fix: str


@dataclass(frozen=True)
class Program:
    """One upstream command: built from `package` in the wrapper module `gomod/<wrapper>`."""

    name: str
    version: str
    wrapper: str
    package: str
    ldflags: tuple[str, ...] = ()
    edits: tuple[SourceEdit, ...] = ()

    @property
    def module_dir(self) -> Path:
        return GOMOD / self.wrapper

    def upstream_module(self) -> str:
        """The upstream module and version the wrapper requires (its first `require` line)."""
        for line in (self.module_dir / "go.mod").read_text().splitlines():
            if line.startswith("require "):
                return line.split(None, 1)[1].strip()
        raise BuildError(f"{self.module_dir / 'go.mod'} has no single-line require")


def _kube(command: str, version: str) -> Program:
    minor = version.split(".")[1]
    stamp = (
        f"-X k8s.io/component-base/version.gitVersion={version}",
        "-X k8s.io/component-base/version.gitMajor=1",
        f"-X k8s.io/component-base/version.gitMinor={minor}",
        "-X k8s.io/component-base/version.gitTreeState=clean",
    )
    return Program(command, version, "kube", f"k8s.io/kubernetes/cmd/{command}", stamp)


KUBERNETES_VERSION = "v1.34.4"


def _kuberay(version: str) -> Program:
    return Program("kuberay", version, f"kuberay-{version}", "github.com/ray-project/kuberay/ray-operator")


def _kueue(version: str) -> Program:
    return Program("kueue", version, f"kueue-{version}", "sigs.k8s.io/kueue/cmd/kueue")


#: KAI scheduler's commands a stack builds (kai.py): the scheduler, the binder (BindRequests, GPU reservation pods), the
#: pod grouper (a PodGroup per workload) and the admission webhook (GPU-sharing pods' config map names, runtime class),
#: which every KAI stack starts; and the node-scale-adjuster (scaling pods for fractional pods), which only a caller of
#: `kai.start_node_scale_adjuster` starts. Program `kai-<command>`.
KAI_COMMANDS = ("scheduler", "binder", "podgrouper", "admission", "nodescaleadjuster")


_RESERVATION_GO = "pkg/binder/binding/resourcereservation/resource_reservation.go"
_RESERVATION_FIX = ("kai-scheduler/KAI-Scheduler issue 1103, fixed by PR 1104 and in v0.12 by PR 1387 (v0.12.19): "
                    "a reservation pod is kept while a BindRequest not yet Succeeded or Failed names its GPU group")

#: KAI v0.12.0's binder deletes a GPU's reservation pod when its informer cache does not yet show the group label of
#: the pod it has just bound there, and then deletes that running pod as having no reservation (issue 1103). Fixed
#: in v0.12.19, which the module proxy does not serve; without it a burst of fractional pods loses pods at random.
KAI_BINDER_EDITS = (
    SourceEdit(_RESERVATION_GO, '\t"github.com/NVIDIA/KAI-scheduler/pkg/binder/binding/resourcereservation/group_mutex"\n',
               '\tbindrequests "github.com/NVIDIA/KAI-scheduler/pkg/apis/scheduling/v1alpha2"\n'
               '\t"github.com/NVIDIA/KAI-scheduler/pkg/binder/binding/resourcereservation/group_mutex"\n', _RESERVATION_FIX),
    SourceEdit(_RESERVATION_GO,
               '\t\tif _, found := fractionPods[gpuGroup]; !found {\n\t\t\tlogger.Info("Did not find fraction pod for gpu group',
               '\t\tif _, found := fractionPods[gpuGroup]; !found {\n'
               '\t\t\tif binding, err := rsc.groupBeingBound(ctx, gpuGroup); err != nil || binding {\n'
               '\t\t\t\tif err != nil {\n\t\t\t\t\treturn err\n\t\t\t\t}\n\t\t\t\tcontinue\n\t\t\t}\n'
               '\t\t\tlogger.Info("Did not find fraction pod for gpu group', _RESERVATION_FIX),
    SourceEdit(_RESERVATION_GO, "func IsGPUReservationPod(pod *v1.Pod) bool {\n",
               "// groupBeingBound: a BindRequest still in progress names the group, so the pod it binds may not show the\n"
               "// group's label in the cache yet.\n"
               "func (rsc *service) groupBeingBound(ctx context.Context, gpuGroup string) (bool, error) {\n"
               "\trequests := &bindrequests.BindRequestList{}\n"
               "\tif err := rsc.kubeClient.List(ctx, requests); err != nil {\n\t\treturn false, err\n\t}\n"
               "\tfor _, request := range requests.Items {\n"
               "\t\tphase := request.Status.Phase\n"
               "\t\tif phase != bindrequests.BindRequestPhaseSucceeded && phase != bindrequests.BindRequestPhaseFailed &&\n"
               "\t\t\tslices.Contains(request.Spec.SelectedGPUGroups, gpuGroup) {\n\t\t\treturn true, nil\n\t\t}\n\t}\n"
               "\treturn false, nil\n}\n\n"
               "func IsGPUReservationPod(pod *v1.Pod) bool {\n", _RESERVATION_FIX),
)


def _kai(command: str, version: str) -> Program:
    edits = KAI_BINDER_EDITS if command == "binder" and version == "v0.12.0" else ()
    return Program(f"kai-{command}", version, f"kai-{version}", f"github.com/NVIDIA/KAI-scheduler/cmd/{command}", edits=edits)


#: Every release each program can be built at (a wrapper module in gomod/ each), newest last.
RELEASES: dict[str, dict[str, Program]] = {}
for _program in (
    Program("etcd", "v3.6.16", "etcd-v3.6.16", "go.etcd.io/etcd/server/v3"),
    _kube("kube-apiserver", KUBERNETES_VERSION),
    _kube("kube-controller-manager", KUBERNETES_VERSION),
    _kube("kube-scheduler", KUBERNETES_VERSION),
    Program("kwok", "v0.8.0", "kwok-v0.8.0", "sigs.k8s.io/kwok/cmd/kwok"),
    _kuberay("v1.3.2"),
    _kuberay("v1.5.0"),
    _kuberay("v1.6.1"),
    _kueue("v0.13.10"),
    _kueue("v0.17.0"),
    _kueue("v0.19.2"),
    *(_kai(command, "v0.12.0") for command in KAI_COMMANDS),
    Program("karpenter", "v1.14.1", "karpenter-v1.14.1", "sigs.k8s.io/karpenter/kwok"),  # Karpenter with its kwok cloud provider
):
    RELEASES.setdefault(_program.name, {})[_program.version] = _program

#: The release a stack starts by default where a program has several: the newest KubeRay, and the Kueue whose
#: own go.mod pairs it with a KubeRay of that line (v0.17.0 requires ray-operator v1.6.0).
DEFAULT_RELEASES = {"kuberay": "v1.6.1", "kueue": "v0.17.0"}

#: Each program at the release a stack starts by default.
PROGRAMS: dict[str, Program] = {
    name: by_version[DEFAULT_RELEASES.get(name, list(by_version)[-1])] for name, by_version in RELEASES.items()
}


def program(name: str, version: Optional[str] = None) -> Program:
    """`name` at `version` (default: the newest); KeyError naming the releases there are."""
    releases = RELEASES[name]
    if version is None:
        return PROGRAMS[name]
    if version not in releases:
        raise KeyError(f"{name} {version} is not built here (releases: {', '.join(releases)})")
    return releases[version]


def cache_dir() -> Path:
    """Where built binaries live: `$RAYBRIDGE_TESTCLUSTER_CACHE`, else `~/.cache/raybridge-testcluster`."""
    configured = os.environ.get("RAYBRIDGE_TESTCLUSTER_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "raybridge-testcluster"


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise GoMissing("Go is not installed: the real-cluster tests need Go 1.24 or later (https://go.dev/doc/install) and the Go module proxy")
    return go


def go_version() -> str:
    """`go1.26.8`, say: part of every binary's cache key."""
    out = subprocess.run([_go(), "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def _wrapper_hash(program: Program) -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((program.module_dir / name).read_bytes())
    digest.update(" ".join(program.ldflags).encode())
    for edit in program.edits:
        digest.update(json.dumps([edit.path, edit.old, edit.new]).encode())
    return digest.hexdigest()[:12]


def binary_path(program: Program, go: Optional[str] = None) -> Path:
    """Where `program`'s binary is (or will be) in the cache."""
    go = go or go_version()
    return cache_dir() / "bin" / f"{program.name}-{program.version}-{go}-{_wrapper_hash(program)}"


def _build(program: Program, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{program.name}-", dir=target.parent) as scratch:
        output = Path(scratch) / program.name
        command = [_go(), "build", "-trimpath", "-o", str(output), "-ldflags", " ".join(("-s", "-w") + program.ldflags), program.package]
        env = dict(os.environ, GOFLAGS="-mod=readonly -buildvcs=false")
        where = _edited_wrapper(program, Path(scratch), env) if program.edits else program.module_dir
        run = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=3600)
        if run.returncode != 0:
            tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-15:])
            raise BuildError(f"{program.name} {program.version} did not build (go build in {where}):\n{tail}")
        os.replace(output, target)  # whole or not at all: a build cut short leaves no binary


def _edited_wrapper(program: Program, scratch: Path, env: dict[str, str]) -> Path:
    """A copy of the wrapper module in `scratch` that builds against a copy of the upstream module with `edits` made
    (Go takes no overlay of files in the module cache): the wrapper's go.mod with one `replace` line more."""
    module = program.upstream_module().split()[0]
    run = subprocess.run([_go(), "mod", "download", "-json", module], cwd=program.module_dir, env=env, capture_output=True, text=True, timeout=1800)
    source = json.loads(run.stdout or "{}").get("Dir") if run.returncode == 0 else None
    if not source:
        raise BuildError(f"{program.name} {program.version}: {module} did not download:\n{(run.stdout + run.stderr)[-2000:]}")
    upstream = scratch / "upstream"
    shutil.copytree(source, upstream, copy_function=shutil.copyfile)  # copyfile: writable copies of read-only files
    for edit in program.edits:
        path = upstream / edit.path
        text = path.read_text()
        if text.count(edit.old) != 1:
            raise BuildError(f"{program.name} {program.version}: {edit.path} holds {text.count(edit.old)} copies of the text the edit "
                             f"for {edit.fix!r} replaces, not one")
        path.write_text(text.replace(edit.old, edit.new))
    wrapper = scratch / "wrapper"
    shutil.copytree(program.module_dir, wrapper, copy_function=shutil.copyfile)
    with open(wrapper / "go.mod", "a") as go_mod:
        go_mod.write(f"\nreplace {module} => {upstream}\n")
    return wrapper


@contextlib.contextmanager
def _build_lock(target: Path) -> Iterator[None]:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_built(programs: list[Program], progress: Callable[[str], None] = lambda line: None) -> dict[str, Path]:
    """The binaries of `programs` by name, building those missing from the cache (a line of progress each)."""
    go = go_version()
    found: dict[str, Path] = {}
    for program in programs:
        name = program.name
        path = binary_path(program, go)
        if not path.exists():
            with _build_lock(path):  # another process building the same binary: wait for it, then use its result
                if not path.exists():
                    progress(f"building {program.name} {program.version} from {program.upstream_module()} with {go} ...")
                    started = time.monotonic()
                    _build(program, path)
                    progress(f"built {program.name} in {time.monotonic() - started:.0f} s")
        found[name] = path
    return found
