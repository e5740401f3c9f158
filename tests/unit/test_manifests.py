"""Manifests: every rendered object is schema-valid and says what the sizing decided.

Ray objects are checked against the KubeRay CRDs (`testcluster.crd_schemas` says where
each release's come from), the newest and each supported older release (test ids
`kuberay-v1.3.2`, `kuberay-v1.5.2`, `kuberay-newest`); the batch Job and the
Deployment against Kubernetes' own OpenAPI schemas (`tests.unit.k8s_schemas`). Each row sizes a spec against a
small inventory with the real sizing code, so the manifests are checked
against decisions sizing can actually make.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
import yaml

from raybridge.core.consts import JOB_NAME_LABEL, MANAGED_BY_LABEL, ORPHAN_BOUND_SECONDS, WORKER_GROUP_NAME
from raybridge.kai.names import KAI_GPU_FRACTION_ANNOTATION, KAI_QUEUE_LABEL, KAI_SCHEDULER_NAME
from raybridge.kueue.names import KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL
from raybridge.jobs.decision.images import default_image
from raybridge.core.inventory import Inventory, NodeGpus
from raybridge.jobs.decision.manifests import (
    render_batch_job,
    render_deployment,
    render_manifests,
    render_raycluster,
    render_rayjob,
    to_yaml,
)
from raybridge.jobs.decision.sizing import SizingDecision, SizingRequest, size_workload
from raybridge.jobs.decision.spec import build_spec
from raybridge.errors import BadInput
from testcluster.crd_schemas import KUBERAY_RELEASES, schema_errors
from tests.unit.k8s_schemas import K8S_VERSIONS, k8s_schema_errors

NS = "ml"
NAME = "train"
OWN = {MANAGED_BY_LABEL: "raybridge", JOB_NAME_LABEL: NAME}
NV, AMD = "nvidia.com/gpu", "amd.com/gpu"
#: The Ray release the images follow: the caller (the CLI, the submit service) reads the one installed.
RAY = "2.60.0"
#: The Python the default images follow (this interpreter's, read by jobapi.ray_import.local_python; any works here).
PY = (3, 11)
IMG_NV, IMG_AMD, IMG_CPU = default_image("nvidia", RAY, PY), default_image("amd", RAY, PY), default_image(None, RAY, PY)
LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def nodes(*counts: int, vendor: str = "amd") -> Inventory:
    return Inventory(nodes=tuple(NodeGpus(name=f"n{i}", vendor=vendor, gpus=c) for i, c in enumerate(counts)), source="test")


AMD_8x2 = nodes(8, 8)
AMD_8_4_4 = nodes(8, 4, 4)
AMD_4 = nodes(4)
NV_4x2 = nodes(4, 4, vendor="nvidia")
NV_1x2 = nodes(1, 1, vendor="nvidia")

TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}


@dataclass(frozen=True)
class Row:
    """One spec on one inventory, and what every rendered object must then say."""

    id: str
    spec: dict[str, Any]
    inventory: Inventory
    replicas: int
    gpu: Optional[tuple[str, int]]  # whole-GPU key and count per worker pod; None without one
    num_gpus: str  # the workers' rayStartParams num-gpus
    cpu: str  # per worker pod, requests = limits
    memory: str
    image: str
    env: tuple[str, str, str]  # NUM_GPUS, NUM_REPLICAS, NUM_GPUS_PER_REPLICA: what was allocated
    labels: dict[str, str] = field(default_factory=dict)  # scheduling labels on the object (Kueue or KAI)
    fraction: Optional[str] = None  # KAI gpu-fraction annotation on the worker template
    head: tuple[str, str] = ("2", "8Gi")  # head cpu, memory


# fmt: off
RAY_ROWS = [
    Row("nvidia 2x4 with queue and priority",
        dict(gpus=8, gpuVendor="nvidia", queue="team-a", priorityClass="high", entrypoint="python train.py"), NV_4x2,
        replicas=2, gpu=(NV, 4), num_gpus="4", cpu="16", memory="64Gi", image=IMG_NV, env=("8", "2", "4"),
        labels={KUEUE_QUEUE_LABEL: "team-a", KUEUE_PRIORITY_LABEL: "high"}),
    Row("amd 1x8, no queue",
        dict(gpus=8), AMD_8x2,
        replicas=1, gpu=(AMD, 8), num_gpus="8", cpu="32", memory="128Gi", image=IMG_AMD, env=("8", "1", "8")),
    Row("amd, priority without queue",
        dict(replicas=2, gpusPerReplica=8, priorityClass="low"), AMD_8x2,
        replicas=2, gpu=(AMD, 8), num_gpus="8", cpu="32", memory="128Gi", image=IMG_AMD, env=("16", "2", "8"),
        labels={KUEUE_PRIORITY_LABEL: "low"}),
    Row("no GPUs: one CPU worker, CPU image",
        dict(entrypoint="python cpu.py", queue="team-a"), AMD_8x2,
        replicas=1, gpu=None, num_gpus="0", cpu="2", memory="4Gi", image=IMG_CPU, env=("0", "1", "0"),
        labels={KUEUE_QUEUE_LABEL: "team-a"}),
    Row("10 asked on 4-GPU nodes: env says the 9 allocated",
        dict(gpus=10), AMD_8_4_4,
        replicas=3, gpu=(AMD, 3), num_gpus="3", cpu="12", memory="48Gi", image=IMG_AMD, env=("9", "3", "3")),
    Row("fractional 3 x 0.5 with queue and priority: KAI, not Kueue",
        dict(replicas=3, gpusPerReplica=0.5, queue="kai-team", priorityClass="high"), NV_1x2,
        replicas=3, gpu=None, num_gpus="1", cpu="2", memory="8Gi", image=IMG_NV, env=("1.5", "3", "0.5"),
        labels={KAI_QUEUE_LABEL: "kai-team"}, fraction="0.5"),
    Row("fractional 2 x 0.25 without queue: KAI default queue",
        dict(replicas=2, gpusPerReplica=0.25), NV_1x2,
        replicas=2, gpu=None, num_gpus="1", cpu="1", memory="4Gi", image=IMG_NV, env=("0.5", "2", "0.25"),
        labels={KAI_QUEUE_LABEL: "default-queue"}, fraction="0.25"),
    Row("tolerations, nodeSelector, env and runtimeEnv",
        dict(gpus=4, gpuVendor="amd", tolerations=[TOLERATION], nodeSelector={"amd.com/gpu.product-name": "MI300X"},
             env={"HF_HOME": "/cache", "LOG_LEVEL": "debug"},
             runtimeEnv={"pip": ["torch==2.5"], "env_vars": {"A": "1"}, "working_dir": "./src"}, entrypoint="python -m pkg"),
        AMD_4,
        replicas=1, gpu=(AMD, 4), num_gpus="4", cpu="16", memory="64Gi", image=IMG_AMD, env=("4", "1", "4")),
    Row("worker and head overrides, own image",
        dict(replicas=2, gpusPerReplica=2, image="registry.local/ray:2.55", worker={"cpu": "6", "memory": "40Gi"},
             head={"cpu": "1", "memory": "2Gi"}), AMD_8x2,
        replicas=2, gpu=(AMD, 2), num_gpus="2", cpu="6", memory="40Gi", image="registry.local/ray:2.55", env=("4", "2", "2"),
        head=("1", "2Gi")),
    Row("per-GPU CPU and memory scale with the GPUs per replica",
        dict(replicas=1, gpusPerReplica=3, cpusPerGpu=1.5, memoryPerGpu="12Gi"), AMD_8x2,
        replicas=1, gpu=(AMD, 3), num_gpus="3", cpu="4500m", memory="36Gi", image=IMG_AMD, env=("3", "1", "3")),
]
# fmt: on

RAY_KINDS = ("RayJob", "RayCluster")


def decide(row: Row, kind: Optional[str] = None) -> tuple[Any, SizingDecision]:
    data = dict(row.spec)
    if kind:
        data["kind"] = kind
    spec = build_spec(data)
    return spec, size_workload(SizingRequest.from_spec(spec), row.inventory)


def render(row: Row, kind: str = "RayJob", **kwargs: Any) -> dict[str, Any]:
    spec, decision = decide(row, kind)
    objects = render_manifests(spec, decision, name=NAME, namespace=NS, ray_version=RAY, python=PY, **kwargs)
    assert len(objects) == 1
    return objects[0]


def cluster_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["rayClusterSpec"] if obj["kind"] == "RayJob" else obj["spec"]


def templates(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pod templates by role: head and worker for Ray, main for a Job or Deployment."""
    if obj["kind"] in RAY_KINDS:
        cs = cluster_spec(obj)
        return {"head": cs["headGroupSpec"]["template"], "worker": cs["workerGroupSpecs"][0]["template"]}
    return {"main": obj["spec"]["template"]}


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, f"{path}[{i}]")


