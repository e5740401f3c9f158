"""queues fairshare and queues generate as a user runs them: CLI in, output and exit status out."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from tests.helpers import EXAMPLES, cli_env, run_cli
from testcluster.crd_schemas import is_crd_kind, schema_errors

NODES = str(EXAMPLES / "cluster" / "nodes.json")
POOL_A = str(EXAMPLES / "queues" / "node-pool-a.yaml")
CAPACITY = "gpu=40,cpu=64000m,memory=512000M"


@pytest.mark.parametrize("argv", [["queues", "--help"], ["queues", "fairshare", "--help"], ["queues", "generate", "--help"]])
def test_queue_help_imports_neither_ray_nor_kubernetes(argv):
    code = (
        f"import sys, runpy; sys.argv=['raybridge', *{argv!r}]\ntry:\n runpy.run_module('raybridge', run_name='__main__')\n"
        "except SystemExit: pass\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('ray','kubernetes')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=60)
    assert out.stdout.strip().endswith("[]"), out.stdout
    assert "usage: raybridge queues" in out.stdout


# --- fairshare ------------------------------------------------------------------------------------
def test_fairshare_json_reproduces_the_seed_003_example():
    out = run_cli("queues", "fairshare", "--queues", POOL_A, "--capacity", CAPACITY, "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    project_2 = data["queues"]["project-2"]["gpu"]
    assert (project_2["quota"], project_2["overQuota"], project_2["fairShare"]) == (6, 10, 16)
    assert {name: q["gpu"]["fairShare"] for name, q in data["queues"].items()} == {
        "department-a": 40, "project-1": 21, "project-2": 16, "project-3": 3,
    }  # fmt: skip
    assert data["hierarchy"]["project-2"]["parent"] == "department-a"
    assert data["notes"] == [] and data["source"] == "file"


def test_fairshare_yaml_and_table():
    as_yaml = run_cli("queues", "fairshare", "--queues", POOL_A, "--capacity", CAPACITY, "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout)["queues"]["project-3"]["gpu"]["fairShare"] == 3
    table = run_cli("queues", "fairshare", "--queues", POOL_A, "--capacity", CAPACITY)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()  # piped: kubectl-style plain columns
    assert re.split(r"\s{2,}", lines[0].strip())[-3:] == ["DESERVED", "OVER QUOTA", "FAIR SHARE"]
    row = next(line for line in lines if "project-2" in line)
    assert re.split(r"\s{2,}", row.strip()) == ["project-2", "100", "gpu", "6", "-1", "3", "unbounded", "6", "10", "16"]


def test_fairshare_with_demand_notes_a_share_above_the_request(tmp_path):
    queues = tmp_path / "queues.yaml"
    queues.write_text(
        "".join(
            f"---\napiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {{name: {n}}}\n"
            "spec: {resources: {gpu: {quota: 0, limit: -1, overQuotaWeight: 1}}}\n"
            for n in ("q1", "q2")
        )
    )
    demand = tmp_path / "demand.json"
    demand.write_text(json.dumps({"q1": {"gpu": 2.5}, "q2": {"gpu": "10"}}))
    out = run_cli("queues", "fairshare", "--queues", str(queues), "--capacity", "gpu=4.6", "--demand", str(demand), "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["queues"]["q1"]["gpu"]["request"] == 2.5
    assert data["queues"]["q1"]["gpu"]["fairShare"] == 2 + (4.6 - 2 - 2)
    assert [(n["queue"], n["kind"]) for n in data["notes"]] == [("q1", "above-request")]
    table = run_cli("queues", "fairshare", "--queues", str(queues), "--capacity", "gpu=4.6", "--demand", str(demand))
    assert "note: q1 gpu: fair share 2.6 GPUs is above the request of 2.5" in table.stdout


def _queue_doc(name, parent=None, extra=""):
    parent_line = f"  parentQueue: {parent}\n" if parent else ""
    return (
        f"---\napiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: {name}\nspec:\n{parent_line}"
        f"  resources:\n    gpu: {{quota: 1, limit: -1, overQuotaWeight: 1}}\n{extra}"
    )


# (case, queues file text or None for a missing file, extra args, expected error fragment)
BAD_FAIRSHARE = [
    ("missing file", None, ["--capacity", "gpu=4"], "--queues file"),
    ("bad capacity quantity", _queue_doc("a"), ["--capacity", "gpu=4,memory=lots"], "--capacity: memory=lots: not a Kubernetes quantity"),
    ("unknown capacity resource", _queue_doc("a"), ["--capacity", "gpus=4"], "unknown resource 'gpus'"),
    ("no capacity", _queue_doc("a"), [], "--capacity is required with --queues"),
    ("parent does not exist", _queue_doc("a", "nowhere"), ["--capacity", "gpu=4"], "queue a: parentQueue nowhere does not exist"),
    ("cycle", _queue_doc("a", "b") + _queue_doc("b", "a"), ["--capacity", "gpu=4"], "queues a -> b -> a form a parent cycle"),
    ("not queues", open(NODES).read(), ["--capacity", "gpu=4"], "are Nodes, not scheduling.run.ai/v2 Queues"),
    ("not YAML", "a: [b\n", ["--capacity", "gpu=4"], "is not valid YAML"),
    ("bad field", _queue_doc("a", extra="  priority: high\n"), ["--capacity", "gpu=4"], "queue a: spec.priority must be an integer"),
    ("queues and cluster", _queue_doc("a"), ["--from-cluster", "--capacity", "gpu=4"], "not allowed with argument"),
]


@pytest.mark.parametrize("case,text,args,fragment", BAD_FAIRSHARE, ids=[r[0] for r in BAD_FAIRSHARE])
def test_fairshare_bad_input_exits_2_with_a_message(tmp_path, case, text, args, fragment):
    path = tmp_path / "queues.yaml"
    if text is not None:
        path.write_text(text)
    out = run_cli("queues", "fairshare", "--queues", str(path), *args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert fragment in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


@pytest.mark.parametrize(
    "demand,fragment",
    [
        ('{"nobody": {"gpu": 1}}', "queue nobody is not among the queues"),
        ('{"project-2": {"gpu": "many"}}', "project-2.gpu: not a Kubernetes quantity"),
        ("[1, 2]", "expected an object mapping queue names"),
    ],
)
def test_fairshare_bad_demand_exits_2(tmp_path, demand, fragment):
    path = tmp_path / "demand.json"
    path.write_text(demand)
    out = run_cli("queues", "fairshare", "--queues", POOL_A, "--capacity", CAPACITY, "--demand", str(path))
    assert out.returncode == 2 and fragment in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_fairshare_from_cluster_without_a_cluster_exits_3():
    out = run_cli("queues", "fairshare", "--from-cluster")
    assert out.returncode == 3 and "no kubeconfig found" in out.stderr and "Traceback" not in out.stderr, out.stderr


# --- generate -------------------------------------------------------------------------------------
def test_generate_kueue_yaml_applies_cleanly_to_the_schemas():
    out = run_cli("queues", "generate", "--nodes", NODES, "--queues", "3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# Generated by `python -m raybridge queues generate --nodes ")
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    kinds = [d["kind"] for d in docs]
    assert kinds.count("ClusterQueue") == 3 and kinds.count("LocalQueue") == 3 and kinds.count("ResourceFlavor") == 3
    assert all(schema_errors(d) == [] for d in docs if is_crd_kind(d["apiVersion"], d["kind"]))


def test_generate_json_is_a_list_and_notes_go_to_stderr():
    out = run_cli("queues", "generate", "--nodes", NODES, "--kueue-api", "v1beta1", "--names", "ml,web", "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kind"] == "List"
    cqs = [o for o in data["items"] if o["kind"] == "ClusterQueue"]
    assert [c["metadata"]["name"] for c in cqs] == ["ml", "web"] and cqs[0]["spec"]["cohort"] == "gpu"
    assert "note: node h100-1 (8 nvidia.com/gpu) left out: cordoned" in out.stderr


def test_generate_kai():
    out = run_cli("queues", "generate", "--nodes", NODES, "--kai", "--departments", "2", "--queues", "3")
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert [d["metadata"]["name"] for d in docs if "parentQueue" not in d["spec"]] == ["department-1", "department-2"]
    assert len(docs) == 2 + 6 and all(schema_errors(d) == [] for d in docs)


BAD_GENERATE = [
    ("missing nodes file", ["--nodes", "/nonexistent/nodes.json"], "does not exist"),
    ("not nodes", ["--nodes", str(EXAMPLES / "hello.yaml")], "expected a Node list"),
    ("zero queues", ["--nodes", NODES, "--queues", "0"], "must be between 1 and 100"),
    ("bad names", ["--nodes", NODES, "--names", "Team_A"], "is not a DNS label"),
    ("bad percent", ["--nodes", NODES, "--borrowing-limit", "150"], "must be between 0 and 100"),
    ("no source", [], "one of the arguments --nodes --from-cluster is required"),
]


@pytest.mark.parametrize("case,args,fragment", BAD_GENERATE, ids=[r[0] for r in BAD_GENERATE])
def test_generate_bad_input_exits_2(case, args, fragment):
    out = run_cli("queues", "generate", *args)
    assert out.returncode == 2 and fragment in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_generate_without_gpu_nodes_exits_2(tmp_path):
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "c"}, "status": {"allocatable": {"cpu": "8"}}}]}))
    out = run_cli("queues", "generate", "--nodes", str(nodes))
    assert out.returncode == 2 and "no schedulable GPU nodes" in out.stderr, out.stderr
