"""discover, plan and render as a user runs them: CLI in, output and exit status out."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import yaml

from tests.helpers import EXAMPLES, cli_env, run_cli
from testcluster.crd_schemas import schema_errors

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
    out = run_cli("plan", "--entrypoint", "python train.py", "--nodes", NODES, *flags, "-o", "json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    for key in ("gpuVendor", "resourceKey", "replicas", "gpusPerReplica", "totalGpus", "requestedGpus", "calculated", "clusterGpus", "minGpusPerNode", "warnings"):
        assert key in plan
    assert (plan["replicas"], plan["gpusPerReplica"], plan["totalGpus"], plan["calculated"]) == (replicas, per, total, calculated)
    if warning:
        assert any(warning in w for w in plan["warnings"])


def test_plan_on_mixed_cluster_defaults_to_amd_with_a_note():
    plan = json.loads(run_cli("plan", "--entrypoint", "python train.py", "--nodes", NODES, "--gpus", "4", "-o", "json").stdout)
    assert plan["gpuVendor"] == "amd" and any("mixed cluster" in n for n in plan["notes"])


def test_plan_spec_file_and_flags_win(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: train\nentrypoint: python train.py\ngpus: 4\ngpuVendor: amd\n")
    plan = json.loads(run_cli("plan", str(spec), "--nodes", NODES, "--gpus", "16", "-o", "json").stdout)
    assert plan["totalGpus"] == 16


# (case, argv, message fragments)
BAD_INPUT_ROWS = [
    ("every bad field named at once", ["plan", "--entrypoint", "python train.py", "--nodes", NODES, "--gpus", "-1", "--gpu-vendor", "intel", "--replicas", "x"], ["gpus:", "gpuVendor:", "replicas:"]),
    ("bad name", ["render", "--entrypoint", "python train.py", "--nodes", NODES, "--name", "Bad_Name"], ["name: must be a DNS-1035 label"]),
    ("name too long for a RayJob", ["render", "--entrypoint", "python train.py", "--nodes", NODES, "--name", "a" * 47], ["at most 46 characters"]),
    ("missing spec file", ["plan", "/nonexistent.yaml", "--nodes", NODES], ["does not exist"]),
    ("missing nodes file", ["plan", "--entrypoint", "python train.py", "--nodes", "/nonexistent.json"], ["does not exist"]),
    ("fraction above one", ["plan", "--entrypoint", "python train.py", "--nodes", NODES, "--replicas", "2", "--gpus-per-replica", "1.5"], ["whole number"]),
    ("unknown flag", ["plan", "--gpuz", "3"], ["unrecognized arguments"]),
    ("ray kind without ray", ["render", "--entrypoint", "python train.py", "--nodes", NODES, "--no-ray", "--kind", "RayCluster"], ["needs Ray"]),
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
    out = run_cli("plan", "--entrypoint", "python train.py", "--nodes", str(amd_only), "--gpus", "2", "--gpu-vendor", "nvidia")
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
        (["--no-ray", "--kind", "service", "--replicas", "3", "--entrypoint", "python serve.py"], "Deployment", "apps/v1"),
    ],
)
def test_render_kinds(flags, kind, api_version):
    out = run_cli("render", "--nodes", NODES, "--gpus", "1", "--gpu-vendor", "nvidia", "--queue", "q", *flags)
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load(out.stdout)
    assert (doc["kind"], doc["apiVersion"]) == (kind, api_version)
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"


def test_render_fractional_uses_kai_sharing():
    out = run_cli("render", "--entrypoint", "python train.py", "--nodes", NODES, "--gpu-vendor", "nvidia", "--replicas", "2", "--gpus-per-replica", "0.5", "--queue", "research")
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
    out = run_cli("discover", "--ray-address", ray_head.gcs_address, "-o", "json", env=cli_env(**ray_head.token_env()), timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["source"] == "ray" and len(data["nodes"]) == 1
    assert data["nodes"][0]["gpus"] == 0


def test_submit_refuses_to_start_ray_where_a_broken_amdsmi_would_kill_it(tmp_path) -> None:
    """Ray >= 2.56 imports amdsmi; the wheel without ROCm raises KeyError: one line and exit 3, no traceback."""
    from importlib.metadata import version

    from raybridge.gpu.ray_start import RAY_IMPORTS_AMDSMI_FROM, release_tuple

    if release_tuple(version("ray")) < RAY_IMPORTS_AMDSMI_FROM:
        pytest.skip("this Ray does not import amdsmi")
    (tmp_path / "amdsmi.py").write_text("print('Unable to find libamd_smi.so library')\nraise KeyError('libamd_smi.so')\n")
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    result = run_cli("submit", str(EXAMPLES / "hello.yaml"), "--backend", "local", env=env)
    assert result.returncode == 3, result.stderr
    assert "pip uninstall amdsmi" in result.stderr and "Traceback" not in result.stderr
    assert "Unable to find" not in result.stdout + result.stderr


# (case, extra args, fragment of the one error line): refused with exit 2, never reinterpreted
BAD_NUMBERS = [
    ("boolean gpus", ["--gpus", "true"], "gpus: input should be a valid integer"),
    ("infinite gpus", ["--gpus", "inf"], "gpus: input should be a valid integer"),
    ("NaN gpus", ["--gpus", "nan"], "gpus: input should be a valid integer"),
    ("negative gpus", ["--gpus", "-4"], "gpus: input should be greater than or equal to 0"),
    ("fractional gpus", ["--gpus", "2.5"], "gpus: input should be a valid integer"),
    ("fractional replicas", ["--replicas", "1.5"], "replicas: input should be a valid integer"),
    ("infinite gpus per replica", ["--gpus-per-replica", "inf", "--replicas", "1"], "gpusPerReplica: input should be a finite number"),
    ("NaN gpus per replica", ["--gpus-per-replica", "nan", "--replicas", "1"], "gpusPerReplica: input should be a finite number"),
    ("zero per replica contradicts gpus", ["--gpus", "4", "--gpus-per-replica", "0"], "gpusPerReplica: 0 contradicts gpus: 4"),
    ("zero replicas with gpus", ["--gpus", "4", "--replicas", "0"], "replicas: must be at least 1 (got 0)"),
    ("zero replicas alone", ["--replicas", "0"], "replicas: must be at least 1 (got 0)"),
    ("gpus 0 with gpus per replica", ["--gpus", "0", "--gpus-per-replica", "2"], "gpusPerReplica: 2 with replicas unset and gpus 0 allocates no GPUs"),
]


@pytest.mark.parametrize("case,extra,fragment", BAD_NUMBERS, ids=[r[0] for r in BAD_NUMBERS])
def test_bad_numbers_are_refused(case, extra, fragment):
    result = run_cli("plan", "--entrypoint", "python train.py", "--nodes", NODES, "--entrypoint", "python x.py", *extra)
    assert result.returncode == 2, result.stdout + result.stderr
    assert fragment in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "0", "soon"])
def test_a_timeout_that_bounds_nothing_is_refused(value):
    result = run_cli("submit", "--nodes", NODES, "--entrypoint", "true", "--dry-run", "--timeout", value)
    assert result.returncode == 2
    assert "--timeout" in result.stderr and "Traceback" not in result.stderr


def test_replicas_alone_are_honoured():
    result = run_cli("plan", "--entrypoint", "python train.py", "--nodes", NODES, "--entrypoint", "python x.py", "--replicas", "3", "-o", "json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert (plan["replicas"], plan["totalGpus"]) == (3, 0)
    rendered = run_cli("render", "--entrypoint", "python train.py", "--nodes", NODES, "--entrypoint", "python x.py", "--replicas", "3")
    worker = next(iter(yaml.safe_load_all(rendered.stdout)))["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert worker["replicas"] == worker["minReplicas"] == worker["maxReplicas"] == 3


def test_malformed_nodes_are_warned_about_and_counted_once(tmp_path):
    nodes = json.loads((EXAMPLES / "cluster" / "nodes.json").read_text())
    first = nodes["items"][0]
    broken = json.loads(json.dumps(first))
    broken["status"]["allocatable"] = {k: ("500m" if k.endswith("/gpu") else v) for k, v in broken["status"]["allocatable"].items()}
    broken["metadata"]["name"] = "broken-node"
    nodes["items"] += [json.loads(json.dumps(first)), broken]
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(nodes))
    result = run_cli("discover", "--nodes", str(path), "-o", "json")
    assert result.returncode == 0, result.stderr
    names = [n["name"] for n in json.loads(result.stdout)["nodes"]]
    assert names.count(first["metadata"]["name"]) == 1
    assert f"warning: node {first['metadata']['name']} is listed more than once: counted once" in result.stderr
    assert "warning: node broken-node:" in result.stderr and "'500m' is not a whole number of GPUs: counted as 0" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "content,fragment",
    [
        ('{"hello": "world"}', "expected a Node list"),
        ('["a", "b"]', "2 of 2 items are not Node objects"),
        ("42", "expected a Node list"),
        ("{not json: [", "neither JSON nor YAML"),
    ],
)
def test_a_nodes_file_that_is_not_node_json_is_bad_input(tmp_path, content, fragment):
    path = tmp_path / "nodes.json"
    path.write_text(content)
    for command in (["discover"], ["plan", "--entrypoint", "x"], ["render", "--entrypoint", "x"]):
        result = run_cli(*command, "--nodes", str(path))
        assert result.returncode == 2, (command, result.stderr)
        assert fragment in result.stderr and "Traceback" not in result.stderr
        assert result.stdout == ""


def test_inventory_json_keys_are_camel_case():
    result = run_cli("discover", "--nodes", NODES, "-o", "json")
    vendors = json.loads(result.stdout)["vendors"]
    assert set(vendors["amd"]) == {"vendor", "total", "minPerNode", "maxPerNode", "nodes"}


# The one entrypoint rule (core.spec.entrypoint_problem): only a RayJob that is to run needs a command.
# (case, command, extra flags, exit status, fragment of stderr)
ENTRYPOINT_ROWS = [
    ("plan sizes without a command", ["plan"], [], 0, None),
    ("plan sizes with a blank command", ["plan"], ["--entrypoint", "   "], 0, None),
    ("plan of a RayCluster with a command", ["plan"], ["--kind", "RayCluster", "--entrypoint", "python train.py"], 0, None),
    ("render of a RayJob needs a command", ["render"], [], 2, "a RayJob needs a command to run"),
    ("render of a RayJob, blank command", ["render"], ["--entrypoint", "   "], 2, "a RayJob needs a command to run"),
    ("render of a RayCluster needs none", ["render"], ["--kind", "RayCluster"], 0, None),
    ("render of a RayCluster says where the command goes", ["render"], ["--kind", "RayCluster", "--entrypoint", "python train.py"], 0,
     "note: a RayCluster runs no entrypoint, so 'python train.py' is not in it: once the cluster is up, submit it with `ray job submit"),
    ("submit needs a command", ["submit", "--dry-run"], [], 2, "a RayJob needs a command to run"),
    ("submit needs a command, not a blank", ["submit", "--dry-run"], ["--entrypoint", "   "], 2, "a RayJob needs a command to run"),
    ("submit of a RayCluster refuses a command it would not run", ["submit", "--dry-run"], ["--kind", "RayCluster", "--entrypoint", "python train.py"], 2,
     "a RayCluster runs no entrypoint"),
]


@pytest.mark.parametrize("case,command,extra,status,fragment", ENTRYPOINT_ROWS, ids=[r[0] for r in ENTRYPOINT_ROWS])
def test_one_entrypoint_rule_for_plan_render_and_submit(case, command, extra, status, fragment):
    out = run_cli(*command, "--nodes", NODES, "--gpus", "8", "--gpu-vendor", "amd", *extra)
    assert out.returncode == status, out.stderr
    assert "Traceback" not in out.stderr
    if fragment:
        assert fragment in out.stderr
    if status == 2:
        assert out.stdout == ""


def test_every_command_refuses_a_working_dir_that_is_not_a_directory(tmp_path):
    for command in (["render"], ["plan"], ["submit", "--dry-run"]):
        out = run_cli(*command, "--nodes", NODES, "--entrypoint", "python x.py", "--working-dir", str(tmp_path / "missing"))
        assert out.returncode == 2, (command, out.stderr)
        assert "is not a directory" in out.stderr and out.stdout == "", command


def test_the_readme_s_sizing_needs_no_command():
    out = run_cli("plan", "--gpus", "16", "--nodes", NODES, "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["totalGpus"] == 16


@pytest.mark.parametrize("submission_id", ["a/b", "has space", "-leading", "x" * 64, "trailing.", "ünïcode"])
def test_a_bad_submission_id_is_refused_before_anything_is_created(submission_id):
    out = run_cli("submit", "--nodes", NODES, "--dry-run", "--entrypoint", "python x.py", f"--submission-id={submission_id}")
    assert out.returncode == 2 and "--submission-id: must be 1 to 63 letters" in out.stderr
    assert out.stdout == ""


def test_render_and_plan_use_the_kubeconfig_contexts_namespace(tmp_path):
    """One target for every command: -n, else the context's namespace, else default."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "team",
        "contexts": [{"name": "team", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
                     {"name": "other", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }))  # fmt: skip
    base = ["render", "--nodes", NODES, "--entrypoint", "python x.py", "--kubeconfig", str(kubeconfig)]
    assert yaml.safe_load(run_cli(*base).stdout)["metadata"]["namespace"] == "team-a"
    assert yaml.safe_load(run_cli(*base, "-n", "mine").stdout)["metadata"]["namespace"] == "mine"
    assert yaml.safe_load(run_cli(*base, "--context", "other").stdout)["metadata"]["namespace"] == "default"
    env = cli_env(KUBECONFIG=str(kubeconfig))
    out = run_cli("render", "--nodes", NODES, "--entrypoint", "python x.py", env=env)
    assert yaml.safe_load(out.stdout)["metadata"]["namespace"] == "team-a"
    dry = run_cli("submit", "--nodes", NODES, "--entrypoint", "python x.py", "--dry-run", "-o", "json", env=env)
    assert json.loads(dry.stdout)["objects"][0]["metadata"]["namespace"] == "team-a"