def all_labels(obj: dict[str, Any]) -> list[dict[str, str]]:
    found = [obj["metadata"]["labels"]]
    found += [t["metadata"]["labels"] for t in templates(obj).values()]
    return found


ray_cases = pytest.mark.parametrize("row", RAY_ROWS, ids=[r.id for r in RAY_ROWS])
ray_kinds = pytest.mark.parametrize("kind", RAY_KINDS)


# --- schemas ---------------------------------------------------------------------------------


@ray_kinds
@ray_cases
def test_ray_objects_validate_against_the_kuberay_crds(row: Row, kind: str) -> None:
    obj = render(row, kind, job_id="raysubmit_abc" if kind == "RayJob" else None)
    assert (obj["apiVersion"], obj["kind"]) == ("ray.io/v1", kind)
    assert schema_errors(obj) == []


# Every supported KubeRay release's strict schema accepts a rendered object as it is: the orphan
# protection uses only fields every release knows (no preRunningDeadlineSeconds before v1.6).
@pytest.mark.parametrize("release", KUBERAY_RELEASES, ids=KUBERAY_RELEASES)
@ray_kinds
@ray_cases
def test_ray_objects_against_each_kuberay_release(row: Row, kind: str, release: str) -> None:
    obj = render(row, kind, job_id="raysubmit_abc" if kind == "RayJob" else None)
    if row.spec.get("authMode") == "token" and release == "kuberay-v1.3.2":
        pytest.skip("authOptions exists from KubeRay v1.5.1; submit refuses it on older releases")
    assert schema_errors(obj, kuberay=release) == []


