"""`submit --backend kubernetes` where Kueue's LocalQueue defaulting is off: on kubesim, with the simulated Kueue.

Why on the simulation: Kueue v0.17 and later lock LocalQueueDefaulting on, and the real clusters here run
Kueue with it on; before v0.17 it is a feature gate a cluster may turn off. These tests check what raybridge
does when the server set no queue: a RayJob Kueue does not manage is still bounded by the renewed orphan
deadline, and the output says it is not queued. The per-release behaviour (the orphan protection of each
KubeRay release, the Cohort quota, split flavors and inactive ClusterQueues of each Kueue release, token
authentication refused on a KubeRay without it) is in test_release_matrix.py, on the real programs for every
release the Go module proxy serves.

The flows that create a RayJob stop on `--timeout` (no simulated KubeRay runs, so the cluster never
becomes ready) with `--keep`, so that the created object can be read back.

What it deliberately does not do: anything the real cluster can show (admission denials, broken queues, the
defaulted queue with defaulting on): test_kube_preflight.py.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from tests.helpers import cli_env, run_cli
from kubesim.controllers import FakeKueue
from kubesim.fixtures import leftovers, make_cluster_queue, make_gpu_node, make_local_queue, wait_for
from kubesim.server import KubeApiServer

RAY, KUEUE = "ray.io/v1", "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


class Cluster:
    """A started test API server with a GPU node, its kubeconfig, and every RayJob CREATE it was asked for."""

    def __init__(self, server: KubeApiServer, kubeconfig: Path) -> None:
        self.server = server
        self.kubeconfig = str(kubeconfig)
        self.create_requests: list[tuple[str, str]] = []  # (namespace, name), recorded before any validation
        server.add_mutating_hook("ray.io", "RayJob", self._record)
        make_gpu_node(server, "gpu-0", vendor="nvidia", gpus=8)

    def _record(self, obj: dict[str, Any], operation: str) -> None:
        if operation == "CREATE":
            meta = obj.get("metadata") or {}
            self.create_requests.append((meta.get("namespace", ""), meta.get("name", "")))

    def namespace(self) -> str:
        name = f"team-{uuid.uuid4().hex[:6]}"
        self.server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return name

    def submit(self, namespace: str, *args: str) -> Any:
        return run_cli("submit", "-n", namespace, *args, "--", "python", "-c", "1", env=cli_env(KUBECONFIG=self.kubeconfig), timeout=120)

    def created_in(self, namespace: str) -> list[str]:
        return [name for ns, name in self.create_requests if ns == namespace]

    def leftovers(self, namespace: str) -> dict[str, list[str]]:
        return leftovers(self.server, namespace)


# --- what the server set: the defaulted queue and the protection each KubeRay release keeps -------


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """Starts a server with one KubeRay release's CRDs (Kueue newest) and the simulated Kueue.

    `default_queue`: the LocalQueue name Kueue's LocalQueue defaulting fills in (None: the feature
    gate is off). Everything started is stopped after the test.
    """
    started: list[tuple[FakeKueue, KubeApiServer]] = []

    def start(release: str, default_queue: Optional[str] = "default") -> Cluster:
        server = KubeApiServer(release=release).start()
        started.append((FakeKueue(server, namespace_default_queue=default_queue).start(), server))
        return Cluster(server, server.write_kubeconfig(tmp_path / "config"))

    yield start
    for kueue, server in reversed(started):
        kueue.stop()
        server.stop()


def queues(cluster: Cluster, namespace: str, local_queue: str) -> None:
    make_cluster_queue(cluster.server, f"cq-{namespace}", gpus=8)
    make_local_queue(cluster.server, local_queue, namespace, f"cq-{namespace}")
    # Kueue defaults only into a LocalQueue it has seen (its cache), as the simulated one does.
    wait_for(lambda: (cluster.server.get_object(KUEUE, "LocalQueue", local_queue, namespace) or {}).get("status"),
             timeout=10, what=f"Kueue to see LocalQueue {local_queue}")  # fmt: skip


def kept_rayjob(cluster: Cluster, namespace: str, name: str, *args: str) -> tuple[Any, dict[str, Any]]:
    """Submit (it stops on the short timeout: no KubeRay runs), keep the RayJob, and read it back."""
    out = cluster.submit(namespace, "--name", name, "--timeout", "2", "--keep", *args)
    assert out.returncode == 3, out.stderr  # not ready within the timeout; what matters came before
    assert "Traceback" not in out.stderr
    stored = cluster.server.get_object(RAY, "RayJob", name, namespace)
    assert stored is not None, out.stderr
    return out, stored


ORPHAN_LINE = (
    "orphan protection: if raybridge stops renewing it, the RayJob fails within 30m and frees its cluster and quota "
    "(spec.activeDeadlineSeconds, renewed while raybridge runs)"
)


def test_a_job_kueue_does_not_manage_is_guarded_too(start_cluster: Callable[..., Cluster]) -> None:
    """A `default` LocalQueue but LocalQueue defaulting off: an unqueued RayJob, bounded by the same renewed deadline."""
    cluster = start_cluster("kuberay-newest", default_queue=None)
    namespace = cluster.namespace()
    queues(cluster, namespace, "default")
    out, stored = kept_rayjob(cluster, namespace, "unqueued", "-v")  # -v: the orphan bound's line
    assert QUEUE_LABEL not in (stored["metadata"].get("labels") or {})
    assert MAX_EXEC_LABEL not in (stored["metadata"].get("labels") or {})
    assert ORPHAN_LINE in out.stderr


# (case, Kueue's defaulting LocalQueue name (None: gate off), LocalQueue in the namespace,
#  the queue label the created RayJob must carry (None: none), what the output says of it)
# (Kueue v0.17 locks the gate on; the rows with it on run on the real cluster, test_kube_preflight.py.)
DEFAULTING_ROWS = [
    ("LocalQueueDefaulting off: the server set nothing", None, "default", None, "(not queued by Kueue)"),
]


@pytest.mark.parametrize("case,defaulting,local_queue,label,said", DEFAULTING_ROWS, ids=[r[0] for r in DEFAULTING_ROWS])
def test_without_queue_the_output_names_the_queue_the_created_object_carries(
    start_cluster: Callable[..., Cluster], case: str, defaulting: Optional[str], local_queue: str, label: Optional[str], said: str
) -> None:
    cluster = start_cluster("kuberay-newest", default_queue=defaulting)
    namespace = cluster.namespace()
    queues(cluster, namespace, local_queue)
    out, stored = kept_rayjob(cluster, namespace, "unlabelled")
    assert (stored["metadata"].get("labels") or {}).get(QUEUE_LABEL) == label
    assert f"created RayJob {namespace}/unlabelled {said}" in out.stderr
