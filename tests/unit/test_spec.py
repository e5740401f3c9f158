"""The job spec: every bad field named at once, defaults, flags over the file."""

from __future__ import annotations

import pytest

from raybridge.core.spec import build_spec, load_spec
from raybridge.errors import BadInput

# (case, data, expected problem fragments)
BAD = [
    ("negative gpus", {"gpus": -1}, ["gpus: input should be greater than or equal to 0"]),
    ("negative replicas", {"replicas": -3}, ["replicas:"]),
    ("unknown vendor", {"gpuVendor": "intel"}, ["gpuVendor: must be one of amd, nvidia"]),
    ("unknown field with a hint", {"gpusPerReplicas": 2}, ["gpusPerReplicas: unknown field (did you mean 'gpusPerReplica'?)"]),
    ("not a DNS-1035 label", {"name": "9lives"}, ["name: must be a DNS-1035 label"]),
    ("too long for a RayJob", {"name": "a" * 48}, ["at most 47 characters for a RayJob"]),
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
    ("gpus with zero replicas", {"gpus": 4, "replicas": 0}, ["replicas: 0 contradicts gpus: 4"]),
]


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