def test_the_crd_check_catches_a_bad_object() -> None:
    obj = render(RAY_ROWS[0])
    cluster_spec(obj)["workerGroupSpecs"][0]["rayStartParams"]["num-gpus"] = 4  # must be a string
    assert schema_errors(obj) != []


@ray_kinds
@ray_cases
def test_no_nulls_anywhere(row: Row, kind: str) -> None:
    obj = render(row, kind)
    assert [path for path, value in walk(obj) if value is None] == []


# --- the worker group ------------------------------------------------------------------------


@ray_cases
def test_worker_group_has_the_decided_shape(row: Row) -> None:
    cs = cluster_spec(render(row))
    assert not cs.get("enableInTreeAutoscaling")
    (group,) = cs["workerGroupSpecs"]
    assert group["groupName"] == WORKER_GROUP_NAME != "head"
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == row.replicas
    assert group["rayStartParams"]["num-gpus"] == row.num_gpus


@ray_cases
def test_worker_resources_requests_equal_limits_with_the_gpu_key(row: Row) -> None:
    (container,) = cluster_spec(render(row))["workerGroupSpecs"][0]["template"]["spec"]["containers"]
    resources = container["resources"]
    assert resources["requests"] == resources["limits"]
    gpu_keys = {k: v for k, v in resources["limits"].items() if k.endswith("/gpu")}
    assert gpu_keys == ({row.gpu[0]: str(row.gpu[1])} if row.gpu else {})
    assert (resources["limits"]["cpu"], resources["limits"]["memory"]) == (row.cpu, row.memory)


@ray_cases
def test_head_has_no_gpus_and_the_standard_ports(row: Row) -> None:
    head = cluster_spec(render(row))["headGroupSpec"]
    assert head["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-gpus": "0"}
    (container,) = head["template"]["spec"]["containers"]
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": row.head[0], "memory": row.head[1]}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"gcs-server": 6379, "dashboard": 8265, "client": 10001}
    assert "tolerations" not in head["template"]["spec"] or all(
        t.get("key") not in (NV, AMD) for t in head["template"]["spec"]["tolerations"]
    )


@ray_cases
def test_image_is_the_spec_s_or_the_vendor_default(row: Row) -> None:
    for role, template in templates(render(row)).items():
        assert [c["image"] for c in template["spec"]["containers"]] == [row.image], role


@ray_cases
def test_every_ray_container_gets_the_allocated_counts_then_the_spec_env(row: Row) -> None:
    expected = [
        {"name": "NUM_GPUS", "value": row.env[0]},
        {"name": "NUM_REPLICAS", "value": row.env[1]},
        {"name": "NUM_GPUS_PER_REPLICA", "value": row.env[2]},
    ] + [{"name": k, "value": v} for k, v in row.spec.get("env", {}).items()]
    for role, template in templates(render(row)).items():
        assert template["spec"]["containers"][0]["env"] == expected, role


