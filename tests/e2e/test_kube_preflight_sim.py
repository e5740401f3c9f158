"""`submit --backend kubernetes` against the releases the real cluster does not run: on kubesim, with one
release's CRDs and the simulated Kueue.

Why on the simulation: the real cluster (test_kube_preflight.py) runs KubeRay v1.6.1 and Kueue v0.17.0. These
tests check raybridge against the other releases it supports, whose CRDs (and, for Kueue, whose LocalQueue
defaulting, an off-able feature gate before v0.17) only the simulation serves: the orphan protection on KubeRay
v1.3.2, v1.5.2 and the newest CRDs; a RayJob Kueue does not manage (LocalQueue defaulting off); the Cohort
quota, the split flavors and the inactive ClusterQueue per Kueue release (v0.13.10, v0.15.8, the newest); token
authentication refused on a KubeRay without it (v1.3.2). The release tests carry the release directory name in
their ids, so `pytest -k kuberay-v1.3.2` runs them for that release. Each test's case for the real default
releases runs on the real cluster instead.

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
from kubesim.sim_kueue import kueue_api_version
from kubesim.schemas import KUBERAY_RELEASES, KUEUE_RELEASES

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


@pytest.mark.parametrize("release", KUBERAY_RELEASES, ids=KUBERAY_RELEASES)
def test_one_orphan_protection_on_every_kuberay_release(start_cluster: Callable[..., Cluster], release: str) -> None:
    """The same fields on every release (kuberay@v1.3.2..v1.7.0 all honour activeDeadlineSeconds in Initializing
    and Running; the job id set from the start keeps the RayJob out of Waiting, which checks neither), and no
    one-day cap on the run as a side effect."""
    cluster = start_cluster(release)
    namespace = cluster.namespace()
    queues(cluster, namespace, "lq")
    out, stored = kept_rayjob(cluster, namespace, "guarded", "--queue", "lq", "--submission-id", "guarded-run-1")
    assert ORPHAN_LINE in out.stderr
    assert out.stderr.count("orphan protection:") == 1  # nothing claimed that the server dropped
    labels, spec = stored["metadata"].get("labels") or {}, stored["spec"]
    assert spec["activeDeadlineSeconds"] == 1800
    assert spec["jobId"] == "guarded-run-1"
    assert "preRunningDeadlineSeconds" not in spec
    assert MAX_EXEC_LABEL not in labels


@pytest.mark.parametrize("release", ["kuberay-v1.3.2"], ids=["kuberay-v1.3.2"])
def test_a_job_kueue_does_not_manage_is_guarded_too(start_cluster: Callable[..., Cluster], release: str) -> None:
    """A `default` LocalQueue but LocalQueue defaulting off: an unqueued RayJob, bounded by the same renewed deadline."""
    cluster = start_cluster(release, default_queue=None)
    namespace = cluster.namespace()
    queues(cluster, namespace, "default")
    out, stored = kept_rayjob(cluster, namespace, "unqueued")
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


# --- what the simulated Kueue of each release says about the queues --------------------------------


@pytest.fixture
def kueue_cluster(tmp_path: Path) -> Iterator[Callable[[str], Cluster]]:
    """Starts a server with one Kueue release's CRDs (KubeRay newest), two 8-GPU nodes and the simulated Kueue."""
    started: list[tuple[FakeKueue, KubeApiServer]] = []

    def start(release: str) -> Cluster:
        server = KubeApiServer(release=release).start()
        started.append((FakeKueue(server).start(), server))
        cluster = Cluster(server, server.write_kubeconfig(tmp_path / "config"))
        make_gpu_node(server, "gpu-1", vendor="nvidia", gpus=8)
        return cluster

    yield start
    for kueue, server in reversed(started):
        kueue.stop()
        server.stop()


def flavor_quota(name: str, cpu: str, gpus: str) -> dict[str, Any]:
    return {"name": name, "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "512Gi"},
                                        {"name": "nvidia.com/gpu", "nominalQuota": gpus}]}  # fmt: skip


def kueue_queues(server: KubeApiServer, namespace: str, flavors: list[dict[str, Any]], *, cohort: str = "", existing: tuple[str, ...] = ()) -> str:
    """ResourceFlavors `existing`, a ClusterQueue with one resource group over `flavors`, a LocalQueue lq; in the release's version."""
    api = kueue_api_version(server)
    for name in existing:
        server.create_object({"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": name}})
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": flavors}]}
    if cohort:
        spec["cohort" if api.endswith("v1beta1") else "cohortName"] = cohort
    name = f"cq-{namespace}"
    server.create_object({"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    server.create_object({"apiVersion": api, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace}, "spec": {"clusterQueue": name}})
    return name


def cohort_object(server: KubeApiServer, name: str, gpus: str, parent: str = "") -> None:
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "default-flavor", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]}  # fmt: skip
    if parent:
        spec["parentName"] = parent
    server.create_object({"apiVersion": kueue_api_version(server), "kind": "Cohort", "metadata": {"name": name}, "spec": spec})


