"""`submit --backend kubernetes` where an operator must be slowed down: on kubesim.

The real cluster (test_kube_submit.py, whose faults the fault proxy in front of the real API server injects) cannot
hold KubeRay's reconcile of one RayJob, so this stays on the simulated API server and operators
(kubesim/FIDELITY.md): a KubeRay that takes a RayJob's jobId 2 s late.
"""

from __future__ import annotations


import pytest

from tests.helpers import cli_env, run_cli
from tests.cluster_state import leftovers

RAY = "ray.io/v1"


@pytest.fixture(scope="module")
def cluster(simulated_kube):
    return simulated_kube


def kube_cli(cluster, *args, timeout=180):
    return run_cli(*args, env=cli_env(KUBECONFIG=cluster[1]), timeout=timeout)


def test_detach_hands_the_job_over_only_once_kuberay_polls_it(cluster, queue):
    """`JobHandle.detach()` (the Python API's hand-over of a job raybridge runs) clears spec.jobId (KubeRay v1.6+) only
    once KubeRay has taken it into status.jobId. Cleared while a busy operator still has the RayJob in Waiting, KubeRay
    would never poll the job: the RayJob would stay Waiting until preRunningDeadlineSeconds failed it, its job still
    running, and `stop` found no job. (`submit --no-wait` queues a K8sJobMode RayJob instead: jobs/queued.py.)"""
    import raybridge

    server, kuberay = cluster[0], cluster[3]
    namespace, lq, _ = queue
    kuberay.waiting_delay = 2.0  # its next reconcile of the Waiting RayJob comes 2 s late
    try:
        spec = {"name": "busy", "queue": lq, "entrypoint": "python -c 'import time; time.sleep(300)'"}
        handle = raybridge.submit(spec, backend="kubernetes", kubeconfig=cluster[1], namespace=namespace, progress=lambda _: None)
        handle.detach()
        job_id = handle.submission_id
    finally:
        kuberay.waiting_delay = 0.0
    rayjob = server.get_object(RAY, "RayJob", "busy", namespace)
    assert (rayjob["status"]["jobDeploymentStatus"], rayjob["status"].get("jobId")) == ("Running", job_id)
    assert not rayjob["spec"].get("jobId") and rayjob["spec"]["preRunningDeadlineSeconds"]  # handed over
    stopped = kube_cli(cluster, "stop", "busy", "-n", namespace)
    assert stopped.returncode == 0, stopped.stderr
    assert kube_cli(cluster, "delete", "busy", "-n", namespace).returncode == 0
    assert leftovers(server, namespace) == {}