def test_kubeconfig_files_that_do_not_exist_are_said(tmp_path):
    env = cli_env(KUBECONFIG=os.pathsep.join([str(tmp_path / "gone-1"), str(tmp_path / "gone-2")]))
    out = run_cli("render", "--nodes", NODES, "--entrypoint", "python x.py", env=env)
    assert out.returncode == 0
    assert f"kubeconfig '{tmp_path / 'gone-1'}' does not exist" in out.stderr
    assert f"kubeconfig '{tmp_path / 'gone-2'}' does not exist" in out.stderr


def test_render_says_what_the_yaml_is_for_and_k8sjobmode_runs_by_itself(tmp_path):
    interactive = run_cli("render", "--nodes", NODES, "--gpus", "8", "--", "python", "train.py")
    assert interactive.returncode == 0
    assert "InteractiveMode" in interactive.stderr and "raybridge submit" in interactive.stderr
    assert yaml.safe_load(interactive.stdout)["spec"]["submissionMode"] == "InteractiveMode"
    alone = run_cli("render", "--nodes", NODES, "--gpus", "8", "--submission-mode", "K8sJobMode", "--", "python", "train.py")
    assert alone.returncode == 0, alone.stderr
    rayjob = yaml.safe_load(alone.stdout)
    assert rayjob["spec"]["submissionMode"] == "K8sJobMode" and rayjob["spec"]["entrypoint"] == "python train.py"
    assert "jobId" not in rayjob["spec"] and "runs by itself" in alone.stderr
    assert schema_errors(rayjob) == []
    (tmp_path / "code").mkdir()
    local = run_cli("render", "--nodes", NODES, "--submission-mode", "K8sJobMode", "--working-dir", str(tmp_path / "code"), "--", "python", "x.py")
    assert local.returncode == 2 and "cannot reach the cluster through `kubectl apply`" in local.stderr


