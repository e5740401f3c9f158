"""The Go module cache lookup that crd_schemas.py's CRDs and the stack's share (testcluster/sources.py).

Why: a test on a machine that has not built the test cluster must skip saying which module is missing, never
download and never read half an extraction; and the folder found must be the one Go itself names.
What this deliberately does not do: build or download anything (the comparison with Go runs with GOPROXY=off).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testcluster.programs import RELEASES
from testcluster.sources import ModuleNotCached, cached_module_dir, crd_files, required_version

KAI = "github.com/NVIDIA/KAI-scheduler v0.12.0"


def test_a_module_is_found_under_its_escaped_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "github.com" / "!n!v!i!d!i!a" / "!k!a!i-scheduler@v0.12.0"
    (folder / "deployments" / "kai-scheduler" / "crds").mkdir(parents=True)
    (folder / "deployments" / "kai-scheduler" / "crds" / "b.yaml").write_text("")
    (folder / "deployments" / "kai-scheduler" / "crds" / "a.yaml").write_text("")
    monkeypatch.setenv("GOMODCACHE", str(tmp_path))
    assert cached_module_dir(KAI) == folder
    assert [p.name for p in crd_files("kai", folder)] == ["a.yaml", "b.yaml"]


def test_an_absent_or_unfinished_module_is_said_and_never_downloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOMODCACHE", str(tmp_path))
    with pytest.raises(ModuleNotCached, match=rf"the Go module cache \({tmp_path}\) lacks github.com/NVIDIA/KAI-scheduler@v0.12.0"):
        cached_module_dir(KAI)
    assert list(tmp_path.iterdir()) == []  # nothing fetched
    folder = tmp_path / "github.com" / "!n!v!i!d!i!a" / "!k!a!i-scheduler@v0.12.0"
    folder.mkdir(parents=True)
    Path(f"{folder}.partial").write_text("")  # cmd/go/internal/modfetch/fetch.go: extraction under way or cut short
    with pytest.raises(ModuleNotCached):
        cached_module_dir(KAI)


def test_required_version_reads_a_wrapper_s_go_mod(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module x\n\nrequire sigs.k8s.io/kueue v0.19.2\n\nrequire (\n\tk8s.io/autoscaler/cluster-autoscaler/apis v0.0.0-2024 // indirect\n)\n")
    assert required_version(tmp_path, "k8s.io/autoscaler/cluster-autoscaler/apis") == "k8s.io/autoscaler/cluster-autoscaler/apis v0.0.0-2024"
    assert required_version(tmp_path, "sigs.k8s.io/kueue") == "sigs.k8s.io/kueue v0.19.2"
    with pytest.raises(LookupError, match="does not require k8s.io/none"):
        required_version(tmp_path, "k8s.io/none")


@pytest.mark.needs_go
def test_the_folder_found_is_the_one_go_names_for_every_module_the_stack_builds() -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed")
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=mod"}
    compared = 0
    for by_version in RELEASES.values():
        for program in by_version.values():
            module, version = program.upstream_module().split()
            try:
                found = cached_module_dir(program.upstream_module())
            except ModuleNotCached:
                continue
            out = subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"], cwd=program.module_dir, env=env,
                                 capture_output=True, text=True, timeout=120)  # fmt: skip
            assert out.returncode == 0, out.stdout + out.stderr
            assert Path(json.loads(out.stdout)["Dir"]) == found
            compared += 1
    if compared == 0:
        pytest.skip("the Go module cache holds none of the test cluster's modules (no Go build yet)")
