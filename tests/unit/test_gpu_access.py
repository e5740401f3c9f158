"""How a job's pods ask for their GPUs on a cluster of device-plugin and DRA nodes (jobs/decision/gpu_access.py),
and what that makes of the rendered objects (jobs/decision/manifests.py): one row per cluster shape."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from raybridge.core.dra import GPU_DRIVERS
from raybridge.core.inventory import DeviceSources, inventory_from_nodes
from raybridge.errors import BadInput
from raybridge.jobs.decision.images import PythonVersion
from raybridge.jobs.decision.manifests import claim_template_name, render_manifests, workload_of
from raybridge.jobs.decision.planning import plan_job
from raybridge.jobs.decision.spec import parse_spec
from tests.builders import device_class, dra_device, gpu_node, resource_slice
from tests.unit.k8s_schemas import k8s_schema_errors

CLASSES = [device_class(d.device_class, d.class_selector) for d in GPU_DRIVERS.values()]


def _cluster(plugin_nodes: int, dra_nodes: int, both_nodes: int = 0, per_node: int = 8) -> Any:
    nodes, slices = [], []
    for i in range(plugin_nodes):
        nodes.append(gpu_node(f"plugin-{i}", gpus=per_node))
    for i in range(dra_nodes):
        nodes.append(gpu_node(f"dra-{i}", gpus=0))
        slices.append(resource_slice(f"dra-{i}", [dra_device(f"gpu-{j}") for j in range(per_node)]))
    for i in range(both_nodes):
        nodes.append(gpu_node(f"both-{i}", gpus=per_node))
        slices.append(resource_slice(f"both-{i}", [dra_device(f"gpu-{j}") for j in range(per_node)]))
    return inventory_from_nodes(nodes, devices=DeviceSources.read(slices, CLASSES))


# (case, plugin nodes, DRA nodes, nodes with both, GPUs asked, per replica or None, the class claimed, GPUs left out)
ROWS: list[tuple[str, int, int, int, int, Optional[float], Optional[str], int]] = [
    ("device plugin only: as before", 3, 0, 0, 16, None, None, 0),
    ("DRA only: claims of the driver's class", 0, 3, 0, 16, None, "gpu.nvidia.com", 0),
    ("more GPUs through DRA: DRA, the plugin's node left out", 1, 2, 0, 16, None, "gpu.nvidia.com", 8),
    ("a tie: the device plugin, which needs no claim", 2, 2, 0, 16, None, None, 16),
    ("nodes with both reach either way: none left out", 0, 1, 2, 16, None, "gpu.nvidia.com", 0),
    ("a tie counts nodes with both on each side", 1, 1, 2, 16, None, None, 8),
    ("KAI sharing asks the device plugin's way only", 1, 3, 0, 1, 0.5, None, 24),
]


@pytest.mark.parametrize("case, plugin, dra, both, gpus, per, device_class, left_out", ROWS, ids=[r[0] for r in ROWS])
def test_the_way_that_reaches_more_gpus_is_chosen_and_what_it_leaves_out_is_said(
    case: str, plugin: int, dra: int, both: int, gpus: int, per: Optional[float], device_class: Optional[str], left_out: int
) -> None:
    fields: dict[str, Any] = {"entrypoint": "python x.py", "gpus": gpus}
    if per is not None:
        fields.update(replicas=2, gpusPerReplica=per)
    decision = plan_job(parse_spec(None, overrides=fields), _cluster(plugin, dra, both))
    assert decision.device_class == device_class, case
    assert decision.dra == (device_class is not None)
    said = [w for w in decision.warnings if "left out" in w]
    if left_out:
        assert said and said[0].startswith(f"{left_out} nvidia GPUs"), (case, decision.warnings)
    else:
        assert not said, (case, decision.warnings)


def test_kai_sharing_on_a_dra_only_cluster_is_refused_with_the_reason() -> None:
    with pytest.raises(BadInput, match="DRA devices only, and KAI shares device-plugin GPUs only"):
        plan_job(parse_spec(None, overrides={"entrypoint": "x", "replicas": 2, "gpusPerReplica": 0.5}), _cluster(0, 2))


def _render(decision: Any, kind: Optional[str] = None) -> list[dict[str, Any]]:
    fields: dict[str, Any] = {"entrypoint": "python x.py", "gpus": 16}
    if kind:
        fields.update(ray=False, kind=kind)
    return render_manifests(parse_spec(None, overrides=fields), decision, name="train", namespace="team-a", ray_version="2.60.0", python=PythonVersion((3, 11)))


@pytest.mark.parametrize("kind", [None, "job", "service"])
def test_a_dra_job_claims_its_gpus_through_one_template_and_tells_ray_the_count(kind: Optional[str]) -> None:
    fields: dict[str, Any] = {"entrypoint": "python x.py", "gpus": 16}
    if kind:
        fields.update(ray=False, kind=kind)
    decision = plan_job(parse_spec(None, overrides=fields), _cluster(0, 3))
    objects = _render(decision, kind)
    template, workload = objects[0], workload_of(objects)
    assert template["kind"] == "ResourceClaimTemplate" and template["metadata"]["name"] == claim_template_name("train")
    request = template["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"] == {"deviceClassName": "gpu.nvidia.com", "count": decision.gpus_per_replica}
    if kind is None:
        group = workload["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
        assert group["rayStartParams"]["num-gpus"] == "8"  # no nvidia.com/gpu limit: KubeRay cannot infer it
        pod = group["template"]["spec"]
        assert workload["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"].get("resourceClaims") is None
    else:
        pod = workload["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "train-gpus"}]
    container = pod["containers"][0]
    assert container["resources"]["claims"] == [{"name": "gpus"}]
    assert "nvidia.com/gpu" not in container["resources"]["limits"] and "nvidia.com/gpu" not in container["resources"]["requests"]


def test_the_claim_template_and_the_pods_pass_kubernetes_1_34_schemas() -> None:
    decision = plan_job(parse_spec(None, overrides={"entrypoint": "python x.py", "gpus": 16, "ray": False, "kind": "job"}), _cluster(0, 3))
    for obj in _render(decision, "job"):
        assert k8s_schema_errors(obj, "1.34") == [], obj["kind"]


def test_a_device_plugin_job_renders_as_before() -> None:
    decision = plan_job(parse_spec(None, overrides={"entrypoint": "python x.py", "gpus": 16}), _cluster(3, 0))
    objects = _render(decision)
    assert [o["kind"] for o in objects] == ["RayJob"]
    pod = objects[0]["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert "resourceClaims" not in pod and pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"


def _two_models() -> Any:
    """Two DRA nodes of H100s (80 GB) and one of A100s (40 GB), and two device-plugin nodes of the same models."""
    nodes = [gpu_node("dra-h-0", gpus=0), gpu_node("dra-h-1", gpus=0), gpu_node("dra-a-0", gpus=0),
             gpu_node("dp-h-0", gpus=8, product="NVIDIA-H100-80GB-HBM3", memory_mib=81559),
             gpu_node("dp-a-0", gpus=8, product="NVIDIA-A100-SXM4-40GB", memory_mib=40960)]  # fmt: skip
    slices = [resource_slice(n, [dra_device(f"gpu-{j}") for j in range(8)]) for n in ("dra-h-0", "dra-h-1")]
    slices.append(resource_slice("dra-a-0", [dra_device(f"gpu-{j}", product="NVIDIA A100-SXM4-40GB", memory="40Gi") for j in range(8)]))
    return inventory_from_nodes(nodes, devices=DeviceSources.read(slices, CLASSES))


# (case, gpuModel, gpuMemory, the class claimed, its CEL selectors, the node affinity's values, GPUs of the vendor left)
CHOICE_ROWS: list[tuple[str, Optional[str], Optional[str], Optional[str], list[str], list[str], int]] = [
    ("no choice: every GPU, DRA reaches more", None, None, "gpu.nvidia.com", [], [], 24),
    ("H100 only: DRA's two nodes beat the plugin's one", "H100", None, "gpu.nvidia.com",
     ["device.attributes['gpu.nvidia.com'].productName in ['NVIDIA H100 80GB HBM3']"], [], 16),
    ("A100 only: a tie, the device plugin's, pinned by its label", "a100", None, None, [], ["NVIDIA-A100-SXM4-40GB"], 8),
    ("at least 60Gi each: the H100s", None, "60Gi", "gpu.nvidia.com",
     ["device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('61440Mi')) >= 0"], [], 16),
]


@pytest.mark.parametrize("case, model, memory, device_class, selectors, affinity, left", CHOICE_ROWS, ids=[r[0] for r in CHOICE_ROWS])
def test_gpu_model_and_memory_narrow_the_gpus_and_pin_the_pods_to_them(
    case: str, model: Optional[str], memory: Optional[str], device_class: Optional[str], selectors: list[str], affinity: list[str], left: int
) -> None:
    fields: dict[str, Any] = {"entrypoint": "python x.py", "gpus": 8, "gpuModel": model, "gpuMemory": memory}
    decision = plan_job(parse_spec(None, overrides=fields), _two_models())
    assert (decision.device_class, decision.cluster_gpus) == (device_class, left), case
    objects = render_manifests(parse_spec(None, overrides=fields), decision, name="t", namespace="n", ray_version="2.60.0",
                               python=PythonVersion((3, 11)))  # fmt: skip
    if device_class:
        request = objects[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        assert [s["cel"]["expression"] for s in request.get("selectors", [])] == selectors, case
    pod = workload_of(objects)["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    terms = (((pod.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    values = [v for t in terms.get("nodeSelectorTerms", []) for e in t["matchExpressions"] for v in e["values"]]
    assert values == affinity, case


def test_a_model_that_is_only_part_of_a_word_is_not_that_model() -> None:
    with pytest.raises(BadInput, match="not H10 \\(gpuModel\\)"):
        plan_job(parse_spec(None, overrides={"entrypoint": "x", "gpus": 8, "gpuModel": "H10"}), _two_models())


@pytest.mark.parametrize("field, value", [("gpuModel", "H100\n"), ("gpuModel", 7), ("gpuMemory", "-1Gi"), ("gpuMemory", "lots")])
def test_a_malformed_gpu_choice_is_refused(field: str, value: Any) -> None:
    with pytest.raises(BadInput, match=field):
        parse_spec(None, overrides={"entrypoint": "x", "gpus": 8, field: value})
