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
without it (test_release_matrix.py, and tests/unit/test_kuberay_releases.py for authSecret on v1.5.x).
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import LONG_TOKEN_JOB_NAME, TOKEN_JOB_OUTPUT, cli_env, kuberay_token_secret, wait_job_running, status_logs_stop_delete, submit_token_job

RAY = "ray.io/v1"


@pytest.fixture(scope="module")
def cluster(simulated_kube):
    return simulated_kube


def _call(address: str, path: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    url = address if "://" in address else f"http://{address}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, headers=headers), timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("name", ["locked", LONG_TOKEN_JOB_NAME], ids=["short-name", "46-character-name"])
def test_token_auth_submit_status_logs_and_stop(cluster, queue, tmp_path: Path, name: str):
    server = cluster[0]
    namespace, lq, _ = queue
    env = cli_env(KUBECONFIG=cluster[1])
    out = submit_token_job(tmp_path, name, namespace, lq, env)
    assert out.returncode == 0, out.stderr
    wait_job_running(server, name, namespace)

    cluster_name, secret = kuberay_token_secret(server, name, namespace)
    assert (len(cluster_name) > 50) == (name == LONG_TOKEN_JOB_NAME)
    token = base64.b64decode(secret["data"]["auth_token"]).decode()
    status = server.get_object(RAY, "RayJob", name, namespace)["status"]
    address = status["dashboardURL"]
    assert [_call(address, "/api/version", t) for t in (None, "wrong", token)] == [401, 403, 200]
    job_id = status["jobId"]
    assert _call(address, f"/api/jobs/{job_id}", None) == 401

    status_logs_stop_delete(server, name, namespace, env, TOKEN_JOB_OUTPUT)
