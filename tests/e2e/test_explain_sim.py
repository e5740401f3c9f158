"""`explain NAME` where the real cluster lacks the parts: on kubesim, the simulated API server.

The objects are written straight onto the server (`create_object`, status included) as
their controllers would have left them, so no simulated controller runs. Each test is here
for a reason the real cluster (test_explain.py) cannot meet:

- KAI (its Queues, PodGroups and scheduler) is not part of the real cluster: the KAI tests
  explain a pod and its PodGroup whose queue is over its fair share, and apply the generated
  KAI Queues against the Queue CRD.
- The ProvisioningRequest's answer: the real cluster has no cluster autoscaler and no
  ProvisioningRequest CRD (so Kueue starts no provisioning controller and none is ever made).
  Here one is, as Kueue makes it: for a Workload with quota reserved whose check is Pending.
- The queue position: the real cluster does not serve Kueue's visibility API (an aggregated
  API); here a handler answers for the LocalQueue as that API would, for a Workload still
  waiting for quota (the only ones it lists).

The objects are tests/e2e/explain_sim_scene.py's, written by tests/e2e/conftest.py's `explain_sim_cluster`
(test_svg_pictures.py draws them too).
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes.client
import pytest

from tests.helpers import EXAMPLES, cli_env, run_cli
from tests.e2e.explain_sim_scene import BOOKED, H100, NS, kai_pod
from tests.cluster_state import make_gpu_node
from kubesim.server import KubeApiServer


@pytest.fixture(scope="module")
def cluster(explain_sim_cluster: tuple[Any, str]) -> tuple[Any, str]:
    """This module's server and kubeconfig (tests/e2e/conftest.py `explain_sim_cluster`)."""
    return explain_sim_cluster


def explain(cluster, *args):
    return run_cli("explain", *args, "-n", NS, env=cli_env(KUBECONFIG=cluster[1]))


def test_a_workload_waiting_for_quota_has_its_position_from_the_visibility_api(cluster):
    out = explain(cluster, "train")
    assert out.returncode == 0, out.stderr
    assert "position: #1 in its LocalQueue, #3 in the ClusterQueue" in out.stdout, out.stdout
    data = json.loads(explain(cluster, "train", "-o", "json").stdout)
    assert data["kueue"]["position"] == {"positionInLocalQueue": 0, "positionInClusterQueue": 2, "priority": 0}
    # not yet a ProvisioningRequest: Kueue makes one once the quota is reserved
    assert data["kueue"]["admissionChecks"][0]["provisioningRequest"] is None and data["warnings"] == []


def test_a_reserved_workload_s_check_says_what_the_autoscaler_answered(cluster):
    out = explain(cluster, "booked")
    assert out.returncode == 0, out.stderr
    assert f"admission check dws-prov: Pending; ProvisioningRequest {BOOKED}-dws-prov-1: accepted (Accepted: queued for capacity)" in out.stdout, out.stdout
    assert "position:" not in out.stdout  # quota reserved: no longer in the queue
    data = json.loads(explain(cluster, "booked", "-o", "json").stdout)
    assert data["kueue"]["admissionChecks"] == [{"name": "dws-prov", "state": "Pending", "message": "", "provisioningRequest": f"{BOOKED}-dws-prov-1",
                                                 "provisioningState": "accepted", "provisioningMessage": "Accepted: queued for capacity"}]  # fmt: skip
    assert data["warnings"] == []


def test_kai_pod_and_its_pod_group_say_the_queue_is_over_its_fair_share(cluster):
    for name in ("notebook-0", "pg-notebook"):
        out = explain(cluster, name)
        assert out.returncode == 0, out.stderr
        # research divides its 12 GPUs: team-a gets its quota of 4, team-b its 8; team-a's bound pod holds 6
        assert "queue team-a is over its fair share of 4 GPUs: 6 allocated" in out.stdout, out.stdout
        assert "unschedulable on node pool default: OverLimit -- scheduling it would take its queue over the queue's limit" in out.stdout
        assert "queue research is within its fair share of 12 GPUs: 8 allocated, 4 to go" in out.stdout
        assert "millicores" not in out.stdout  # the Queues set no cpu terms: not worded
    assert "Pod ml/notebook-0: Pending; PodScheduled=False (Unschedulable: OverLimit" in explain(cluster, "notebook-0").stdout


def test_kai_json(cluster):
    out = explain(cluster, "notebook-0", "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["kind"], data["scheduler"], data["kai"]["podGroup"], data["kai"]["queue"]) == ("Pod", "kai", "pg-notebook", "team-a")
    team_a = data["kai"]["queues"][0]
    assert (team_a["name"], team_a["parent"], team_a["priority"], team_a["allocationSource"]) == ("team-a", "research", 100, "bound pods")
    assert team_a["resources"]["gpu"] == {"configured": True, "quota": 4, "limit": -1, "overQuotaWeight": 1, "request": 12, "deserved": 4, "fairShare": 4, "allocated": 6}
    assert data["kai"]["unschedulableReasons"][0]["reason"] == "OverLimit"


def test_kai_explain_from_saved_objects_says_what_explain_on_the_cluster_says(cluster, tmp_path):
    """The Queues, PodGroup, pods and nodes saved as a List (as `kubectl get -o json` writes it), read with -f."""
    server, _ = cluster
    kinds = [("scheduling.run.ai/v2", "Queue"), ("scheduling.run.ai/v2alpha2", "PodGroup"), ("v1", "Pod"), ("v1", "Node")]
    items = [obj for api_version, kind in kinds for obj in server.list_objects(api_version, kind)]
    saved = tmp_path / "kai.json"
    saved.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    offline = cli_env(KUBECONFIG=str(tmp_path / "none"))
    for name in ("notebook-0", "pg-notebook"):
        for output in ("table", "json"):
            from_files = run_cli("explain", name, "-f", str(saved), "-o", output, env=offline)
            assert from_files.returncode == 0, from_files.stderr
            assert from_files.stdout == explain(cluster, name, "-o", output).stdout


NODES = str(EXAMPLES / "cluster" / "nodes.json")


def test_generated_kai_queues_apply_and_explain_a_pod_in_them(tmp_path):
    out = run_cli("queues", "generate", "--nodes", NODES, "--kai", "-o", "json")
    assert out.returncode == 0, out.stderr
    queues = json.loads(out.stdout)["items"]
    server = KubeApiServer().start()
    try:
        api_client = server.api_client()
        custom = kubernetes.client.CustomObjectsApi(api_client)
        for queue in queues:  # as `kubectl apply` would send them, checked against the Queue CRD
            custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", queue)
        api_client.close()
        names = sorted(q["metadata"]["name"] for q in server.list_objects("scheduling.run.ai/v2", "Queue"))
        assert names == sorted(q["metadata"]["name"] for q in queues) and len(names) >= 2
        project = next(q for q in queues if q["spec"].get("parentQueue"))
        make_gpu_node(server, "h100-0", gpus=8, product=H100)
        server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        kai_pod(server, "job-0", project["metadata"]["name"], 2)
        kubeconfig = server.write_kubeconfig(tmp_path / "config")
        explained = run_cli("explain", "job-0", "-n", NS, "-o", "json", env=cli_env(KUBECONFIG=str(kubeconfig)))
        assert explained.returncode == 0, explained.stderr
        chain = [q["name"] for q in json.loads(explained.stdout)["kai"]["queues"]]
        assert chain == [project["metadata"]["name"], project["spec"]["parentQueue"]]
    finally:
        server.stop()
