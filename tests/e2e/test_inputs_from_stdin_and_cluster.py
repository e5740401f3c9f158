"""`-` (standard input) for file flags, and `adjuster plan --from-cluster`: what a user pipes from kubectl, or asks
of the current context, gives what the file gives.

Why this module exists: `kubectl get pods -A -o json | raybridge adjuster plan --pods -` and `explain NAME -f -`
failed ("file '-' does not exist"), and `adjuster plan` could not read the cluster at all, where `queues` and
`discover` can (issue 40, point 9). The cluster tests run on the session's real cluster (testcluster), piping the
real kubectl's output.

What it deliberately does not do: the plan's arithmetic (test_cli_adjuster.py), or a terminal on standard input
(refused with a message; a pty is not worth the test).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

from tests.helpers import EXAMPLES, ROOT, cli_env


def piped(*args: str, stdin: bytes, env: "dict[str, str] | None" = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raybridge", *args], input=stdin.decode(), capture_output=True, text=True, timeout=120,
        env=env or cli_env(), cwd=str(ROOT),
    )  # fmt: skip


def test_adjuster_plan_reads_pods_from_standard_input_as_from_the_file() -> None:
    from tests.helpers import run_cli

    from_file = run_cli("adjuster", "plan", "--pods", str(EXAMPLES / "cluster" / "pods.json"), "--nodes", str(EXAMPLES / "cluster" / "nodes.json"))
    from_stdin = piped("adjuster", "plan", "--pods", "-", "--nodes", str(EXAMPLES / "cluster" / "nodes.json"),
                       stdin=(EXAMPLES / "cluster" / "pods.json").read_bytes())  # fmt: skip
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout and from_stdin.stdout


def test_explain_reads_objects_from_standard_input() -> None:
    out = piped("explain", "train-gpu", "-f", "-", "-f", str(EXAMPLES / "cluster" / "nodes.json"), stdin=(EXAMPLES / "cluster" / "queued.yaml").read_bytes())
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("RayJob team-a/train-gpu\n"), out.stdout


def test_standard_input_serves_one_flag_and_is_refused_for_a_second() -> None:
    out = piped("adjuster", "plan", "--pods", "-", "--nodes", "-", stdin=(EXAMPLES / "cluster" / "pods.json").read_bytes())
    assert out.returncode == 2, out.stderr
    assert "error: --nodes: standard input (-) was read already by another flag; only one file can come from it" in out.stderr


def test_adjuster_plan_from_the_cluster_plans_what_kubectl_shows(real_admin: Any) -> None:
    """Two pending KAI pods asking for half a GPU each, marked unschedulable as KAI's scheduler marks them: the plan
    read from the cluster and the plan of `kubectl get pods -A -o json` piped in both put them in one placeholder."""
    admin, kubeconfig = real_admin
    namespace = f"kai-{uuid.uuid4().hex[:6]}"
    admin.create_namespace(namespace)  # the pods at once: Kueue's pod webhook must have seen it
    for name in ("half-1", "half-2"):
        admin.create_object({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kai.scheduler/queue": "team-a"}, "annotations": {"gpu-fraction": "0.5"}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "x"}]},
        })  # fmt: skip
        pod = admin.get_object("v1", "Pod", name, namespace)
        pod["status"] = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
        admin.update_status(pod)
    env = cli_env(KUBECONFIG=kubeconfig)
    try:
        mine = {f"{namespace}/half-1", f"{namespace}/half-2"}

        def planned(out: subprocess.CompletedProcess[str]) -> set[str]:
            assert out.returncode == 0, out.stderr
            return {pod for placeholder in json.loads(out.stdout)["placeholders"] for pod in placeholder["pods"]} & mine

        from_cluster = subprocess.run([sys.executable, "-m", "raybridge", "adjuster", "plan", "--from-cluster", "-o", "json"],
                                      capture_output=True, text=True, timeout=120, env=env, cwd=str(ROOT))  # fmt: skip
        assert planned(from_cluster) == mine, from_cluster.stdout
        kubectl = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "get", "pods", "-A", "-o", "json"], capture_output=True, timeout=60)
        assert kubectl.returncode == 0, kubectl.stderr
        assert planned(piped("adjuster", "plan", "--pods", "-", "-o", "json", stdin=kubectl.stdout, env=env)) == mine
        mixed = subprocess.run([sys.executable, "-m", "raybridge", "adjuster", "plan", "--from-cluster", "--nodes", "x.json"],
                               capture_output=True, text=True, timeout=60, env=env, cwd=str(ROOT))  # fmt: skip
        assert mixed.returncode == 2 and "--from-cluster reads the nodes and PodGroups too: leave out --nodes" in mixed.stderr
    finally:
        admin.delete_object("v1", "Namespace", namespace)

