"""`adjuster plan` as a user runs it: files and flags in, the plan and the exit status out.

All offline but one test, which applies `--manifests`' objects to a real API server as server-side dry runs: the
adjuster's end-to-end stack (`ca_stack`, tests/e2e/ca_on_real_api.py: no operators, cluster-autoscaler's
ProvisioningRequest CRD, the adjuster's namespace and PriorityClass), on the worker of its xdist_group. What it does
not do: run the adjuster's controller (tests/e2e/test_adjuster_*.py do).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.ca_on_real_api import XDIST_GROUP as CA_STACK_GROUP
from tests.helpers import ROOT, cli_env, run_cli

FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "adjuster"
PODS = str(FIXTURES / "pods.yaml")
NODES = str(FIXTURES / "nodes.yaml")
NOW = ["--now", "2025-06-01T12:00:00Z"]


def plan_json(*args: str) -> dict:
    out = run_cli("adjuster", "plan", "--pods", PODS, *NOW, "-o", "json", *args)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return json.loads(out.stdout)


def test_plan_packs_the_fixture_cluster():
    data = plan_json("--nodes", NODES)
    assert data["policy"] == "exact"
    # 3x0.6, 0.33+0.56+0.11, a 40 GB pod on 80 GB GPUs and 0.5 on 4 devices: 8 H100s, one node's worth
    [placeholder] = data["placeholders"]
    assert placeholder["resourceKey"] == "nvidia.com/gpu" and placeholder["gpus"] == 8
    assert data["totalGpus"] == 8
    reasons = {i["pod"]: i["code"] for i in data["ignored"]}
    assert reasons == {
        "team-a/amd-by-taint": "vendor-not-shared",  # KAI shares NVIDIA GPUs alone: no MI300X node would run it
        "team-a/quota": "quota-blocked",
        "team-a/nan": "bad-annotation",
        "team-a/too-wide": "too-many-devices",
    }
    assert any("team-a/just-now" in p["pods"] for p in data["placeholders"])  # no grace period by default, as KAI
    assert data["skipped"] == {"bound": 1}


def test_plan_kai_policy_on_the_same_pods():
    data = plan_json("--nodes", NODES, "--policy", "kai")
    assert data["policy"] == "kai"
    assert [p["name"] for p in data["placeholders"]] == ["team-a-amd-by-taint", "team-a-multi", "team-a-too-wide"]
    assert all(p["resourceKey"] == "nvidia.com/gpu" for p in data["placeholders"])
    assert data["kai"]["need"] < 0  # the NaN pod: int64(NaN) on amd64


def test_plan_yaml_and_table():
    out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, *NOW, "-o", "yaml")
    assert out.returncode == 0, out.stderr
    assert yaml.safe_load(out.stdout)["totalGpus"] == 8
    table = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, *NOW, "-o", "table")
    assert table.returncode == 0, table.stderr
    assert "Placeholders (exact): 8 GPUs in 1 placeholder" in table.stdout
    assert "quota-blocked" in table.stdout and "vendor-not-shared" in table.stdout and "a node with amd.com/gpu would not" in table.stdout


def test_plan_table_says_what_the_cap_trimmed():
    out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, *NOW, "--max-gpus", "4", "-o", "table")
    assert out.returncode == 0, out.stderr
    assert "capped at 4 GPUs: 8 asked for, 4 cut" in out.stdout
    assert "trimmed from 8 to 4 GPUs" in out.stdout


# (case, extra flags, totalGpus)
FLAG_ROWS = [
    ("no nodes: memory falls back, no device check", [], None),
    ("a grace period of 10 s leaves out the pod marked just now (the others fill the node all the same)", ["--nodes", NODES, "--grace-period", "10"], 8),
    ("cap: the placeholder that does not fit whole is trimmed to the GPUs left", ["--nodes", NODES, "--max-gpus", "4"], 4),
    ("other scheduler name: nothing counts", ["--nodes", NODES, "--scheduler-name", "volcano"], 0),
]


@pytest.mark.parametrize("case,flags,total", FLAG_ROWS, ids=[r[0] for r in FLAG_ROWS])
def test_plan_flags(case, flags, total):
    data = plan_json(*flags)
    if total is not None:
        assert data["totalGpus"] == total
    if "--max-gpus" in flags:
        assert data["capped"]["limit"] == 4 and data["capped"]["cutGpus"] > 0
    if not flags:
        assert any("unknown" in n for n in data["notes"])
    if "--grace-period" in flags:
        assert {i["pod"]: i["code"] for i in data["ignored"]}["team-a/just-now"] == "grace-period"
        assert not any("team-a/just-now" in p["pods"] for p in data["placeholders"])


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# (case, argv builder, message fragment)
BAD_INPUT_ROWS = [
    ("missing pods file", lambda t: ["--pods", "/nonexistent/pods.json"], "does not exist"),
    ("pods file is a directory", lambda t: ["--pods", str(t)], "is a directory"),
    ("not JSON or YAML", lambda t: ["--pods", write(t, "p.json", "{not: [json")], "neither JSON nor YAML"),
    ("a scalar", lambda t: ["--pods", write(t, "p.json", "42")], "expected a Pod list"),
    ("nodes given as pods", lambda t: ["--pods", NODES], "expected Pod or ResourceClaim objects, found Node"),
    ("pods given as nodes", lambda t: ["--pods", PODS, "--nodes", PODS], "expected Node, ResourceSlice or DeviceClass objects, found Pod"),
    ("items without metadata", lambda t: ["--pods", write(t, "p.json", '{"items": [1, 2]}')], "not Pod objects"),
    ("negative grace period", lambda t: ["--pods", PODS, "--grace-period", "-1"], "--grace-period"),
    ("NaN grace period", lambda t: ["--pods", PODS, "--grace-period", "nan"], "--grace-period"),
    ("infinite grace period", lambda t: ["--pods", PODS, "--grace-period", "inf"], "--grace-period"),
    ("negative cap", lambda t: ["--pods", PODS, "--max-gpus", "-3"], "--max-gpus"),
    ("fractional cap", lambda t: ["--pods", PODS, "--max-gpus", "2.5"], "--max-gpus"),
    ("memory fraction above 1", lambda t: ["--pods", PODS, "--memory-fraction", "1.5"], "--memory-fraction"),
    ("memory fraction NaN", lambda t: ["--pods", PODS, "--memory-fraction", "NaN"], "--memory-fraction"),
    ("node GPUs zero", lambda t: ["--pods", PODS, "--node-gpus", "0"], "--node-gpus"),
    ("unknown policy", lambda t: ["--pods", PODS, "--policy", "greedy"], "--policy"),
    ("unknown vendor", lambda t: ["--pods", PODS, "--default-vendor", "intel"], "--default-vendor"),
    ("bad --now", lambda t: ["--pods", PODS, "--now", "yesterday"], "--now"),
    ("no --pods", lambda t: [], "--pods"),
    ("empty scheduler name", lambda t: ["--pods", PODS, "--scheduler-name", ""], "scheduler name"),
    ("a provisioning class that never adds a node",
     lambda t: ["--pods", PODS, "--manifests", "--mode", "provisioning-request", "--provisioning-class", "check-capacity.autoscaling.x-k8s.io"],
     "only checks for capacity that exists and never adds a node"),
]


@pytest.mark.parametrize("case,argv,fragment", BAD_INPUT_ROWS, ids=[r[0] for r in BAD_INPUT_ROWS])
def test_bad_input_exits_2_with_a_message(tmp_path, case, argv, fragment):
    out = run_cli("adjuster", "plan", *argv(tmp_path))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert fragment in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_garbage_pods_are_ignored_not_fatal(tmp_path):
    pods = {"items": [
        {"metadata": {"name": "a", "namespace": "x", "annotations": {"gpu-fraction": "inf"}}, "spec": {"schedulerName": "kai-scheduler"}, "status": {"conditions": "no"}},
        {"metadata": {"name": "b", "annotations": {"gpu-fraction": [1]}}, "spec": None, "status": None},
        {"metadata": {"name": "c", "annotations": "all of them"}},
    ]}  # fmt: skip
    out = run_cli("adjuster", "plan", "--pods", write(tmp_path, "p.json", json.dumps(pods)), "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["totalGpus"] == 0 and {i["pod"] for i in data["ignored"]} == {"x/a", "default/b"}


def test_adjuster_group_without_a_command_prints_its_help():
    out = run_cli("adjuster")
    assert out.returncode == 2 and "plan" in out.stdout


def test_adjuster_plan_imports_neither_ray_nor_kubernetes():
    code = (
        "import sys, runpy, io, contextlib\n"
        f"sys.argv = ['raybridge', 'adjuster', 'plan', '--pods', {PODS!r}, '--nodes', {NODES!r}, '-o', 'json']\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        runpy.run_module('raybridge', run_name='__main__')\n"
        "    except SystemExit as exc:\n"
        "        code = exc.code\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'kubernetes', 'pydantic')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=60, cwd=str(ROOT))
    assert out.stdout.strip() == "0 []", out.stdout + out.stderr


@pytest.mark.slow  # a real API server: the adjuster's end-to-end stack (`ca_stack`, tests/e2e/ca_on_real_api.py)
@pytest.mark.xdist_group(CA_STACK_GROUP)  # on the worker that holds that stack: the server dry-runs, nothing is left
@pytest.mark.parametrize("mode", ["placeholder", "provisioning-request"])
def test_plan_manifests_are_what_run_creates_and_a_server_accepts_them(mode, ca_stack):
    """`--manifests`: the objects of `adjuster run`'s first pass, applied as they are to a real API server, as
    `kubectl apply --dry-run=server` sends them (strict field validation: an unknown field is refused, not dropped)."""
    from testcluster.client import dynamic_client
    from kubernetes.dynamic.exceptions import BadRequestError

    from raybridge.adjuster.decision import consts

    out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, *NOW, "--manifests", "--mode", mode, "-o", "yaml")
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    plan = plan_json("--nodes", NODES)
    if mode == "placeholder":
        assert {d["kind"] for d in docs} == {"Pod"}
        asked = sum(int(d["metadata"]["labels"][consts.GPUS_LABEL]) for d in docs)
        assert sorted(p for d in docs for p in json.loads(d["metadata"]["annotations"][consts.PODS_ANNOTATION])) == sorted(
            p for ph in plan["placeholders"] for p in ph["pods"])
    else:
        assert sorted({d["kind"] for d in docs}) == ["PodTemplate", "ProvisioningRequest"]
        asked = sum(int(d["metadata"]["labels"][consts.GPUS_LABEL]) for d in docs if d["kind"] == "ProvisioningRequest")
    assert asked == plan["totalGpus"]
    api = ca_stack.api_client()
    try:
        server = dynamic_client(api, ca_stack.workdir / "discovery-cache-cli-adjuster.json")
        strictly = [("dryRun", "All"), ("fieldValidation", "Strict")]
        for doc in docs:
            resource = server.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            resource.create(body=doc, namespace=doc["metadata"]["namespace"], query_params=list(strictly))
        # the server does refuse what its schema lacks, so the creates above were checked
        with pytest.raises(BadRequestError, match="unknown field"):
            resource.create(body={**doc, "spec": {**doc["spec"], "noSuchField": 1}}, namespace=doc["metadata"]["namespace"], query_params=list(strictly))
    finally:
        api.close()
    json_out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, *NOW, "--manifests", "--mode", mode, "-o", "json")
    assert json.loads(json_out.stdout)["items"] == docs


def test_plan_manifests_refuses_a_table_and_a_bad_namespace():
    for args, expected in ((["-o", "table"], "-o yaml or -o json"), (["--namespace", "Bad_NS"], "--namespace")):
        out = run_cli("adjuster", "plan", "--pods", PODS, *NOW, "--manifests", *args)
        assert out.returncode == 2 and expected in out.stderr and "Traceback" not in out.stderr


def test_a_tenant_pod_asking_for_300000_devices_does_not_stall_the_plan_of_the_others(tmp_path):
    """One tenant's pod in a pool scaled from zero (its nodeSelector matches no node) asks for 0.5 GPU on 300,000
    devices; the exact packer's work grows faster than the devices, so it once ran for minutes while every other
    tenant waited. It is refused before any work (no GPU node holds more than 64 GPUs), and the other tenant's pod
    gets its placeholder within the call's bound."""
    from tests.unit.adjuster_objects import pod

    pods = {"apiVersion": "v1", "kind": "List", "items": [
        pod("hostile", "0.5", namespace="tenant-x", devices="300000", nodeSelector={"pool": "from-zero"}),
        pod("ordinary", "0.5", namespace="tenant-y"),
    ]}  # fmt: skip
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(pods))
    out = run_cli("adjuster", "plan", "--pods", str(path), *NOW, "-o", "json", timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [(i["pod"], i["code"]) for i in data["ignored"]] == [("tenant-x/hostile", "too-many-devices")]
    assert "no GPU node holds more than 64" in data["ignored"][0]["reason"]
    assert [p["pods"] for p in data["placeholders"]] == [["tenant-y/ordinary"]]


def test_gpu_memory_pods_are_fitted_as_kai_fits_them(tmp_path):
    """KAI floors a GPU's memory to 100 MiB (A100-80GB's label 81920 is 81900) and fits gpu-memory pods whose MiB sum
    to at most that: 16 pods of 40960 MiB take a GPU each. Read as halves, they once got 8 GPUs, and after 8 landed
    the other 8 waited on free halves that do not exist."""
    from tests.unit.adjuster_objects import node, pod

    pods = {"apiVersion": "v1", "kind": "List", "items": [pod(f"half-{i}", memory="40960") for i in range(16)]}
    nodes = {"apiVersion": "v1", "kind": "List", "items": [node("a100-0", 8, memory="81920")]}
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    (tmp_path / "nodes.json").write_text(json.dumps(nodes))
    out = run_cli("adjuster", "plan", "--pods", str(tmp_path / "pods.json"), "--nodes", str(tmp_path / "nodes.json"), *NOW, "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["totalGpus"] == 16 and data["ignored"] == [], data
    assert [g["gpuMemoryMiB"] for g in data["groups"]] == [81900]


def test_plan_manifests_says_on_stderr_why_pods_get_no_placeholder(tmp_path):
    """With --manifests stdout holds only the objects; the pods left out (another vendor's GPUs, a queue out of quota, a
    bad annotation, too many devices) and the pods the cap cuts are said on stderr as warnings, one line each, as
    kubectl says the server's warnings: each of the first 20 by name, the rest counted by reason."""
    out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, *NOW, "--manifests", "--max-gpus", "4")
    assert out.returncode == 0, out.stderr
    assert all(d["kind"] == "Pod" for d in yaml.safe_load_all(out.stdout) if d)
    lines = out.stderr.splitlines()
    for pod, code in (("team-a/amd-by-taint", "vendor-not-shared"), ("team-a/quota", "quota-blocked"), ("team-a/nan", "bad-annotation"),
                      ("team-a/too-wide", "too-many-devices")):
        assert any(line.startswith(f"warning: pod {pod} gets no placeholder ({code}): ") for line in lines), out.stderr
    assert any(line.startswith("warning: --max-gpus 4: 4 of the 8 GPUs asked for are cut, so ") for line in lines), out.stderr

    amd = [{"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"amd-{i}", "namespace": "team-b", "annotations": {"gpu-fraction": "0.5", "raybridge.io/gpu-vendor": "amd"}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "x"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                           "lastTransitionTime": "2025-06-01T11:50:00Z"}]}} for i in range(30)]
    pods = write(tmp_path, "pods.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": amd}))
    out = run_cli("adjuster", "plan", "--pods", pods, *NOW, "--manifests", "-o", "json")
    assert out.returncode == 0 and json.loads(out.stdout)["items"] == [], out.stderr
    warned = [line for line in out.stderr.splitlines() if line.startswith("warning: ")]
    assert len([line for line in warned if line.startswith("warning: pod team-b/amd-")]) == 20
    assert "warning: 10 more pods get no placeholder (vendor-not-shared); `adjuster plan -o json` (without --manifests) gives each one's reason" in warned


@pytest.mark.parametrize("manifests", [False, True], ids=["plan", "manifests"])
def test_the_cli_prints_what_the_python_api_s_adjuster_plan_decides(manifests: bool) -> None:
    """The CLI only renders: `adjuster plan` (and `--manifests`) print what `raybridge.adjuster_plan` (and
    `raybridge.adjuster_manifests`) return for the same files and clock."""
    from datetime import datetime, timezone

    import raybridge

    now = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
    if manifests:
        out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, *NOW, "--manifests", "-o", "json")
        assert out.returncode == 0, out.stderr
        printed = json.loads(out.stdout)
        expected = list(raybridge.adjuster_manifests(PODS, NODES, now=now).objects)
        assert (printed["items"] if isinstance(printed, dict) and "items" in printed else printed) == json.loads(json.dumps(expected))
        assert expected, "the fixture asks for placeholders"
    else:
        out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, *NOW, "-o", "json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == json.loads(json.dumps(raybridge.adjuster_plan(PODS, NODES, now=now).to_dict(), default=str))