@pytest.mark.parametrize("release", KUEUE_RELEASES)
def test_a_job_that_fits_only_with_the_quota_of_cohort_objects_is_accepted(kueue_cluster: Callable[[str], Cluster], release: str) -> None:
    """4 GPUs of its own, 2 of its Cohort team, 4 of team's parent org: 10 GPUs can be admitted, and are."""
    cluster = kueue_cluster(release)
    namespace = cluster.namespace()
    kueue_queues(cluster.server, namespace, [flavor_quota("default-flavor", "64", "4")], cohort=f"team-{namespace}", existing=("default-flavor",))
    cohort_object(cluster.server, f"team-{namespace}", "2", parent=f"org-{namespace}")
    cohort_object(cluster.server, f"org-{namespace}", "4")
    out = cluster.submit(namespace, "--queue", "lq", "--name", "wide", "--gpus", "10", "--timeout", "3", "--keep")
    assert out.returncode == 3, out.stderr  # accepted; not ready within the timeout only because no KubeRay runs
    assert "can ever hold" not in out.stderr and "Traceback" not in out.stderr
    rayjob = cluster.server.get_object(RAY, "RayJob", "wide", namespace)
    api = kueue_api_version(cluster.server)

    def admitted() -> Any:
        for wl in cluster.server.list_objects(api, "Workload", namespace, label_selector=f"kueue.x-k8s.io/job-uid={rayjob['metadata']['uid']}"):
            if any(c["type"] == "Admitted" and c["status"] == "True" for c in (wl.get("status") or {}).get("conditions") or []):
                return wl
        return None

    wl = wait_for(admitted, timeout=10, what="Kueue to admit the 10 GPUs")  # the simulated Kueue agrees
    usage = {a["name"]: a["resourceUsage"] for a in wl["status"]["admission"]["podSetAssignments"]}
    assert usage["workers"]["nvidia.com/gpu"] == "10"


@pytest.mark.parametrize("release", KUEUE_RELEASES)
def test_cpu_that_fits_one_flavor_and_gpus_another_are_refused_with_the_arithmetic(kueue_cluster: Callable[[str], Cluster], release: str) -> None:
    """Kueue gives a pod set one flavor for all the resources of a group: a has the CPUs, b the GPUs, neither both."""
    cluster = kueue_cluster(release)
    namespace = cluster.namespace()
    name = kueue_queues(cluster.server, namespace, [flavor_quota("a", "64", "4"), flavor_quota("b", "8", "16")], existing=("a", "b"))
    out = cluster.submit(namespace, "--queue", "lq", "--name", "split", "--gpus", "8", "--timeout", "30")
    assert out.returncode == 2, out.stderr
    assert f"no flavor of ClusterQueue {name} can ever take it (flavor a: nvidia.com/gpu 8 > 4 it can ever hold; flavor b: cpu 32 > 8 it can ever hold)" in out.stderr
    assert "one flavor for all of cpu, memory, nvidia.com/gpu" in out.stderr
    assert "Traceback" not in out.stderr and "created RayJob" not in out.stderr
    assert cluster.created_in(namespace) == [] and leftovers(cluster.server, namespace, kueue_api_version(cluster.server)) == {}


@pytest.mark.parametrize("release", KUEUE_RELEASES)
def test_a_cluster_queue_the_simulated_kueue_found_inactive_is_refused(kueue_cluster: Callable[[str], Cluster], release: str) -> None:
    """The ClusterQueue names flavor h100, which does not exist: Kueue marks it inactive and admits nothing."""
    cluster = kueue_cluster(release)
    namespace = cluster.namespace()
    name = kueue_queues(cluster.server, namespace, [flavor_quota("h100", "64", "8")])
    api = kueue_api_version(cluster.server)
    wait_for(lambda: any(c["type"] == "Active" and c["status"] == "False"
                         for c in ((cluster.server.get_object(api, "ClusterQueue", name) or {}).get("status") or {}).get("conditions") or []),
             timeout=10, what="Kueue to find the ClusterQueue inactive")  # fmt: skip
    out = cluster.submit(namespace, "--queue", "lq", "--name", "never", "--gpus", "8", "--timeout", "30")
    assert out.returncode == 2, out.stderr
    assert (
        f"ClusterQueue {name} (behind LocalQueue lq) is not active: FlavorNotFound: "
        "Can't admit new workloads: references missing ResourceFlavor(s): h100. (ResourceFlavors: none)"
    ) in out.stderr
    assert "Traceback" not in out.stderr and cluster.created_in(namespace) == []
    assert leftovers(cluster.server, namespace, kueue_api_version(cluster.server)) == {}


@pytest.mark.parametrize("release", ["kuberay-v1.3.2"], ids=["kuberay-v1.3.2"])
def test_token_auth_on_a_kuberay_without_auth_options_is_refused_naming_the_release(
    start_cluster: Callable[..., Cluster], release: str, tmp_path: Any
) -> None:
    """kuberay@v1.5.1 ray-operator/apis/ray/v1/raycluster_types.go adds AuthOptions; v1.5.0 and older lack it."""
    cluster = start_cluster(release)
    namespace = cluster.namespace()
    queues(cluster, namespace, "lq")
    spec = tmp_path / "locked.yaml"
    spec.write_text("name: locked\nauthMode: token\n")
    out = cluster.submit(namespace, str(spec), "--queue", "lq")
    assert out.returncode == 2, out.stderr
    assert "authMode: token authentication needs KubeRay v1.5.1 or later" in out.stderr
    assert "Traceback" not in out.stderr
    assert cluster.server.get_object(RAY, "RayJob", "locked", namespace) is None