def test_env_reports_allocated_not_requested() -> None:
    spec, decision = decide(RAY_ROWS[4])
    assert (decision.requested_gpus, decision.total_gpus) == (10, 9)
    env = {e["name"]: e["value"] for e in render_rayjob(spec, decision, name=NAME, namespace=NS, ray_version=RAY, python=PY)["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NUM_GPUS"] == "9"


@pytest.mark.parametrize("key", ["NUM_GPUS", "NUM_REPLICAS", "NUM_GPUS_PER_REPLICA"])
def test_spec_env_may_not_override_the_allocated_counts(key: str) -> None:
    row = RAY_ROWS[1]
    with pytest.raises(BadInput, match=key):  # refused as early as the spec, before sizing or rendering
        spec, decision = decide(Row(**{**row.__dict__, "spec": {**row.spec, "env": {key: "99"}}}))
        render_rayjob(spec, decision, name=NAME, namespace=NS, ray_version=RAY, python=PY)


# --- scheduling: Kueue or KAI, tolerations, node selector --------------------------------------


@ray_kinds
@ray_cases
def test_object_labels_are_raybridge_s_plus_the_scheduler_s(row: Row, kind: str) -> None:
    assert render(row, kind)["metadata"]["labels"] == {**OWN, **row.labels}


@ray_kinds
@ray_cases
def test_kai_sharing_exactly_when_fractional(row: Row, kind: str) -> None:
    obj = render(row, kind)
    pods = templates(obj)
    if row.fraction:
        for role, template in pods.items():
            assert template["spec"]["schedulerName"] == KAI_SCHEDULER_NAME, role
            assert template["metadata"]["labels"][KAI_QUEUE_LABEL] == row.labels[KAI_QUEUE_LABEL], role
        assert pods["worker"]["metadata"]["annotations"] == {KAI_GPU_FRACTION_ANNOTATION: row.fraction}
        assert "annotations" not in pods["head"]["metadata"]
        assert not any(k.startswith("kueue.x-k8s.io/") for labels in all_labels(obj) for k in labels)
    else:
        for role, template in pods.items():
            assert "schedulerName" not in template["spec"], role
            assert "annotations" not in template["metadata"], role
            assert template["metadata"]["labels"] == OWN, role  # Kueue labels stay on the object
        assert KAI_QUEUE_LABEL not in obj["metadata"]["labels"]


@ray_cases
def test_gpu_pods_tolerate_the_vendor_taint_then_the_spec_s(row: Row) -> None:
    spec, decision = decide(row)
    worker = templates(render(row))["worker"]["spec"]
    own = [TOLERATION] if "tolerations" in row.spec else []
    if decision.gpus_per_replica > 0:
        vendor_key = decision.resource_key
        assert worker["tolerations"] == [{"key": vendor_key, "operator": "Exists", "effect": "NoSchedule"}] + own
    else:
        assert worker.get("tolerations", []) == own


def test_tolerations_and_node_selector_reach_head_and_workers() -> None:
    row = next(r for r in RAY_ROWS if "tolerations" in r.spec)
    pods = templates(render(row))
    for role, template in pods.items():
        assert template["spec"]["nodeSelector"] == {"amd.com/gpu.product-name": "MI300X"}, role
        assert TOLERATION in template["spec"]["tolerations"], role
    assert pods["head"]["spec"]["tolerations"] == [TOLERATION]


def test_a_spec_toleration_equal_to_the_gpu_one_is_not_repeated() -> None:
    gpu_toleration = {"key": AMD, "operator": "Exists", "effect": "NoSchedule"}
    row = Row(**{**RAY_ROWS[1].__dict__, "spec": {**RAY_ROWS[1].spec, "tolerations": [gpu_toleration]}})
    assert templates(render(row))["worker"]["spec"]["tolerations"] == [gpu_toleration]


@pytest.mark.parametrize("field_name, value", [("queue", "Team A"), ("priorityClass", "x" * 64), ("queue", "-lead")])
def test_a_queue_that_cannot_be_a_label_value_is_bad_input(field_name: str, value: str) -> None:
    with pytest.raises(BadInput, match=field_name):  # refused as early as the spec
        spec, decision = decide(Row(**{**RAY_ROWS[1].__dict__, "spec": {**RAY_ROWS[1].spec, field_name: value}}))
        render_rayjob(spec, decision, name=NAME, namespace=NS, ray_version=RAY, python=PY)


# --- RayJob and RayCluster fields -----------------------------------------------------------


@ray_cases
def test_rayjob_is_interactive_bounded_and_cleaned_up(row: Row) -> None:
    body = render(row, job_id="raysubmit_abc")["spec"]
    assert body["submissionMode"] == "InteractiveMode"
    assert body["shutdownAfterJobFinishes"] is True
    assert body["activeDeadlineSeconds"] == ORPHAN_BOUND_SECONDS == 1800  # renewed by submit while it runs
    assert "preRunningDeadlineSeconds" not in body
    assert "backoffLimit" not in body
    assert body["jobId"] == "raysubmit_abc"
    assert body.get("entrypoint") == row.spec.get("entrypoint")


def test_rayjob_without_job_id_has_none() -> None:
    assert "jobId" not in render(RAY_ROWS[0])["spec"]


@ray_cases
def test_raycluster_carries_the_same_cluster_spec_and_no_job_fields(row: Row) -> None:
    job, cluster = render(row, "RayJob"), render(row, "RayCluster")
    assert cluster["spec"] == job["spec"]["rayClusterSpec"]
    assert cluster["metadata"] == job["metadata"]


# (case, runtimeEnv, workingDir, what runtimeEnvYAML must hold; None: no runtimeEnvYAML)
# fmt: off
RUNTIME_ENV_ROWS = [
    ("none set",                            None,                                                None,                      None),
    ("packages kept, in order",             {"pip": ["torch"], "env_vars": {"A": "1"}},          None,                      {"pip": ["torch"], "env_vars": {"A": "1"}}),
    ("local working_dir dropped",           {"pip": ["torch"], "working_dir": "./src"},          None,                      {"pip": ["torch"]}),
    ("only a local working_dir: nothing",   {"working_dir": "/home/me/proj"},                    None,                      None),
    ("remote working_dir kept",             {"working_dir": "s3://bucket/code.zip"},             None,                      {"working_dir": "s3://bucket/code.zip"}),
    ("workingDir field, remote, wins",      {"working_dir": "./src"},                            "https://host/code.zip",   {"working_dir": "https://host/code.zip"}),
    ("workingDir field, local, dropped",    {"pip": ["x"], "working_dir": "gs://b/c.zip"},       ".",                       {"pip": ["x"]}),
    ("local py_modules dropped",            {"py_modules": ["./lib", "s3://b/m.zip"]},           None,                      {"py_modules": ["s3://b/m.zip"]}),
    ("only local py_modules: nothing",      {"py_modules": ["./lib"]},                           None,                      None),
]
# fmt: on


@pytest.mark.parametrize("case, runtime_env, working_dir, expected", RUNTIME_ENV_ROWS, ids=[r[0] for r in RUNTIME_ENV_ROWS])
def test_runtime_env_yaml_never_holds_a_local_path(case: str, runtime_env: Any, working_dir: Any, expected: Any) -> None:
    data = dict(RAY_ROWS[1].spec, runtimeEnv=runtime_env, workingDir=working_dir)
    spec = build_spec({k: v for k, v in data.items() if v is not None})
    decision = size_workload(SizingRequest.from_spec(spec), AMD_8x2)
    obj = render_rayjob(spec, decision, name=NAME, namespace=NS, ray_version=RAY, python=PY)
    assert schema_errors(obj) == []
    if expected is None:
        assert "runtimeEnvYAML" not in obj["spec"]
    else:
        assert yaml.safe_load(obj["spec"]["runtimeEnvYAML"]) == expected
        assert list(yaml.safe_load(obj["spec"]["runtimeEnvYAML"])) == list(expected)


# --- plain Kubernetes objects ------------------------------------------------------------------


@dataclass(frozen=True)
class PlainRow:
    id: str
    spec: dict[str, Any]
    inventory: Inventory
    kind: str  # Job or Deployment
    pods: int
    gpu: Optional[tuple[str, int]]
    cpu: str
    memory: str
    env: tuple[str, str, str]
    labels: dict[str, str] = field(default_factory=dict)  # scheduling labels on the object
    fraction: Optional[str] = None


# fmt: off
PLAIN_ROWS = [
    PlainRow("job: 2 GPUs, queue and priority",
             dict(ray=False, kind="job", gpus=2, gpuVendor="nvidia", queue="team-a", priorityClass="high", entrypoint="python run.py"), NV_4x2,
             kind="Job", pods=1, gpu=(NV, 2), cpu="8", memory="32Gi", env=("2", "1", "2"),
             labels={KUEUE_QUEUE_LABEL: "team-a", KUEUE_PRIORITY_LABEL: "high"}),
    PlainRow("job: replicas ignored, gpusPerReplica wins",
             dict(ray=False, kind="job", replicas=3, gpusPerReplica=1, gpus=4, tolerations=[TOLERATION], nodeSelector={"pool": "gpu"}), AMD_8x2,
             kind="Job", pods=1, gpu=(AMD, 1), cpu="4", memory="16Gi", env=("1", "1", "1")),
    PlainRow("job: no GPUs, no entrypoint",
             dict(ray=False), AMD_8x2,
             kind="Job", pods=1, gpu=None, cpu="2", memory="4Gi", env=("0", "1", "0")),
    PlainRow("service: 3 replicas x 1 GPU, queue",
             dict(ray=False, kind="service", replicas=3, gpusPerReplica=1, queue="serve", env={"PORT": "8000"}, entrypoint="serve run app:main"), AMD_8x2,
             kind="Deployment", pods=3, gpu=(AMD, 1), cpu="4", memory="16Gi", env=("3", "3", "1"),
             labels={KUEUE_QUEUE_LABEL: "serve"}),
    PlainRow("service: gpus per pod from gpus, priority only",
             dict(ray=False, kind="service", replicas=2, gpus=2, priorityClass="low", worker={"memory": "20Gi"}), AMD_8x2,
             kind="Deployment", pods=2, gpu=(AMD, 2), cpu="8", memory="20Gi", env=("4", "2", "2"),
             labels={KUEUE_PRIORITY_LABEL: "low"}),
    PlainRow("service: fractional -> KAI",
             dict(ray=False, kind="service", replicas=2, gpusPerReplica=0.5, queue="kai-team"), NV_1x2,
             kind="Deployment", pods=2, gpu=None, cpu="2", memory="8Gi", env=("1", "2", "0.5"),
             labels={KAI_QUEUE_LABEL: "kai-team"}, fraction="0.5"),
    PlainRow("job: fractional, no queue -> KAI default queue",
             dict(ray=False, kind="job", gpusPerReplica=0.5), NV_1x2,
             kind="Job", pods=1, gpu=None, cpu="2", memory="8Gi", env=("0.5", "1", "0.5"),
             labels={KAI_QUEUE_LABEL: "default-queue"}, fraction="0.5"),
]
# fmt: on

plain_cases = pytest.mark.parametrize("row", PLAIN_ROWS, ids=[r.id for r in PLAIN_ROWS])


def render_plain(row: PlainRow) -> dict[str, Any]:
    spec = build_spec(row.spec)
    decision = size_workload(SizingRequest.from_spec(spec), row.inventory)
    (obj,) = render_manifests(spec, decision, name=NAME, namespace=NS, ray_version=RAY, python=PY, job_id="ignored")
    return obj


@pytest.mark.parametrize("version", K8S_VERSIONS)
@plain_cases
def test_core_objects_validate_against_the_kubernetes_schemas(row: PlainRow, version: str) -> None:
    obj = render_plain(row)
    assert (obj["apiVersion"], obj["kind"]) == ({"Job": "batch/v1", "Deployment": "apps/v1"}[row.kind], row.kind)
    assert k8s_schema_errors(obj, version) == []
    assert [path for path, value in walk(obj) if value is None] == []


@pytest.mark.parametrize("kind", ["Job", "Deployment"])
def test_the_kubernetes_schema_check_catches_a_bad_object(kind: str) -> None:
    obj = render_plain(next(r for r in PLAIN_ROWS if r.kind == kind))
    obj["spec"]["template"]["spec"]["containers"][0]["gpus"] = 1  # no such field
    assert k8s_schema_errors(obj, K8S_VERSIONS[-1]) != []


@plain_cases
def test_core_pod_shape(row: PlainRow) -> None:
    obj = render_plain(row)
    pod = obj["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    resources = container["resources"]
    assert resources["requests"] == resources["limits"]
    assert {k: v for k, v in resources["limits"].items() if k.endswith("/gpu")} == ({row.gpu[0]: str(row.gpu[1])} if row.gpu else {})
    assert (resources["limits"]["cpu"], resources["limits"]["memory"]) == (row.cpu, row.memory)
    assert container["env"][:3] == [
        {"name": "NUM_GPUS", "value": row.env[0]},
        {"name": "NUM_REPLICAS", "value": row.env[1]},
        {"name": "NUM_GPUS_PER_REPLICA", "value": row.env[2]},
    ]
    assert container["env"][3:] == [{"name": k, "value": v} for k, v in row.spec.get("env", {}).items()]
    entrypoint = row.spec.get("entrypoint")
    assert container.get("command") == (["/bin/sh", "-c", entrypoint] if entrypoint else None)
    assert pod.get("nodeSelector") == row.spec.get("nodeSelector")
    if row.kind == "Job":
        assert {k: obj["spec"][k] for k in ("parallelism", "completions", "backoffLimit")} == {"parallelism": 1, "completions": 1, "backoffLimit": 0}
        assert pod["restartPolicy"] == "Never"
    else:
        assert obj["spec"]["replicas"] == row.pods
        selector = obj["spec"]["selector"]["matchLabels"]
        assert selector.items() <= obj["spec"]["template"]["metadata"]["labels"].items()
        assert selector == OWN


@plain_cases
def test_core_scheduling_labels(row: PlainRow) -> None:
    obj = render_plain(row)
    template = obj["spec"]["template"]
    assert obj["metadata"]["labels"] == {**OWN, **row.labels}
    if row.fraction:
        assert template["spec"]["schedulerName"] == KAI_SCHEDULER_NAME
        assert template["metadata"]["annotations"] == {KAI_GPU_FRACTION_ANNOTATION: row.fraction}
        assert template["metadata"]["labels"] == {**OWN, **row.labels}
    elif row.kind == "Deployment":  # Kueue's Deployment support acts on pods
        assert template["metadata"]["labels"] == {**OWN, **row.labels}
    else:  # Kueue suspends the Job itself; its pods carry no queue label
        assert template["metadata"]["labels"] == OWN
    if row.gpu:
        assert {"key": row.gpu[0], "operator": "Exists", "effect": "NoSchedule"} == template["spec"]["tolerations"][0]
    if "tolerations" in row.spec:
        assert template["spec"]["tolerations"][-1] == TOLERATION


# --- names, dispatch, determinism, YAML ------------------------------------------------------

# (kind, name, namespace, accepted)
# fmt: off
NAME_ROWS = [
    ("RayJob",     "a" * 46,  NS,        True),
    ("RayJob",     "a" * 47,  NS,        False),  # KubeRay v1.3: <name>-raycluster-xxxxx is a 64-character label
    ("RayCluster", "a" * 53,  NS,        True),
    ("RayCluster", "a" * 54,  NS,        False),
    ("job",        "a" * 63,  NS,        True),
    ("job",        "a" * 64,  NS,        False),
    ("service",    "a" * 63,  NS,        True),
    ("service",    "a" * 64,  NS,        False),
    ("RayJob",     "Train",   NS,        False),
    ("RayJob",     "1train",  NS,        False),
    ("RayJob",     "train-",  NS,        False),
    ("RayJob",     NAME,      "Bad_NS",  False),
    ("RayJob",     NAME,      "n" * 64,  False),
]
# fmt: on

RENDERERS = {"RayJob": render_rayjob, "RayCluster": render_raycluster, "job": render_batch_job, "service": render_deployment}


@pytest.mark.parametrize("kind, name, namespace, accepted", NAME_ROWS, ids=[f"{r[0]}-{len(r[1])}-{r[1][:8]}-{r[2][:8]}" for r in NAME_ROWS])
def test_name_limits(kind: str, name: str, namespace: str, accepted: bool) -> None:
    spec = build_spec({"ray": kind in RAY_KINDS, "kind": kind})
    decision = size_workload(SizingRequest.from_spec(spec), AMD_8x2)
    if not accepted:
        with pytest.raises(BadInput):
            render_manifests(spec, decision, name=name, namespace=namespace, ray_version=RAY, python=PY)
        with pytest.raises(BadInput):
            RENDERERS[kind](spec, decision, name=name, namespace=namespace, ray_version=RAY, python=PY)
        return
    (obj,) = render_manifests(spec, decision, name=name, namespace=namespace, ray_version=RAY, python=PY)
    assert (obj["metadata"]["name"], obj["metadata"]["namespace"]) == (name, namespace)
    for labels in all_labels(obj):
        for key, value in labels.items():
            assert len(value) <= 63 and LABEL_VALUE.match(value), (key, value)


@pytest.mark.parametrize(
    "spec, api",
    [
        ({}, ("ray.io/v1", "RayJob")),
        ({"kind": "RayCluster"}, ("ray.io/v1", "RayCluster")),
        ({"ray": False}, ("batch/v1", "Job")),
        ({"ray": False, "kind": "service"}, ("apps/v1", "Deployment")),
    ],
    ids=["default RayJob", "RayCluster", "non-Ray job", "service"],
)
def test_dispatch_on_resolved_kind(spec: dict[str, Any], api: tuple[str, str]) -> None:
    built = build_spec(spec)
    (obj,) = render_manifests(built, size_workload(SizingRequest.from_spec(built), AMD_8x2), name=NAME, namespace=NS, ray_version=RAY, python=PY)
    assert (obj["apiVersion"], obj["kind"]) == api
    assert list(obj) == ["apiVersion", "kind", "metadata", "spec"]


ALL_CASES = [(row, kind) for row in RAY_ROWS for kind in RAY_KINDS]


def render_any(case: Any) -> list[dict[str, Any]]:
    if isinstance(case, PlainRow):
        return [render_plain(case)]
    row, kind = case
    return [render(row, kind)]


EVERY = [*ALL_CASES, *PLAIN_ROWS]
EVERY_IDS = [f"{c[1]}: {c[0].id}" for c in ALL_CASES] + [r.id for r in PLAIN_ROWS]


@pytest.mark.parametrize("case", EVERY, ids=EVERY_IDS)
def test_rendering_is_deterministic_and_shares_nothing(case: Any) -> None:
    first, second = render_any(case), render_any(case)
    assert first == second
    assert to_yaml(first) == to_yaml(second)
    # Head and workers must not share dicts: editing one pod template leaves the other alone.
    pods = list(templates(first[0]).values())
    pods[0]["metadata"]["labels"]["edited"] = "yes"
    pods[0]["spec"]["containers"][0]["env"].append({"name": "EDITED", "value": "1"})
    assert all("edited" not in p["metadata"]["labels"] for p in pods[1:])
    assert first[0]["metadata"]["labels"].get("edited") is None


@pytest.mark.parametrize("case", EVERY, ids=EVERY_IDS)
def test_to_yaml_round_trips(case: Any) -> None:
    objects = render_any(case)
    text = to_yaml(objects)
    assert list(yaml.safe_load_all(text)) == objects
    assert "&id" not in text and "*id" not in text  # no anchors: kubectl users read this
    assert text.startswith("---\napiVersion: ")


def test_to_yaml_writes_several_documents_in_order() -> None:
    objects = [render(RAY_ROWS[7], "RayJob"), render_plain(PLAIN_ROWS[3]), render(RAY_ROWS[0], "RayCluster")]
    text = to_yaml(objects)
    assert [d["kind"] for d in yaml.safe_load_all(text)] == ["RayJob", "Deployment", "RayCluster"]
    assert text.count("\n---\n") == 2
    assert "runtimeEnvYAML: |" in text  # multi-line strings stay readable


def test_the_module_does_not_import_ray_or_kubernetes() -> None:
    code = (
        "import sys, raybridge.jobs.decision.manifests\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'kubernetes'))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("ray_version", ["2.52.0", "2.60.1"])
def test_the_ray_version_handed_in_is_the_one_rendered(ray_version: str) -> None:
    """Rendering reads nothing of this machine: the caller hands in the Ray release (token auth's `rayVersion`
    and the default images follow it)."""
    spec = build_spec({"ray": True, "kind": "RayJob", "authMode": "token", "gpus": 2})
    (obj,) = render_manifests(spec, size_workload(SizingRequest.from_spec(spec), NV_4x2), name=NAME, namespace=NS, ray_version=ray_version, python=PY)
    cluster = obj["spec"]["rayClusterSpec"]
    assert cluster["rayVersion"] == ray_version
    assert cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["image"].startswith(f"rayproject/ray:{ray_version}-py3")


@pytest.mark.parametrize(
    "fields, auth_options",
    [
        ({"authSecret": "ray-auth-token"}, {"mode": "token", "secretName": "ray-auth-token"}),
        ({"authMode": "token", "authSecret": "ray-auth-token"}, {"mode": "token", "secretName": "ray-auth-token"}),
        ({"authMode": "token"}, {"mode": "token"}),
    ],
)
def test_auth_secret_names_the_token_secret_of_the_cluster(fields: dict[str, str], auth_options: dict[str, str]) -> None:
    """KubeRay's authOptions.secretName (v1.6.0): every job's cluster takes its token from the Secret the user made, so
    the submitter's RBAC can name that one Secret (configs/rbac/submitter-token-auth.yaml)."""
    spec = build_spec({"ray": True, "kind": "RayJob", "gpus": 2, **fields})
    (obj,) = render_manifests(spec, size_workload(SizingRequest.from_spec(spec), NV_4x2), name=NAME, namespace=NS, ray_version="2.60.0", python=PY)
    assert obj["spec"]["rayClusterSpec"]["authOptions"] == auth_options
    assert obj["spec"]["rayClusterSpec"]["rayVersion"] == "2.60.0"


@pytest.mark.parametrize(
    "fields, fragment",
    [
        ({"authSecret": "Not_A_Name"}, "must be a DNS-1123 subdomain"),
        ({"authSecret": "ray-auth-token", "authMode": "disabled"}, "authSecret names the Secret of the cluster's token: it needs authMode: token"),
    ],
)
def test_an_auth_secret_that_cannot_be_is_refused(fields: dict[str, str], fragment: str) -> None:
    with pytest.raises(BadInput, match=fragment):
        build_spec({"entrypoint": "python x.py", **fields})