def test_list_like_tables_are_plain_columns_when_piped():
    out = run_cli("discover", "--nodes", NODES)
    header = out.stdout.splitlines()[0]
    assert header.split() == ["NODE", "VENDOR", "GPUS", "FREE", "MODEL", "MEMORY/GPU", "SCHEDULABLE"]
    assert "│" not in out.stdout and "━" not in out.stdout


def test_flags_the_backend_cannot_honour_are_refused_or_warned_about(tmp_path):
    kube = run_cli("submit", "--backend", "kubernetes", "--address", "http://127.0.0.1:1", "--nodes", NODES, "--dry-run", "--", "python", "x.py")
    assert kube.returncode == 2 and "--address is for the local backend" in kube.stderr
    local = run_cli("submit", "--backend", "local", "--dashboard-address", "127.0.0.1:1", "--dry-run", "--", "python", "x.py")
    assert local.returncode == 2 and "--dashboard-address is for the kubernetes backend" in local.stderr
    warned = run_cli("submit", "--backend", "local", "-n", "team-a", "--queue", "q", "--dry-run", "--", "python", "x.py")
    assert warned.returncode == 0, warned.stderr
    assert "warning: --namespace, --queue are ignored by the local backend" in warned.stderr


# (case, spec file text, the one error line's fragment): amounts a pod cannot be given are refused
BAD_AMOUNT_ROWS = [
    ("negative memory per GPU", "memoryPerGpu: -16Gi\n", "memoryPerGpu: must be above 0 (got '-16Gi')"),
    ("zero memory per GPU", "memoryPerGpu: '0'\n", "memoryPerGpu: must be above 0"),
    ("negative head cpu", "head: {cpu: '-2'}\n", "head.cpu: must be above 0"),
    ("negative head memory", "head: {memory: -8Gi}\n", "head.memory: must be above 0"),
    ("zero worker cpu", "worker: {cpu: 0}\n", "worker.cpu: must be above 0 (got 0)"),
    ("negative worker memory", "worker: {memory: -1Gi}\n", "worker.memory: must be above 0"),
    ("zero replicas in the file", "replicas: 0\n", "replicas: must be at least 1 (got 0)"),
]


