"""`explain NAME` where the session's cluster lacks the parts: on a real API server of this module's own.

The scene is tests/e2e/explain_sim_scene.py's (`scene_stack`, kueue=True): the real Kueue v0.17.0, KAI's CRDs
without its scheduler, nodes h100-0 and a100-0. Each test is here for a reason the session's cluster
(test_explain.py) cannot meet:

- The queue position: the session's cluster does not serve Kueue's visibility API (an aggregated API; raybridge
  treats it as optional, and test_explain.py checks that the position is then left out, not guessed). Here Kueue
  serves it (its VisibilityOnDemand gate, testcluster/kueue.py), and `train` waits third in its ClusterQueue,
  behind two RayJobs of higher priority from another LocalQueue.
- The ProvisioningRequest's answer: the session's cluster has no ProvisioningRequest CRD (so Kueue starts no
  provisioning controller and none is ever made). Here Kueue starts after the CRD, makes one for `booked` once it
  has reserved its quota, and the scene answers it as cluster-autoscaler would (Accepted), the one step played:
  the autoscaler cannot run here.
- KAI (its Queues, PodGroups and scheduler) is not part of the session's cluster: the KAI tests explain a pod and its
  PodGroup whose queue is over its fair share, written as KAI's scheduler would have left them (its scheduler does
  not run, so nothing rewrites them), and apply the generated KAI Queues against KAI's Queue CRD.

What it deliberately does not do: run KAI or the cluster autoscaler (test_adjuster_real.py runs KAI v0.12).
"""

from __future__ import annotations

import json
from typing import Iterator

import kubernetes.client
import pytest

from tests.helpers import EXAMPLES, cli_env, run_cli
from tests.e2e.explain_sim_scene import CHECK, NS, Scene, kai_pod, scene_stack

pytestmark = [pytest.mark.xdist_group("explain-sim"), pytest.mark.timeout(600)]  # one stack for the module's tests


@pytest.fixture(scope="module")
def explain_sim_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    """The scene on a stack of this module's own (Kueue with its visibility API, KAI's CRDs)."""
    with scene_stack(tmp_path_factory.mktemp("explain"), kueue=True) as scene:
        yield scene


@pytest.fixture(scope="module")
def cluster(explain_sim_cluster: Scene) -> Scene:
    return explain_sim_cluster


def explain(cluster: Scene, *args: str):
    return run_cli("explain", *args, "-n", NS, env=cli_env(KUBECONFIG=cluster.kubeconfig))


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
    request = f"{cluster.booked}-{CHECK}-1"
    assert f"admission check {CHECK}: Pending; ProvisioningRequest {request}: accepted (Accepted: queued for capacity)" in out.stdout, out.stdout
    assert "position:" not in out.stdout  # quota reserved: no longer in the queue
    data = json.loads(explain(cluster, "booked", "-o", "json").stdout)
    assert data["kueue"]["admissionChecks"] == [{"name": CHECK, "state": "Pending", "message": "", "provisioningRequest": request,
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
    kinds = [("scheduling.run.ai/v2", "Queue"), ("scheduling.run.ai/v2alpha2", "PodGroup"), ("v1", "Pod"), ("v1", "Node")]
    items = [obj for api_version, kind in kinds for obj in cluster.client.list_objects(api_version, kind)]
    saved = tmp_path / "kai.json"
    saved.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    offline = cli_env(KUBECONFIG=str(tmp_path / "none"))
    for name in ("notebook-0", "pg-notebook"):
        for output in ("table", "json"):
            from_files = run_cli("explain", name, "-f", str(saved), "-o", output, env=offline)
            assert from_files.returncode == 0, from_files.stderr
            assert from_files.stdout == explain(cluster, name, "-o", output).stdout


NODES = str(EXAMPLES / "cluster" / "nodes.json")


def test_generated_kai_queues_apply_and_explain_a_pod_in_them(cluster):
    """The generated Queues, created as `kubectl apply` sends them, are kept whole by KAI's Queue CRD (nothing pruned)
    and a pod in a project queue is explained through its department."""
    out = run_cli("queues", "generate", "--nodes", NODES, "--kai", "-o", "json")
    assert out.returncode == 0, out.stderr
    queues = json.loads(out.stdout)["items"]
    names = sorted(q["metadata"]["name"] for q in queues)
    project = next(q for q in queues if q["spec"].get("parentQueue"))
    api_client = cluster.client.api_client()
    try:
        custom = kubernetes.client.CustomObjectsApi(api_client)
        for queue in queues:
            custom.create_cluster_custom_object("scheduling.run.ai", "v2", "queues", queue)
        stored = {q["metadata"]["name"]: q["spec"] for q in cluster.client.list_objects("scheduling.run.ai/v2", "Queue")}
        assert len(names) >= 2 and {name: stored.get(name) for name in names} == {q["metadata"]["name"]: q["spec"] for q in queues}
        kai_pod(cluster.client, "job-0", project["metadata"]["name"], 2)
        explained = explain(cluster, "job-0", "-o", "json")
        assert explained.returncode == 0, explained.stderr
        chain = [q["name"] for q in json.loads(explained.stdout)["kai"]["queues"]]
        assert chain == [project["metadata"]["name"], project["spec"]["parentQueue"]]
    finally:  # the module's other tests read every Queue and pod
        if cluster.client.get_object("v1", "Pod", "job-0", NS) is not None:
            cluster.client.delete_object("v1", "Pod", "job-0", NS)
        for name in names:
            if cluster.client.get_object("scheduling.run.ai/v2", "Queue", name) is not None:
                cluster.client.delete_object("scheduling.run.ai/v2", "Queue", name)
        api_client.close()
