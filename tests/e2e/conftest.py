"""Fixtures that several end-to-end modules use, so that no test module imports another's.

- `explain_scene`: the real cluster's Kueue scene (tests/e2e/explain_scene.py), for test_explain.py and
  test_svg_pictures.py.
- `head`: the session's shared Ray head's Job API, every run a test tracked ended after it as a head pod's end would
  end it, for test_kube_eviction.py and test_kube_token_auth.py.
- `submitters`: KubeRay's submitter pods played on a real cluster while a test runs (tests/e2e/submitter_stand_in.py),
  for every module whose jobs are queued with `submit --no-wait` (K8sJobMode).
- `ca_stack`: the real API server, kube-scheduler and kwok with the CRDs the simulated cluster-autoscaler and KAI use
  (tests/e2e/ca_on_real_api.py), session-scoped: started once by the one worker that runs the xdist_group of
  test_adjuster_ca_on_real_api.py, test_adjuster_guards_on_real_api.py, test_adjuster_races_on_real_api.py and
  test_cli_adjuster.py's server-side dry runs.

`explain_scene` is module-scoped, as it was when each of those modules held its own copy: every module that asks gets
its own, set up once for that module's tests (its own namespace and cluster-scoped names on the session's real
cluster), and it is no xdist_group's, so where `--dist loadgroup` deals a module's tests to several workers each
sets up its own, as before.
What this deliberately does not do: hold fixtures that one module alone uses, or the helpers the tests call
(explain_scene.py and explain_sim_scene.py are plain modules, imported by the tests; explain_sim_scene.py's
`scene_stack` starts a stack per module, so each of its two modules holds its own fixture).
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.builders import rayjob_manifest
from tests.waits import wait_for
from tests.e2e import explain_scene as real
from tests.e2e.shared_head import HeadJobs


@pytest.fixture(scope="module")
def explain_scene(real_cluster: Any) -> Iterator[real.Scene]:
    """explain_scene.py's objects on the session's real cluster, under this module's own names; Kueue has left the
    RayJob `train` pending for quota and reports the holder's 6 GPUs reserved."""
    client = real_cluster.client()
    try:
        scene = real.Scene.named(client, str(real_cluster.kubeconfig))
        client.create_namespace(scene.ns)
        for obj in real.kueue_objects(scene):
            client.create_object(obj)
        real.mark_active(client, scene.check)
        client.create_object(real.holder(scene))
        wait_for(lambda: (real.condition(client.get_object(real.KUEUE, "Workload", "holder", scene.ns), "QuotaReserved") or {}).get("status") == "True",
                 timeout=60, what="Kueue to reserve the holder's quota")  # fmt: skip
        client.create_object(rayjob_manifest("train", namespace=scene.ns, queue=real.LQ, workers=2, gpus_per_worker=5))
        # a pod of the default scheduler, neither Kueue's nor KAI's
        client.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": scene.ns},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}})  # fmt: skip

        def pending_with_kueue_s_reason() -> bool:
            reserved = real.condition(real.workload_of(client, scene.ns, "train"), "QuotaReserved") or {}
            return reserved.get("reason") == "Pending" and f"flavor {scene.h100}" in reserved.get("message", "")

        wait_for(pending_with_kueue_s_reason, timeout=60, what="Kueue to leave the RayJob's Workload pending for quota")
        # Kueue reports a ClusterQueue's usage in its status in batches (UpdatesBatchPeriod, a second or more after
        # the reservation), and explain reads that status: wait until it shows the holder's 6 GPUs
        wait_for(lambda: real.reserved_gpus(client, scene) == "6", timeout=60, what=f"ClusterQueue {scene.cq_a} to report 6 h100 GPUs reserved")
        yield scene
    finally:
        client.close()


@pytest.fixture
def submitters(ray_head: Any) -> Iterator[Any]:
    """`start(client, *namespaces)`: plays KubeRay's submitter pods of those namespaces (every one, without any) on the
    cluster of `client`, against the session's shared Ray head, until the test ends."""
    from tests.e2e.submitter_stand_in import SubmitterStandIn

    started: list[SubmitterStandIn] = []

    def start(client: Any, *namespaces: str) -> SubmitterStandIn:
        stand_in = SubmitterStandIn(client, ray_head.dashboard_url, set(namespaces) or None).start()
        started.append(stand_in)
        return stand_in

    yield start
    for stand_in in started:
        stand_in.stop()


@pytest.fixture
def head(ray_head) -> Iterator[HeadJobs]:
    """The shared head's Job API; every run the test tracked is ended after it, as a real head pod's end would."""
    jobs = HeadJobs(ray_head.dashboard_url)
    yield jobs
    for submission_id in sorted(jobs.seen):
        jobs.end(submission_id)


@pytest.fixture(scope="session")
def ca_stack() -> Iterator[Any]:
    """The real API server, kube-scheduler and kwok with the CRDs the simulated cluster-autoscaler and KAI use
    (tests/e2e/ca_on_real_api.py), started once per worker for the modules of its xdist_group."""
    from tests.e2e.ca_on_real_api import started_stack

    with started_stack() as stack:
        yield stack
