"""`submit --backend kubernetes` against a token-protected Ray cluster whose dashboard refuses calls
without the token: on the real cluster (testcluster).

Every head pod of the real cluster stands for the session's one shared Ray head, but each reaches it by
a port-forward kwok runs through a relay that names the pod (testcluster/pod_relay.py, a kwok
PortForward per head pod), and the door to the head (testcluster/head_front.py) holds that stream to
the token of the pod's RayCluster, read from the Secret the real KubeRay v1.6.1 made for it (named after
the cluster, cut to its last 50 characters): a call without it is refused 401, with another 403, as a
head started with KubeRay's token authentication refuses it. These tests check that every Job API call
of status, logs and stop carries that token (the job is queued with `--no-wait`, and KubeRay's
submitter, played here by tests/e2e/submitter_stand_in.py, submits it), and that the dashboard refuses
calls without it.

What it deliberately does not do: evictions (test_kube_eviction.py), or token auth on a KubeRay
without it (test_release_matrix.py, and tests/unit/test_kuberay_releases.py for authSecret on v1.5.x).
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.helpers import (
    LONG_TOKEN_JOB_NAME, TOKEN_JOB_OUTPUT, cli_env, kube_of, kuberay_token_secret, status_logs_stop_delete, submit_token_job,
    wait_job_running,
)  # fmt: skip

RAY = "ray.io/v1"


@pytest.fixture(scope="module")
def cluster(real_admin: tuple[Any, str]) -> tuple[Any, str]:
    """(client, kubeconfig path): the admin's view of the session's real cluster (tests/conftest.py `real_admin`)."""
    return real_admin


def _call(address: str, path: str, token: Optional[str]) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(address + path, headers=headers), timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("name", ["locked", LONG_TOKEN_JOB_NAME], ids=["short-name", "46-character-name"])
def test_token_auth_submit_status_logs_and_stop(cluster, queue, head, submitters, tmp_path: Path, name: str):
    from raybridge.jobs.dashboard import connect_dashboard

    server = cluster[0]
    namespace, lq, _ = queue
    env = cli_env(KUBECONFIG=cluster[1])
    submitters(server, namespace)
    out = submit_token_job(tmp_path, name, namespace, lq, env)
    assert out.returncode == 0, out.stderr
    head.seen.add(wait_job_running(server, name, namespace)["spec"]["jobId"])

    cluster_name, secret = kuberay_token_secret(server, name, namespace)
    assert secret is not None, [s["metadata"]["name"] for s in server.list_objects("v1", "Secret", namespace)]
    assert (len(cluster_name) > 50) == (name == LONG_TOKEN_JOB_NAME)
    token = base64.b64decode(secret["data"]["auth_token"]).decode()
    api = server.api_client()
    try:  # the head pod's dashboard by port-forward, as raybridge reaches it
        address, forward = connect_dashboard(kube_of(api, 10, namespace), namespace, cluster_name, None, None, lambda line: None)
        try:
            assert [_call(address, "/api/version", t) for t in (None, "wrong", token)] == [401, 403, 200]
            job_id = server.get_object(RAY, "RayJob", name, namespace)["status"]["jobId"]
            assert _call(address, f"/api/jobs/{job_id}", None) == 401
            assert _call(address, f"/api/jobs/{job_id}", token) == 200
        finally:
            if forward is not None:
                forward.close()
    finally:
        api.close()

    status_logs_stop_delete(server, name, namespace, env, TOKEN_JOB_OUTPUT)
