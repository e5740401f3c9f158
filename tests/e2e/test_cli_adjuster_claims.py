"""`adjuster plan` on a cluster whose nodes publish GPUs as DRA devices and whose pods claim them, from files: the
ResourceSlices and DeviceClasses beside the nodes (`kubectl get nodes,resourceslices,deviceclasses -o json`), the
ResourceClaims beside the pods. Every pod not planned is listed with why, in the table and in -o json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raybridge.core.dra import GPU_DRIVERS
from tests.builders import device_class, dra_device, gpu_node, resource_claim, resource_slice
from tests.helpers import run_cli
from tests.unit.adjuster_objects import ago, pod

NOW = ["--now", "2025-06-01T12:00:00Z"]


def _claim_pod(name: str, claim: str, created: float, **kwargs: object) -> dict:
    obj = pod(name, resourceClaims=[{"name": "gpus", "resourceClaimName": claim}], **kwargs)
    obj["metadata"]["creationTimestamp"] = ago(created)
    return obj


@pytest.fixture
def cluster(tmp_path: Path) -> tuple[str, str]:
    """Nodes: one pool whose GPUs the device plugin counts and the DRA driver publishes, one whose GPUs are DRA
    devices alone. Pods: two claiming GPUs, two sharing a claim, one whose template's claim is not made yet, a
    fractional pod that may land only on the DRA-only pool."""
    dra_only = {"nodeSelector": {"pool": "dra"}}
    pods = [
        _claim_pod("trainer", "trainer-gpus", 90),
        _claim_pod("shard-0", "shared-gpus", 80),
        _claim_pod("shard-1", "shared-gpus", 70),
        pod("waiting-template", resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": "gpu-template"}]),
        pod("fraction-on-dra", "0.5", **dra_only),
        resource_claim("trainer-gpus", "team", count=2),
        resource_claim("shared-gpus", "team", count=2),
    ]
    nodes = [
        gpu_node("both-0", 8, labels={"pool": "both"}),
        resource_slice("both-0", [dra_device(f"gpu-{i}") for i in range(8)]),
        gpu_node("dra-0", 0, labels={"pool": "dra"}),
        resource_slice("dra-0", [dra_device(f"gpu-{i}") for i in range(8)]),
        device_class("gpu.nvidia.com", GPU_DRIVERS["gpu.nvidia.com"].class_selector),
    ]
    pod_file, node_file = tmp_path / "pods.json", tmp_path / "nodes.json"
    pod_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    node_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    return str(pod_file), str(node_file)


def test_claim_pods_are_planned_and_every_other_pod_says_why(cluster: tuple[str, str]) -> None:
    pods, nodes = cluster
    out = run_cli("adjuster", "plan", "--pods", pods, "--nodes", nodes, *NOW, "-o", "json")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    data = json.loads(out.stdout)
    # The trainer's 2 devices and the shared claim's 2 (once), as 4 of the device plugin's GPUs on one node of the pool.
    [placeholder] = data["placeholders"]
    assert (placeholder["gpus"], placeholder["resourceKey"], sorted(placeholder["pods"])) == (4, "nvidia.com/gpu", ["team/shard-0", "team/trainer"])
    assert [g["deviceClass"] for g in data["groups"]] == ["gpu.nvidia.com"]
    ignored = {i["pod"]: (i["code"], i["reason"]) for i in data["ignored"]}
    assert set(ignored) == {"team/shard-1", "team/waiting-template", "team/fraction-on-dra"}, ignored
    assert ignored["team/shard-1"][0] == "claim-shared" and "counted for team/shard-0" in ignored["team/shard-1"][1]
    assert ignored["team/waiting-template"][0] == "claim-unknown"
    assert ignored["team/fraction-on-dra"][0] == "dra-only-nodes" and "not yet supported on DRA-only nodes" in ignored["team/fraction-on-dra"][1]

    table = run_cli("adjuster", "plan", "--pods", pods, "--nodes", nodes, *NOW)
    assert table.returncode == 0, table.stderr
    assert "Placeholders (exact): 4 GPUs in 1 placeholder" in table.stdout
    for name, (code, _) in ignored.items():
        row = next(line for line in table.stdout.splitlines() if line.startswith(name))
        assert code in row, table.stdout
    assert "ResourceClaims of DeviceClass gpu.nvidia.com" in table.stderr + table.stdout


def test_an_autoscaler_that_reads_dra_is_left_the_claim_pods(cluster: tuple[str, str]) -> None:
    pods, nodes = cluster
    out = run_cli("adjuster", "plan", "--pods", pods, "--nodes", nodes, *NOW, "-o", "json", "--autoscaler-reads-dra", "true")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["placeholders"] == []
    codes = {i["pod"]: i["code"] for i in data["ignored"]}
    assert codes["team/trainer"] == codes["team/shard-0"] == "claims-seen-by-autoscaler"


def test_bad_settings_of_the_devices_exit_2(cluster: tuple[str, str]) -> None:
    pods, nodes = cluster
    for flag, value, fragment in (("--autoscaler-reads-dra", "yes", "invalid choice"),
                                  ("--gpu-memory-label", "not a label!", "--gpu-memory-label must be a label key")):
        out = run_cli("adjuster", "plan", "--pods", pods, "--nodes", nodes, *NOW, flag, value)
        assert out.returncode == 2 and fragment in out.stderr and "Traceback" not in out.stderr, out.stderr
