"""`submit --backend kubernetes` against a token-protected Ray cluster whose dashboard refuses calls
without the token: on kubesim.

Why on the simulation: the real cluster's head pods all stand for the session's one local Ray head,
which has no token authentication (it answers every call, token or not), so only the simulated
dashboard of each RayCluster can refuse a call without the token (401) or with a wrong one (403),
as a real head started with KubeRay's token does. These tests check that every Job API call of
submit, status, logs and stop carries the token KubeRay put in the cluster's Secret (named after
the cluster, cut to its last 50 characters), and that the dashboard refuses calls without it.
That raybridge finds the Secret the real KubeRay makes, under the name it makes it, is checked on
the real cluster (test_kube_eviction.py, `test_token_auth_reads_the_secret_kuberay_made`).

What it deliberately does not do: evictions (test_kube_eviction.py), or token auth on a KubeRay
without it (test_kube_preflight_sim.py).
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.helpers import cli_env, run_cli, status_logs_stop_delete
from kubesim.fixtures import fresh_queue, simulated_cluster

RAY = "ray.io/v1"


@pytest.fixture(scope="module")
def cluster(ray_head, tmp_path_factory):
    with simulated_cluster(urlparse(ray_head.dashboard_url).netloc, tmp_path_factory.mktemp("kube") / "config") as parts:
        yield parts


@pytest.fixture
def queue(cluster):
    """A fresh LocalQueue -> ClusterQueue with 8 GPUs, in a fresh namespace."""
    return fresh_queue(cluster[0])


def _call(address: str, path: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    url = address if "://" in address else f"http://{address}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, headers=headers), timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


LONG_NAME = "locked-" + "x" * 39  # 46 characters: its cluster (+6) is 52, and KubeRay keeps the last 50 for the Secret


@pytest.mark.parametrize("name", ["locked", LONG_NAME], ids=["short-name", "46-character-name"])
def test_token_auth_submit_status_logs_and_stop(cluster, queue, tmp_path: Path, name: str):
    server = cluster[0]
    namespace, lq, _ = queue
    spec = tmp_path / "locked.yaml"
    spec.write_text(
        f"name: {name}\nauthMode: token\n"
        "entrypoint: python -c \"import time; print('behind the token', flush=True); time.sleep(300)\"\n"
    )
    env = cli_env(KUBECONFIG=cluster[1])
    out = run_cli("submit", str(spec), "-n", namespace, "--queue", lq, "--no-wait", env=env, timeout=180)
    assert out.returncode == 0, out.stderr

    status = server.get_object(RAY, "RayJob", name, namespace)["status"]
    cluster_name = status["rayClusterName"]
    # kuberay@v1.5.2 utils.CheckName: the Secret keeps the last 50 characters of the cluster's name.
    secret = server.get_object("v1", "Secret", cluster_name[-50:], namespace)
    assert (len(cluster_name) > 50) == (name == LONG_NAME)
    token = base64.b64decode(secret["data"]["auth_token"]).decode()
    address = status["dashboardURL"]
    assert [_call(address, "/api/version", t) for t in (None, "wrong", token)] == [401, 403, 200]
    job_id = status["jobId"]
    assert _call(address, f"/api/jobs/{job_id}", None) == 401

    status_logs_stop_delete(server, name, namespace, env, "behind the token")