@pytest.mark.parametrize("case,text,fragment", BAD_AMOUNT_ROWS, ids=[r[0] for r in BAD_AMOUNT_ROWS])
def test_amounts_a_pod_cannot_have_are_refused_never_rendered(tmp_path, case, text, fragment):
    spec = tmp_path / "job.yaml"
    spec.write_text("entrypoint: python x.py\ngpus: 8\n" + text)
    result = run_cli("render", str(spec), "--nodes", NODES)
    assert result.returncode == 2, result.stdout
    assert fragment in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def _pods_with(tmp_path, *extra_items):
    pods = json.loads((EXAMPLES / "cluster" / "pods.json").read_text())
    pods["items"] += [json.loads(json.dumps(item)) for item in extra_items]
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(pods))
    return str(path)


def test_a_pod_listed_twice_is_counted_once_with_a_warning(tmp_path):
    pods = json.loads((EXAMPLES / "cluster" / "pods.json").read_text())
    infer = next(p for p in pods["items"] if p["metadata"]["name"] == "infer-c")  # 7 GPUs on h100-0
    result = run_cli("discover", "--nodes", NODES, "--pods", _pods_with(tmp_path, infer), "-o", "json")
    assert result.returncode == 0, result.stderr
    free = {n["name"]: n["free"] for n in json.loads(result.stdout)["nodes"]}
    assert free["h100-0"] == 0  # 8 less 7 (infer-c, once) less 1 (infer-d)
    assert "warning: pod team-c/infer-c is listed more than once: counted once" in result.stderr


