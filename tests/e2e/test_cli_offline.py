"""discover, plan and render as a user runs them: CLI in, output and exit status out."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.helpers import EXAMPLES, cli_env, run_cli
from tests.schemas import schema_errors

NODES = str(EXAMPLES / "cluster" / "nodes.json")
PODS = str(EXAMPLES / "cluster" / "pods.json")


def test_help_is_fast_and_imports_neither_ray_nor_kubernetes():
    code = "import sys, runpy; sys.argv=['raybridge','--help']\ntry:\n runpy.run_module('raybridge', run_name='__main__')\nexcept SystemExit: pass\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('ray','kubernetes')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=60)
    assert out.stdout.strip().endswith("[]"), out.stdout
    assert "submit" in out.stdout


def test_discover_from_files_json():
    out = run_cli("discover", "--nodes", NODES, "--pods", PODS, "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    nodes = {n["name"]: n for n in data["nodes"]}
    assert nodes["mi300x-0"]["free"] == 2 and nodes["h100-1"]["eligible"] is False
    assert data["vendors"]["amd"]["total"] == 24


def test_discover_table_and_yaml():
    table = run_cli("discover", "--nodes", NODES)
    assert table.returncode == 0 and "mi300x-0" in table.stdout and "cordoned" in table.stdout
    as_yaml = yaml.safe_load(run_cli("discover", "--nodes", NODES, "-o", "yaml").stdout)
    assert as_yaml["source"] == "file"


def test_discover_without_cluster_reports_this_machine():
    out = run_cli("discover", "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # amdsmi's noise must not reach stdout
    assert data["source"] == "local"
    assert any("no cluster configured" in n for n in data["notes"])


# (case, flags, replicas, gpusPerReplica, totalGpus, calculated, warning fragment)
PLAN_ROWS = [
    ("gpus only", ["--gpus", "16", "--gpu-vendor", "amd"], 2, 8, 16, True, None),
    ("as given", ["--replicas", "2", "--gpus-per-replica", "4", "--gpu-vendor", "amd"], 2, 4, 8, False, None),
    ("capped", ["--gpus", "40", "--gpu-vendor", "amd"], 3, 8, 24, True, "capped at 24"),
    ("nvidia counts only schedulable nodes", ["--gpus", "10", "--gpu-vendor", "nvidia"], 1, 8, 8, True, "capped at 8"),
    ("nothing asked", [], 1, 0, 0, False, None),
]


@pytest.mark.parametrize("case,flags,replicas,per,total,calculated,warning", PLAN_ROWS, ids=[r[0] for r in PLAN_ROWS])
def test_plan(case, flags, replicas, per, total, calculated, warning):
    out = run_cli("plan", "--nodes", NODES, *flags, "-o", "json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    for key in ("gpuVendor", "resourceKey", "replicas", "gpusPerReplica", "totalGpus", "requestedGpus", "calculated", "clusterGpus", "minGpusPerNode", "warnings"):
        assert key in plan
    assert (plan["replicas"], plan["gpusPerReplica"], plan["totalGpus"], plan["calculated"]) == (replicas, per, total, calculated)
    if warning:
        assert any(warning in w for w in plan["warnings"])


def test_plan_on_mixed_cluster_defaults_to_amd_with_a_note():
    plan = json.loads(run_cli("plan", "--nodes", NODES, "--gpus", "4", "-o", "json").stdout)
    assert plan["gpuVendor"] == "amd" and any("mixed cluster" in n for n in plan["notes"])


def test_plan_spec_file_and_flags_win(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: train\ngpus: 4\ngpuVendor: amd\n")
    plan = json.loads(run_cli("plan", str(spec), "--nodes", NODES, "--gpus", "16", "-o", "json").stdout)
    assert plan["totalGpus"] == 16


# (case, argv, message fragments)
BAD_INPUT_ROWS = [
    ("every bad field named at once", ["plan", "--nodes", NODES, "--gpus", "-1", "--gpu-vendor", "intel", "--replicas", "x"], ["gpus:", "gpuVendor:", "replicas:"]),
    ("bad name", ["render", "--nodes", NODES, "--name", "Bad_Name"], ["name: must be a DNS-1035 label"]),
    ("name too long for a RayJob", ["render", "--nodes", NODES, "--name", "a" * 48], ["at most 47 characters"]),
    ("missing spec file", ["plan", "/nonexistent.yaml", "--nodes", NODES], ["does not exist"]),
    ("missing nodes file", ["plan", "--nodes", "/nonexistent.json"], ["does not exist"]),
    ("fraction above one", ["plan", "--nodes", NODES, "--replicas", "2", "--gpus-per-replica", "1.5"], ["whole number"]),
    ("unknown flag", ["plan", "--gpuz", "3"], ["unrecognized arguments"]),
    ("ray kind without ray", ["render", "--nodes", NODES, "--no-ray", "--kind", "RayCluster"], ["needs Ray"]),
]


@pytest.mark.parametrize("case,argv,fragments", BAD_INPUT_ROWS, ids=[r[0] for r in BAD_INPUT_ROWS])
def test_bad_input_exits_2_without_traceback(case, argv, fragments):
    out = run_cli(*map(str, argv))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    for fragment in fragments:
        assert fragment in out.stderr


def test_unknown_field_in_spec_file(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("gpu: 4\nreplicas: -2\n")
    out = run_cli("plan", str(spec), "--nodes", NODES)
    assert out.returncode == 2
    assert "gpu: unknown field (did you mean 'gpus'?)" in out.stderr and "replicas:" in out.stderr


def test_absent_vendor_exits_2_naming_present_vendors(tmp_path):
    amd_only = tmp_path / "nodes.json"
    data = json.loads((EXAMPLES / "cluster" / "nodes.json").read_text())
    data["items"] = [n for n in data["items"] if "amd.com/gpu" in n["status"]["allocatable"]]
    amd_only.write_text(json.dumps(data))
    out = run_cli("plan", "--nodes", str(amd_only), "--gpus", "2", "--gpu-vendor", "nvidia")
    assert out.returncode == 2 and "vendors present: amd (24 GPUs)" in out.stderr


def test_cluster_unreachable_exits_3(tmp_path):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:9"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
    }))  # fmt: skip
    out = run_cli("discover", "--kubeconfig", str(kubeconfig))
    assert out.returncode == 3, out.stderr
    assert "unreachable" in out.stderr and "Traceback" not in out.stderr


def test_render_is_valid_multi_document_yaml():
    out = run_cli("render", str(EXAMPLES / "hello.yaml"), "--nodes", NODES, "--gpus", "8", "--gpu-vendor", "amd", "--queue", "team-a", "--priority-class", "high")
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert len(docs) == 1
    rayjob = docs[0]
    assert schema_errors(rayjob) == []
    assert rayjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert rayjob["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"
    worker = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert worker["replicas"] == worker["minReplicas"] == worker["maxReplicas"] == 1
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["amd.com/gpu"] == "8"


@pytest.mark.parametrize(
    "flags,kind,api_version",
    [
        (["--kind", "RayCluster"], "RayCluster", "ray.io/v1"),
        (["--no-ray", "--kind", "job", "--entrypoint", "python x.py"], "Job", "batch/v1"),
        (["--no-ray", "--kind", "service", "--replicas", "3"], "Deployment", "apps/v1"),
    ],
)
def test_render_kinds(flags, kind, api_version):
    out = run_cli("render", "--nodes", NODES, "--gpus", "1", "--gpu-vendor", "nvidia", "--queue", "q", *flags)
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load(out.stdout)
    assert (doc["kind"], doc["apiVersion"]) == (kind, api_version)
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"


def test_render_fractional_uses_kai_sharing():
    out = run_cli("render", "--nodes", NODES, "--gpu-vendor", "nvidia", "--replicas", "2", "--gpus-per-replica", "0.5", "--queue", "research")
    doc = yaml.safe_load(out.stdout)
    worker = doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]
    assert worker["spec"]["schedulerName"] == "kai-scheduler"
    assert worker["metadata"]["annotations"]["gpu-fraction"] == "0.5"
    assert "nvidia.com/gpu" not in str(worker["spec"]["containers"][0].get("resources", {}))
    assert schema_errors(doc) == []


def test_render_entrypoint_after_double_dash():
    out = run_cli("render", "--nodes", NODES, "--", "python", "train.py", "--lr", "0.1")
    assert out.returncode == 0, out.stderr
    assert yaml.safe_load(out.stdout)["spec"]["entrypoint"] == "python train.py --lr 0.1"


def test_discover_probes_every_node_of_a_ray_cluster(ray_head):
    out = run_cli("discover", "--ray-address", ray_head.gcs_address, "-o", "json", timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["source"] == "ray" and len(data["nodes"]) == 1
    assert data["nodes"][0]["gpus"] == 0
