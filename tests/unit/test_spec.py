"""The job spec: every bad field named at once, defaults, flags over the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from raybridge.jobs.decision.spec import build_spec, parse_spec
from raybridge.errors import BadInput
from raybridge.jobs.spec_file import load_spec

# (case, data, expected problem fragments)
BAD = [
    ("negative gpus", {"gpus": -1}, ["gpus: input should be greater than or equal to 0"]),
    ("negative replicas", {"replicas": -3}, ["replicas:"]),
    ("unknown vendor", {"gpuVendor": "intel"}, ["gpuVendor: must be one of amd, nvidia"]),
    ("unknown field with a hint", {"gpusPerReplicas": 2}, ["gpusPerReplicas: unknown field (did you mean 'gpusPerReplica'?)"]),
    ("not a DNS-1035 label", {"name": "9lives"}, ["name: must be a DNS-1035 label"]),
    ("too long for a RayJob", {"name": "a" * 48}, ["at most 46 characters for a RayJob"]),
    ("too long for KubeRay v1.3's cluster name", {"name": "a" * 47}, ["at most 46 characters for a RayJob"]),
    ("too long for a RayCluster", {"name": "a" * 54, "kind": "RayCluster"}, ["at most 53 characters for a RayCluster"]),
    ("fraction above one", {"gpusPerReplica": 2.5}, ["whole number, or a fraction below 1"]),
    ("bad memory", {"memoryPerGpu": "lots"}, ["memoryPerGpu: is not a Kubernetes quantity"]),
    ("bad kind", {"kind": "Pod"}, ["kind: must be one of"]),
    ("plain kind with ray", {"kind": "job"}, ["set ray: false"]),
    ("queue that is no label value", {"queue": "team a"}, ["queue: must be a valid label value"]),
    ("queue Kueue's webhook refuses (not a DNS-1123 subdomain)", {"queue": "Team_A"}, ["queue: must name a Kubernetes object"]),
    ("priority class that names no object", {"priorityClass": "High"}, ["priorityClass: must name a Kubernetes object"]),
    ("reserved env", {"env": {"NUM_GPUS": "3"}}, ["env: NUM_GPUS is set by raybridge"]),
    ("several at once", {"gpus": -1, "gpuVendor": "x", "name": "A"}, ["gpus:", "gpuVendor:", "name:"]),
    ("boolean gpus", {"gpus": True}, ["gpus: must be a number, not a boolean (got true)"]),
    ("boolean replicas", {"replicas": False}, ["replicas: must be a number, not a boolean (got false)"]),
    ("boolean gpusPerReplica", {"gpusPerReplica": True}, ["gpusPerReplica: must be a number, not a boolean"]),
    ("infinite gpus", {"gpus": float("inf")}, ["gpus: input should be a finite number"]),
    ("infinite gpusPerReplica", {"gpusPerReplica": "inf", "replicas": 1}, ["gpusPerReplica: input should be a finite number"]),
    ("NaN gpusPerReplica", {"gpusPerReplica": float("nan")}, ["gpusPerReplica: input should be a finite number"]),
    ("infinite cpusPerGpu", {"cpusPerGpu": float("inf")}, ["cpusPerGpu: input should be a finite number"]),
    ("fractional replicas", {"replicas": 1.5}, ["replicas: input should be a valid integer"]),
    ("fractional gpus from a flag", {"gpus": "2.5"}, ["gpus: input should be a valid integer"]),
    ("gpus with zero per replica", {"gpus": 4, "gpusPerReplica": 0}, ["gpusPerReplica: 0 contradicts gpus: 4"]),
    ("zero replicas with gpus", {"gpus": 4, "replicas": 0}, ["replicas: must be at least 1 (got 0)"]),
    ("zero replicas alone", {"replicas": 0}, ["replicas: must be at least 1 (got 0)"]),
    ("gpusPerReplica with gpus 0 and no replicas", {"gpus": 0, "gpusPerReplica": 2}, ["gpusPerReplica: 2 with replicas unset and gpus 0 allocates no GPUs"]),
    ("gpusPerReplica alone", {"gpusPerReplica": 0.5}, ["gpusPerReplica: 0.5 with replicas unset and gpus 0"]),
    ("negative memoryPerGpu", {"memoryPerGpu": "-16Gi"}, ["memoryPerGpu: must be above 0 (got '-16Gi')"]),
    ("zero memoryPerGpu", {"memoryPerGpu": 0}, ["memoryPerGpu: must be above 0 (got 0)"]),
    ("infinite memoryPerGpu", {"memoryPerGpu": float("inf")}, ["memoryPerGpu: is not a Kubernetes quantity"]),
    ("negative head cpu", {"head": {"cpu": "-2"}}, ["head.cpu: must be above 0 (got '-2')"]),
    ("zero head memory", {"head": {"memory": "0Gi"}}, ["head.memory: must be above 0"]),
    ("negative worker cpu", {"worker": {"cpu": -1}}, ["worker.cpu: must be above 0 (got -1)"]),
    ("negative worker memory", {"worker": {"memory": "-1Mi"}}, ["worker.memory: must be above 0"]),
    ("boolean worker memory", {"worker": {"memory": True}}, ["worker.memory: is not a Kubernetes quantity"]),
]

# (case, data, the parsed fields that differ from an empty spec's (JobSpec's names, nested models as mappings), the
# resolved kind): what is still accepted next to the refusals above, and read as given
GOOD = [
    ("replicas alone", {"replicas": 3}, {"replicas": 3}, "RayJob"),
    ("gpusPerReplica with replicas", {"replicas": 2, "gpusPerReplica": 0.5}, {"replicas": 2, "gpus_per_replica": 0.5}, "RayJob"),
    ("plain job: gpusPerReplica alone is its one pod's GPUs", {"ray": False, "kind": "job", "gpusPerReplica": 2},
     {"ray": False, "kind": "job", "gpus_per_replica": 2.0}, "job"),
    ("millicores for a worker", {"worker": {"cpu": "500m", "memory": "1.5Gi"}}, {"worker": {"cpu": "500m", "memory": "1.5Gi"}}, "RayJob"),
]  # fmt: skip


@pytest.mark.parametrize("case,data,fields,kind", GOOD, ids=[r[0] for r in GOOD])
def test_good_specs(case, data, fields, kind):
    spec = build_spec(data)
    empty = build_spec({}).model_dump()
    parsed = spec.model_dump()
    assert {name: value for name, value in parsed.items() if value != empty[name]} == fields
    assert {name: type(parsed[name]) for name in fields} == {name: type(value) for name, value in fields.items()}
    assert spec.resolved_kind == kind


@pytest.mark.parametrize("case,data,fragments", BAD, ids=[r[0] for r in BAD])
def test_bad_specs(case, data, fragments):
    with pytest.raises(BadInput) as err:
        build_spec(data)
    text = "\n".join(err.value.problems)
    for fragment in fragments:
        assert fragment in text


@pytest.mark.parametrize(
    "data,kind",
    [({}, "RayJob"), ({"kind": "raycluster"}, "RayCluster"), ({"ray": False}, "job"), ({"ray": False, "kind": "Service"}, "service")],
)
def test_kinds(data, kind):
    assert build_spec(data).resolved_kind == kind


def test_parse_spec_is_pure_and_resolves_working_dir_against_the_given_directory():
    spec = parse_spec("workingDir: ../code\nentrypoint: python x.py\n", "spec file 'x'", "/base/jobs")
    assert spec.working_dir == "/base/code"
    for kept in ("s3://bucket/code.zip", "/abs/code", "~/code"):
        assert parse_spec(f"workingDir: {kept}\n", "spec", "/base").working_dir == kept


def test_the_pure_core_spec_module_reads_no_files():
    import ast

    import raybridge.jobs.decision.spec as core_spec

    tree = ast.parse(Path(core_spec.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"raybridge.files", "pathlib", "os", "io", "shutil"}, imported
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "open" not in calls


def test_flags_win_and_working_dir_is_relative_to_the_file(tmp_path):
    (tmp_path / "code").mkdir()
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text("name: a\ngpus: 2\nworkingDir: code\n")
    spec = load_spec(spec_file, {"gpus": "8", "name": None})
    assert (spec.name, spec.gpus) == ("a", 8)
    assert spec.working_dir == str(tmp_path / "code")


@pytest.mark.parametrize(
    "text,fragment",
    [("gpus: [1", "not valid YAML at line"), ("- a\n- b\n", "must hold a mapping"), ("apiVersion: ray.io/v1\nkind: RayJob\nspec: {}\n", "looks like a Kubernetes object")],
)
def test_bad_files(tmp_path, text, fragment):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(BadInput, match=fragment):
        load_spec(path)