# (case, a pod of the wrong shape, the warning)
MALFORMED_POD_ROWS = [
    ("containers not a list", {"metadata": {"name": "odd", "namespace": "x"}, "spec": {"nodeName": "h100-0", "containers": {"name": "c"}}}, "warning: pod x/odd: spec.containers is not a list: its GPUs counted as 0"),
    ("nodeName not a string", {"metadata": {"name": "odd", "namespace": "x"}, "spec": {"nodeName": ["h100-0"], "containers": []}}, "warning: pod x/odd: spec.nodeName ['h100-0'] is not a node name: its GPUs are not counted"),
]


@pytest.mark.parametrize("case,pod,warning", MALFORMED_POD_ROWS, ids=[r[0] for r in MALFORMED_POD_ROWS])
def test_pods_of_the_wrong_shape_are_warned_about(tmp_path, case, pod, warning):
    result = run_cli("discover", "--nodes", NODES, "--pods", _pods_with(tmp_path, pod))
    assert result.returncode == 0, result.stderr
    assert warning in result.stderr and "Traceback" not in result.stderr


def test_a_node_without_a_ready_condition_says_why_it_is_not_schedulable(tmp_path):
    nodes = json.loads((EXAMPLES / "cluster" / "nodes.json").read_text())
    for node in nodes["items"]:
        if node["metadata"]["name"] in ("cpu-0", "mi300x-2"):
            node["status"]["conditions"] = []
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(nodes))
    result = run_cli("discover", "--nodes", str(path))
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line.strip()}
    for name in ("cpu-0", "mi300x-2"):
        assert rows[name].rstrip().endswith("no: not Ready (no Ready condition)"), rows[name]


