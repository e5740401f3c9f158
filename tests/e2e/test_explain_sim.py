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

Kueue's visibility server listens on 127.0.0.1 alone, where any local user can connect: one test checks that, and
that another user (nobody, uid 65534) gets no queue position from it, with or without the headers the API server's
aggregator sends, while the admin's certificate gets one.

What it deliberately does not do: run KAI or the cluster autoscaler (test_adjuster_real.py runs KAI v0.12).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
from pathlib import Path
from typing import Iterator, Optional

import kubernetes.client
import pytest
import yaml

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


# --- Kueue's visibility server, as another local user sees it -------------------------------------------------------
NOBODY = 65534
PENDING = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/team-a/pendingworkloads"


def _get(port: int, headers: dict[str, str], *, uid: Optional[int] = None, cert: Optional[tuple[str, str]] = None) -> tuple[int, str]:
    """(status, body) of a GET of PENDING from the visibility server on 127.0.0.1:`port`, as user `uid` (a forked
    child that setuid()s first; everything it needs is imported already) or as this one, showing `cert` if given;
    (0, the error) when no answer came."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            if cert is not None:
                context.load_cert_chain(*cert)
            connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
            connection.request("GET", PENDING, headers=headers)
            response = connection.getresponse()
            answer = [response.status, response.read().decode(errors="replace")]
        except BaseException as exc:  # noqa: BLE001 - told to the parent
            answer = [0, f"{type(exc).__name__}: {exc}"]
        os.write(write_end, json.dumps(answer).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        status, body = json.loads(f.read() or b'[0, "no answer"]')
    os.waitpid(pid, 0)
    return status, body


def _listening_on(port: int) -> set[str]:
    """The local addresses of this network namespace's listening TCP sockets on `port`, as /proc/net/tcp{,6} write
    them (127.0.0.1 is 0100007F)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as a second user needs root to switch users")
def test_another_user_gets_no_queue_position_from_kueue_s_visibility_server(cluster: Scene, tmp_path: Path) -> None:
    api_service = cluster.client.get_object("apiregistration.k8s.io/v1", "APIService", "v1beta2.visibility.kueue.x-k8s.io")
    port = int(api_service["spec"]["service"]["port"])
    assert _listening_on(port) == {"0100007F"}  # on 127.0.0.1 alone, not on the machine's other addresses
    # the aggregator's headers, as a user without the API server's front-proxy certificate would forge them
    forged = {"X-Remote-User": "testcluster-admin", "X-Remote-Group": "system:masters"}
    for headers in ({}, forged):
        status, body = _get(port, headers, uid=NOBODY)
        assert status in (401, 403) and cluster.waiting not in body, (headers, status, body)
    # the same request with the admin's certificate (the stack's own user's) is answered: the refusals above are
    # the server's, not a server that answers no one
    user = yaml.safe_load(Path(cluster.client.kubeconfig).read_text())["users"][0]["user"]
    cert, key = tmp_path / "admin.crt", tmp_path / "admin.key"
    for path, field in ((cert, "client-certificate-data"), (key, "client-key-data")):
        path.write_bytes(base64.b64decode(user[field]))
        path.chmod(0o600)
    status, body = _get(port, {}, cert=(str(cert), str(key)))
    assert status == 200 and cluster.waiting in body, (status, body)
