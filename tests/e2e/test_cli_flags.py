"""The same flags and output values on every command, as a user types them: CLI in, output and exit status out."""

from __future__ import annotations

import json

import pytest

from tests.helpers import EXAMPLES, run_cli

NODES = str(EXAMPLES / "cluster" / "nodes.json")
PODS = str(EXAMPLES / "cluster" / "pods.json")
QUEUES = str(EXAMPLES / "queues" / "node-pool-a.yaml")


def test_plan_prints_a_table_unless_asked_for_json() -> None:
    table = run_cli("plan", "--gpus", "16", "--gpu-vendor", "amd", "--nodes", NODES, "--", "python", "x.py")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == ["FIELD", "VALUE"]
    assert json.loads(run_cli("plan", "--gpus", "16", "--gpu-vendor", "amd", "--nodes", NODES, "-o", "json", "--", "python", "x.py").stdout)["totalGpus"] == 16


def test_adjuster_plan_prints_a_table_unless_asked_for_json() -> None:
    out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Placeholders (exact): ")


def test_adjuster_plan_manifests_are_yaml_unless_asked_for_json() -> None:
    out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, "--manifests")
    assert out.returncode == 0, out.stderr
    assert not out.stdout.startswith("{")


@pytest.mark.parametrize("command", [["queues", "fairshare", "--queues", QUEUES, "--capacity", "gpu=40"], ["queues", "generate", "--nodes", NODES]])
def test_queues_commands_take_the_cluster_flags_and_say_a_file_leaves_them_unused(command: list[str]) -> None:
    out = run_cli(*command, "-n", "team-a", "--context", "c", "--request-timeout", "5")
    assert out.returncode == 0, out.stderr
    assert "warning: --context, --request-timeout are ignored: the input is a file (--from-cluster reads the cluster)" in out.stderr


def test_explain_text_is_the_table_and_says_the_new_name(tmp_path) -> None:
    out = run_cli("explain", "job", "-o", "text", "--kubeconfig", str(tmp_path / "none"))
    assert out.returncode == 2  # the kubeconfig, not the -o value
    assert out.stderr.startswith("warning: -o text is deprecated; use -o table\n")


def test_adjuster_run_takes_n_for_its_namespace() -> None:
    out = run_cli("adjuster", "run", "-n", "Not_A_Namespace", timeout=60)
    assert out.returncode == 2
    assert "--namespace 'Not_A_Namespace'" in out.stderr and "Traceback" not in out.stderr