def test_discover_refuses_two_inventory_sources():
    result = run_cli("discover", "--nodes", NODES, "--address", "127.0.0.1:1")
    assert result.returncode == 2
    assert "--nodes and --address name two inventory sources" in result.stderr and result.stdout == ""


# (case, extra flags, the warning; None: no warning)
DISCOVER_FLAG_ROWS = [
    ("namespace with a file", ["-n", "team-a"], "warning: --namespace is ignored: the inventory comes from the --nodes file"),
    ("request timeout with a file", ["--request-timeout", "5"], "warning: --request-timeout is ignored: the inventory comes from the --nodes file"),
    ("both", ["-n", "team-a", "--request-timeout", "5"], "warning: --namespace, --request-timeout are ignored"),
    ("nothing extra", [], None),
]


@pytest.mark.parametrize("case,extra,warning", DISCOVER_FLAG_ROWS, ids=[r[0] for r in DISCOVER_FLAG_ROWS])
def test_discover_says_which_cluster_flags_a_file_leaves_unused(case, extra, warning):
    result = run_cli("discover", "--nodes", NODES, *extra)
    assert result.returncode == 0, result.stderr
    if warning is None:
        assert "ignored" not in result.stderr
    else:
        assert warning in result.stderr


def test_a_local_dry_run_sizes_against_this_machine_and_says_nodes_is_ignored():
    result = run_cli("submit", "--backend", "local", "--nodes", NODES, "--dry-run", "-o", "json", "--", "python", "x.py")
    assert result.returncode == 0, result.stderr
    assert "warning: --nodes is ignored by the local backend" in result.stderr
    assert json.loads(result.stdout)["plan"]["clusterGpus"] != 24  # not the file's 24 AMD GPUs


@pytest.mark.realtime
def test_a_ray_address_that_never_answers_prints_only_raybridges_line():
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        result = run_cli("discover", "--address", address, "--request-timeout", "7", timeout=60)
    assert result.returncode == 3
    assert result.stderr == f"error: cannot connect to the Ray cluster at {address!r}: it accepts connections but does not answer within 7s\n"


# (case, argv with -o json, where the JSON keeps its warnings): every warning said on stderr is in the document
JSON_WARNING_ROWS = [
    ("plan on the unpinned AMD default image", ["plan", "--entrypoint", "python x.py", "--nodes", NODES, "--gpus", "16", "--gpu-vendor", "amd"],
     ("warnings",)),
    ("plan capped", ["plan", "--entrypoint", "python x.py", "--nodes", NODES, "--gpus", "40", "--gpu-vendor", "amd", "--image", "r/ray:1"],
     ("warnings",)),
    ("a dry run on the unpinned AMD default image",
     ["submit", "--dry-run", "--nodes", NODES, "--gpus", "16", "--gpu-vendor", "amd", "--entrypoint", "python x.py"], ("plan", "warnings")),
    ("discover with a flag a file leaves unused", ["discover", "--nodes", NODES, "-n", "team-a"], ("warnings",)),
    ("fair share without cpu or memory", ["queues", "fairshare", "--queues", "examples/queues/node-pool-a.yaml", "--capacity", "gpu=40"],
     ("warnings",)),
]  # fmt: skip


@pytest.mark.parametrize("case,argv,where", JSON_WARNING_ROWS, ids=[r[0] for r in JSON_WARNING_ROWS])
def test_json_output_lists_every_warning_said_on_stderr(case, argv, where):
    result = run_cli(*argv, "-o", "json")
    assert result.returncode == 0, result.stderr
    said = [line.removeprefix("warning: ") for line in result.stderr.splitlines() if line.startswith("warning: ")]
    document = json.loads(result.stdout)
    for key in where:
        document = document[key]
    assert said and set(said) <= set(document), (said, document)


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_dry_run_refuses_what_the_submit_refuses(dry_run: bool, tmp_path) -> None:
    """A plain job's spec: the submit refuses it (exit 2); its dry run previewed a whole plan with exit 0."""
    spec = tmp_path / "plain.yaml"
    spec.write_text("name: plain\nray: false\nkind: job\nimage: busybox\nentrypoint: echo hi\n")
    args = ["submit", str(spec), "--nodes", "examples/cluster/nodes.json", *(["--dry-run"] if dry_run else [])]
    out = run_cli(*args, env=cli_env(KUBECONFIG="/nonexistent"))
    assert out.returncode == 2, out.stderr
    assert "submit runs Ray jobs; for a plain job use `raybridge render ... | kubectl apply -f -`" in out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize("spec, flags", [
    ("train-gpu.yaml", ["--backend", "kubernetes", "--nodes", NODES]),
    ("hello.yaml", ["--nodes", NODES]),
])  # fmt: skip
def test_submit_dry_run_prints_what_the_python_api_s_dry_run_decides(spec: str, flags: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI only renders: `submit --dry-run` prints the document `raybridge.dry_run` returns for the same input."""
    import raybridge

    for name, value in cli_env().items():  # the CLI's environment here too: no kubeconfig, no RAY_ADDRESS
        monkeypatch.setenv(name, value)
    for name in ("KUBECONFIG", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)

    out = run_cli("submit", str(EXAMPLES / spec), "--dry-run", *flags, "-o", "json")
    assert out.returncode == 0, out.stderr
    backend = "kubernetes" if "--backend" in flags else None
    kwargs = {"backend": backend} if backend else {"backend": "kubernetes"}  # --nodes alone previews the cluster it describes
    preview = raybridge.dry_run(str(EXAMPLES / spec), nodes_file=NODES, **kwargs)
    printed = json.loads(out.stdout)
    expected = json.loads(json.dumps(preview.document, default=str))
    printed.pop("backendReason"), expected.pop("backendReason")  # "--nodes describes a cluster" vs the option's why
    assert printed == expected
