"""`submit` and the lifecycle commands against every KubeRay and Kueue release the Go module proxy serves.

Why this module exists: raybridge must work on each release we support, which differ in the API
versions they serve (Kueue v0.13 serves only `kueue.x-k8s.io/v1beta1`), their CRD fields, their
webhooks and their state machines. Each test runs once per release, on the real programs
(testcluster), with a REAL local Ray head behind the head pods: KubeRay v1.3.2, v1.5.0 and v1.6.1,
Kueue v0.13.10, v0.17.0 and v0.19.2, in three pairs: the default one, KubeRay v1.6.1 with Kueue
v0.17.0, which is the session's own cluster, the oldest releases together (v1.3.2 with v0.13.10, as
a cluster that was never upgraded) and the others (v1.5.0 with v0.19.2); a cluster costs a minute of
the run to start, so each release is in one pair only.
Test ids carry the release, so `pytest -k kueue-v0.13.10` runs that release's tests.

The releases the proxy does not serve (KubeRay v1.5.2 and v1.7, Kueue v0.15.8 and v0.20) are read
from their sources only, and where one changes what raybridge must do, that rule is a unit test
(docs/testing.md, "Releases"): the orphan bound per KubeRay release (test_orphan_guard_decision.py),
authOptions without secretName on KubeRay v1.5.1-v1.5.x (test_kuberay_releases.py), the Kueue API
version each release serves (test_kueue_api_versions.py).

Per release: submit and clean-up, the lifecycle commands, the orphan bound (and the one protection the
created RayJob carries) on every KubeRay release; the Cohort quota, split flavors and an inactive
ClusterQueue as each Kueue release sees them; token authentication refused, naming the release, on a
KubeRay without AuthOptions (before v1.5.1). The orphan test's minute on KubeRay's clock passes while the
release's other tests run: its `submit` is killed as the release's cluster starts (OrphanKill), and the test,
last in the module, checks what that saw and waits for what is left of the minute.

What it deliberately does not do: repeat every submit path of test_kube_submit.py per release
(runtime: a few tests per release).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Optional
from urllib.parse import urlparse

import pytest
import yaml

from raybridge.kuberay.names import RAYJOB_NAME_MAX
from tests.helpers import EXAMPLES, ROOT, cli_env, run_cli
from tests.builders import h100_node
from tests.cluster_state import leftovers
from tests.waits import wait_for

RAY = "ray.io/v1"

#: The releases the real programs run here, by test id: the versions moved from the default pair.
REAL_RELEASES: dict[str, dict[str, str]] = {
    "real-kuberay-v1.6.1-kueue-v0.17.0": {},
    "real-kuberay-v1.3.2-kueue-v0.13.10": {"kuberay": "v1.3.2", "kueue": "v0.13.10"},
    "real-kuberay-v1.5.0-kueue-v0.19.2": {"kuberay": "v1.5.0", "kueue": "v0.19.2"},
}
#: Kueue v0.13 serves kueue.x-k8s.io/v1beta1 only; later releases store v1beta2.
KUEUE_V1BETA1_ONLY = ("v0.13.10",)


class Cluster:
    """One release's real cluster (its admin client) and a kubeconfig for the CLI."""

    def __init__(self, release: str, server: Any, kubeconfig: str, kueue_api: str) -> None:
        self.release = release
        self.server = server
        self.kubeconfig = kubeconfig
        self.kueue_api = kueue_api
        #: The orphan test's first half, begun with the cluster (OrphanKill), where this run holds that test.
        self.orphan: Optional["OrphanKill"] = None

    def cli(self, *args: str, timeout: float = 180) -> Any:
        return run_cli(*args, env=cli_env(KUBECONFIG=self.kubeconfig), timeout=timeout)

    def queue(self) -> tuple[str, str]:
        """A fresh namespace with a LocalQueue -> ClusterQueue holding 8 GPUs, in the release's Kueue version."""
        suffix = uuid.uuid4().hex[:6]
        namespace, lq, cq = f"team-{suffix}", f"lq-{suffix}", f"cq-{suffix}"
        self.server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        if self.server.get_object(self.kueue_api, "ResourceFlavor", "default-flavor") is None:
            try:
                self.server.create_object(
                    {"apiVersion": self.kueue_api, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}
                )
            except Exception as exc:  # created meanwhile by a test beside this one (a shared cluster): 409
                if getattr(exc, "status", None) != 409:
                    raise
        quota = [("cpu", "64"), ("memory", "512Gi"), ("nvidia.com/gpu", "8")]
        group = {
            "coveredResources": [name for name, _ in quota],
            "flavors": [{"name": "default-flavor", "resources": [{"name": n, "nominalQuota": q} for n, q in quota]}],
        }
        self.server.create_object(
            {"apiVersion": self.kueue_api, "kind": "ClusterQueue", "metadata": {"name": cq},
             "spec": {"namespaceSelector": {}, "resourceGroups": [group]}}
        )  # fmt: skip
        self.server.create_object(
            {"apiVersion": self.kueue_api, "kind": "LocalQueue", "metadata": {"name": lq, "namespace": namespace},
             "spec": {"clusterQueue": cq}}
        )  # fmt: skip
        return namespace, lq

    def leftovers(self, namespace: str) -> dict[str, list[str]]:
        return leftovers(self.server, namespace, self.kueue_api)


#: One worker runs all tests of a release (`--dist loadgroup`), so each release's cluster starts once.
MATRIX = [pytest.param(r, marks=pytest.mark.xdist_group(r), id=r) for r in REAL_RELEASES]


@pytest.fixture(scope="module", params=MATRIX)
def cluster(request: pytest.FixtureRequest, ray_head: Any) -> Iterator[Cluster]:
    """One release's cluster, shared by that release's tests (the id is the release); the orphan test's first half
    begins with it (OrphanKill)."""
    with _real(request.param, ray_head, request) as cluster:
        if "kuberay" in cluster.release and _orphan_test_selected(request, cluster.release):
            cluster.orphan = OrphanKill(cluster)
        try:
            yield cluster
        finally:
            if cluster.orphan is not None:
                cluster.orphan.stop()


def _kueue_api(versions: dict[str, str]) -> str:
    return "kueue.x-k8s.io/v1beta1" if versions.get("kueue") in KUEUE_V1BETA1_ONLY else "kueue.x-k8s.io/v1beta2"


@contextlib.contextmanager
def _real(release: str, ray_head: Any, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import StackOptions
    from testcluster.client import ClusterClient

    versions = REAL_RELEASES[release]
    if not versions:  # the default pair: the session's cluster
        real = request.getfixturevalue("real_cluster")
        client = real.client()
        try:
            yield Cluster(release, client, str(real.kubeconfig), _kueue_api(versions))
        finally:
            client.close()
        return
    nodes = [h100_node(f"gpu-{i}") for i in range(2)]
    options = StackOptions(versions=versions, nodes=nodes, ray_dashboard=urlparse(ray_head.dashboard_url).netloc)
    with own_cluster(options) as stack:
        client = ClusterClient(stack.kubeconfig)
        try:
            yield Cluster(release, client, str(stack.kubeconfig), _kueue_api(versions))
        finally:
            client.close()


#: The longest RayJob name raybridge accepts: on KubeRay v1.3 its cluster is `<name>-raycluster-xxxxx`, 63 characters,
#: the most a label value (`ray.io/cluster` on its pods and head Service) may hold.
LONGEST_NAME = "hello-" + "x" * (RAYJOB_NAME_MAX - len("hello-"))


def test_submit_runs_through_kueue_and_kuberay_and_cleans_up(cluster: Cluster) -> None:
    """Under the longest name raybridge accepts, which every release can run."""
    namespace, lq = cluster.queue()
    out = cluster.cli("submit", str(EXAMPLES / "hello.yaml"), "-n", namespace, "--queue", lq, "--gpus", "8", "--name", LONGEST_NAME)
    assert out.returncode == 0, out.stderr
    assert f"created RayJob {namespace}/{LONGEST_NAME} in queue {lq}" in out.stderr
    assert "sum of squares: 285" in out.stdout
    assert "NUM_GPUS=8 NUM_REPLICAS=1" in out.stdout
    assert f"deleted RayJob {namespace}/{LONGEST_NAME}" in out.stderr and "kept RayJob" not in out.stderr
    assert "Traceback" not in out.stderr
    wait_for(lambda: cluster.leftovers(namespace) == {}, timeout=30, what=f"nothing left in {namespace}")


def wait_for_log(cluster: Cluster, name: str, namespace: str, marker: str, timeout: float = 90) -> Any:
    """`logs NAME` until its output holds `marker` (the job prints it once its driver runs)."""
    deadline = time.monotonic() + timeout
    while True:
        logs = cluster.cli("logs", name, "-n", namespace)
        if (logs.returncode == 0 and marker in logs.stdout) or time.monotonic() > deadline:
            return logs
        time.sleep(1)


def test_status_list_logs_stop_and_delete_of_a_running_job(cluster: Cluster, submitters: Any) -> None:
    namespace, lq = cluster.queue()
    submitters(cluster.server, namespace)  # the queued job's submitter pod, run here (kwok runs no container)
    script = "import time; print('driver up', flush=True); time.sleep(300)"
    out = cluster.cli("submit", "-n", namespace, "--queue", lq, "--name", "long", "--no-wait", "-o", "json",
                      "--", "python", "-c", script)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "SUBMITTED"

    logs = wait_for_log(cluster, "long", namespace, "driver up")
    assert logs.returncode == 0 and "driver up" in logs.stdout, logs.stderr
    status = cluster.cli("status", "long", "-n", namespace, "-o", "json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["queueState"] == "admitted", status.stdout
    listed = cluster.cli("list", "-n", namespace, "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [row["name"] for row in json.loads(listed.stdout)] == ["long"]

    stopped = cluster.cli("stop", "long", "-n", namespace)
    assert stopped.returncode == 0, stopped.stderr
    assert "Ray job long-" in stopped.stderr
    deadline = time.monotonic() + 60
    rayjob: dict = {}
    while time.monotonic() < deadline:
        rayjob = cluster.server.get_object(RAY, "RayJob", "long", namespace) or {}
        if (rayjob.get("status") or {}).get("jobStatus") == "STOPPED":
            break
        time.sleep(0.5)
    assert (rayjob.get("status") or {}).get("jobStatus") == "STOPPED"
    deleted = cluster.cli("delete", "long", "-n", namespace)
    assert deleted.returncode == 0, deleted.stderr
    wait_for(lambda: cluster.leftovers(namespace) == {}, timeout=30, what=f"nothing left in {namespace}")


def _finished(workload: dict[str, Any]) -> bool:
    return any(c.get("type") == "Finished" and c.get("status") == "True" for c in (workload.get("status") or {}).get("conditions") or [])


@contextlib.contextmanager
def created_rayjobs(kubeconfig: str, namespace: str) -> Iterator[list[dict[str, Any]]]:
    """Every RayJob created in `namespace` while the block runs, as the API server stored it at creation (its
    ADDED event, after the admission webhooks), however the operators change it afterwards."""
    from kubernetes import client, config, watch

    api = config.new_client_from_config(kubeconfig)
    custom = client.CustomObjectsApi(api)
    since = custom.list_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs")["metadata"]["resourceVersion"]
    found: list[dict[str, Any]] = []
    stream = watch.Watch()

    def follow() -> None:
        with contextlib.suppress(Exception):  # ended by stream.stop(), or the API server gone with the test
            for event in stream.stream(custom.list_namespaced_custom_object, "ray.io", "v1", namespace, "rayjobs",
                                       resource_version=since, timeout_seconds=300):  # fmt: skip
                if event["type"] == "ADDED":
                    found.append(event["object"])

    follower = threading.Thread(target=follow, name="created-rayjobs", daemon=True)
    follower.start()
    try:
        yield found
    finally:
        stream.stop()
        api.close()


def _measured(job: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The RayJob once KubeRay measures its deadline (Running, with a startTime), else None."""
    status = (job or {}).get("status") or {}
    return job if status.get("jobDeploymentStatus") == "Running" and status.get("startTime") else None


def _holding(cluster: Cluster, namespace: str) -> bool:
    """Whether the RayJob still holds its quota: not Failed, or a Workload not yet finished."""
    job = cluster.server.get_object(RAY, "RayJob", "orphan", namespace) or {}
    workloads = cluster.server.list_objects(cluster.kueue_api, "Workload", namespace)
    failed = (job.get("status") or {}).get("jobDeploymentStatus") == "Failed"
    return not (failed and workloads and all(_finished(w) for w in workloads))


# --- what each Kueue release says about the queues, and what a KubeRay release cannot do ----------------


def _kuberay_version(release: str) -> Optional[tuple[int, ...]]:
    """The KubeRay release of a matrix id (`real-kuberay-v1.3.2-kueue-v0.13.10` -> (1, 3, 2)); None: the newest."""
    for part in release.split("-kueue")[0].split("-"):
        if part.startswith("v") and part[1:2].isdigit():
            return tuple(int(n) for n in part[1:].split("."))
    return None


def _flavor_quota(name: str, cpu: str, gpus: str) -> dict[str, Any]:
    return {"name": name, "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "512Gi"},
                                        {"name": "nvidia.com/gpu", "nominalQuota": gpus}]}  # fmt: skip


def _create_if_absent(cluster: Cluster, obj: dict[str, Any]) -> None:
    """Create a cluster-scoped object other tests of a shared cluster may have created too (409 is fine)."""
    if cluster.server.get_object(obj["apiVersion"], obj["kind"], obj["metadata"]["name"]) is None:
        try:
            cluster.server.create_object(obj)
        except Exception as exc:
            if getattr(exc, "status", None) != 409:
                raise


def _kueue_queues(cluster: Cluster, flavors: list[dict[str, Any]], *, cohort: str = "", existing: tuple[str, ...] = ()) -> tuple[str, str]:
    """A fresh namespace, ResourceFlavors `existing`, a ClusterQueue with one resource group over `flavors` and a
    LocalQueue lq, in the release's Kueue version: (namespace, ClusterQueue)."""
    api, suffix = cluster.kueue_api, uuid.uuid4().hex[:6]
    namespace, name = f"team-{suffix}", f"cq-{suffix}"
    cluster.server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for flavor in existing:
        _create_if_absent(cluster, {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": flavor}})
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": flavors}]}
    if cohort:
        spec["cohort" if api.endswith("v1beta1") else "cohortName"] = cohort
    cluster.server.create_object({"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    cluster.server.create_object({"apiVersion": api, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace}, "spec": {"clusterQueue": name}})
    return namespace, name


def _cohort(cluster: Cluster, name: str, gpus: str, parent: str = "") -> None:
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "default-flavor", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]}  # fmt: skip
    if parent:
        spec["parentName"] = parent
    cluster.server.create_object({"apiVersion": cluster.kueue_api, "kind": "Cohort", "metadata": {"name": name}, "spec": spec})


def _needs_kueue(cluster: Cluster) -> None:
    if "kueue" not in cluster.release:
        pytest.skip("the queues are Kueue's: one run per Kueue release")


def test_the_shipped_kueue_config_passes_the_release_s_schema_rules_and_webhooks(cluster: Cluster) -> None:
    """configs/kueue/gpu-queues.yaml, created with `--dry-run=server` on each release whose Kueue serves its version:
    the CRD's schema and CEL rules and Kueue's own webhooks judge it, and nothing is kept."""
    documents = [d for d in yaml.safe_load_all((ROOT / "configs" / "kueue" / "gpu-queues.yaml").read_text()) if d]
    if any(d["apiVersion"] != cluster.kueue_api for d in documents if d["apiVersion"].startswith("kueue.x-k8s.io/")):
        pytest.skip(f"{cluster.release}'s Kueue serves {cluster.kueue_api} alone; the config is written in v1beta2")
    for namespace in sorted({d["metadata"].get("namespace") for d in documents} - {None}):
        _create_if_absent(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for document in documents:
        cluster.server.create_object(document, dry_run=True)  # raises on any refusal, naming it


def test_a_job_that_fits_only_with_the_quota_of_cohort_objects_is_accepted_and_runs(cluster: Cluster) -> None:
    """4 GPUs of its own, 2 of its Cohort team, 4 of team's parent org: 10 GPUs can be admitted, and are."""
    _needs_kueue(cluster)
    suffix = uuid.uuid4().hex[:6]
    namespace, _ = _kueue_queues(cluster, [_flavor_quota("default-flavor", "64", "4")], cohort=f"team-{suffix}", existing=("default-flavor",))
    _cohort(cluster, f"team-{suffix}", "2", parent=f"org-{suffix}")
    _cohort(cluster, f"org-{suffix}", "4")
    out = cluster.cli("submit", "-n", namespace, "--queue", "lq", "--name", "wide", "--gpus", "10", "--", "python", "-c", "print('wide ran')")
    assert out.returncode == 0, out.stderr  # admitted by Kueue with the Cohorts' quota, run by KubeRay
    assert "wide ran" in out.stdout
    assert "can ever hold" not in out.stderr and "Traceback" not in out.stderr
    wait_for(lambda: cluster.leftovers(namespace) == {}, timeout=30, what=f"nothing left in {namespace}")


def test_cpu_that_fits_one_flavor_and_gpus_another_are_refused_with_the_arithmetic(cluster: Cluster) -> None:
    """Kueue gives a pod set one flavor for all the resources of a group: a has the CPUs, b the GPUs, neither both."""
    _needs_kueue(cluster)
    namespace, name = _kueue_queues(cluster, [_flavor_quota("a", "64", "4"), _flavor_quota("b", "8", "16")], existing=("a", "b"))
    out = cluster.cli("submit", "-n", namespace, "--queue", "lq", "--name", "split", "--gpus", "8", "--timeout", "30", "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert f"no flavor of ClusterQueue {name} can ever take it (flavor a: nvidia.com/gpu 8 > 4 it can ever hold; flavor b: cpu 32 > 8 it can ever hold)" in out.stderr
    assert "one flavor for all of cpu, memory, nvidia.com/gpu" in out.stderr
    assert "Traceback" not in out.stderr and "created RayJob" not in out.stderr
    assert cluster.leftovers(namespace) == {}


def test_a_cluster_queue_kueue_found_inactive_is_refused(cluster: Cluster) -> None:
    """The ClusterQueue names a flavor that does not exist: Kueue marks it inactive and admits nothing."""
    _needs_kueue(cluster)
    missing = f"h100-{uuid.uuid4().hex[:6]}"
    namespace, name = _kueue_queues(cluster, [_flavor_quota(missing, "64", "8")])
    wait_for(lambda: any(c["type"] == "Active" and c["status"] == "False"
                         for c in ((cluster.server.get_object(cluster.kueue_api, "ClusterQueue", name) or {}).get("status") or {}).get("conditions") or []),
             timeout=30, what="Kueue to find the ClusterQueue inactive")  # fmt: skip
    out = cluster.cli("submit", "-n", namespace, "--queue", "lq", "--name", "never", "--gpus", "8", "--timeout", "30", "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert (
        f"ClusterQueue {name} (behind LocalQueue lq) is not active: FlavorNotFound: "
        f"Can't admit new workloads: references missing ResourceFlavor(s): {missing}."
    ) in out.stderr
    assert "Traceback" not in out.stderr and "created RayJob" not in out.stderr
    assert cluster.leftovers(namespace) == {}


def test_token_auth_on_a_kuberay_without_auth_options_is_refused_naming_the_release(cluster: Cluster, tmp_path: Any) -> None:
    """kuberay@v1.5.1 ray-operator/apis/ray/v1/raycluster_types.go adds AuthOptions; v1.5.0 and older lack it."""
    version = _kuberay_version(cluster.release) if "kuberay" in cluster.release else None
    if version is None or version >= (1, 5, 1):
        pytest.skip("this KubeRay release has AuthOptions (token auth is tested in test_kube_token_auth.py)")
    namespace, lq = cluster.queue()
    spec = tmp_path / "locked.yaml"
    spec.write_text("name: locked\nauthMode: token\n")
    out = cluster.cli("submit", str(spec), "-n", namespace, "--queue", lq, "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert "authMode: token authentication needs KubeRay v1.5.1 or later" in out.stderr
    assert "Traceback" not in out.stderr
    assert cluster.server.get_object(RAY, "RayJob", "locked", namespace) is None


#: What raybridge says of a DRA job on each Kueue release it runs for real (kueue/dra.py, from each one's source).
DRA_REFUSALS = {
    "v0.13.10": "this cluster's Kueue v0.13.10 does not count DRA devices",
    "v0.17.0": "this cluster's Kueue v0.17.0 counts DRA devices only with its alpha feature gate DynamicResourceAllocation=true",
    # the stack's Kueue v0.19.2 counts them, but its Configuration maps no DeviceClass: Inadmissible for good
    "v0.19.2": "DeviceClass gpu.nvidia.com is not in Kueue's deviceClassMappings (mapped: none)",
}


def test_a_dra_job_kueue_would_not_count_or_never_admit_is_refused_before_anything_exists(cluster: Cluster) -> None:
    """The nodes are a DRA cluster's (examples/cluster/dra.json, `--nodes`), the queue and Kueue this release's."""
    _needs_kueue(cluster)
    release = (REAL_RELEASES[cluster.release].get("kueue") or "v0.17.0")
    namespace, lq = cluster.queue()
    out = cluster.cli("submit", "-n", namespace, "--queue", lq, "--gpus", "8", "--nodes", str(ROOT / "examples" / "cluster" / "dra.json"),
                      "--", "python", "-c", "1")  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert DRA_REFUSALS[release] in out.stderr and "nothing was created" in out.stderr, out.stderr
    assert cluster.leftovers(namespace) == {}


def test_a_job_queued_with_no_wait_runs_alone_through_a_preemption(cluster: Cluster, ray_head: Any, tmp_path: Any) -> None:
    """tests/e2e/queued_scenario.py: `submit --no-wait` returns at once; queued, admitted, preempted and readmitted
    with nobody watching, the job runs to the end with its working dir, on every KubeRay and Kueue release."""
    from tests.e2e.queued_scenario import run_queued_job_through_a_preemption
    from tests.e2e.shared_head import HeadJobs

    head = HeadJobs(ray_head.dashboard_url)
    try:
        run_queued_job_through_a_preemption(cluster.server, cluster.kubeconfig, cluster.kueue_api, head, ray_head.dashboard_url, tmp_path)
    finally:
        for submission_id in sorted(head.seen):
            head.end(submission_id)


# --- the orphan bound: last in the module, begun with the release's cluster ------------------------------------

#: The orphan bound the test gives `submit`: the CLI's least (MIN_ORPHAN_BOUND_SECONDS), a minute of KubeRay's clock.
ORPHAN_BOUND = 60
ORPHAN_TEST = "test_raybridge_killed_at_any_moment_frees_the_quota_within_the_orphan_bound"


@dataclass
class KilledRun:
    """What the orphan test's first half saw: `submit`'s stderr up to the kill, the RayJob as created, and KubeRay's
    deadline as it measured it, while the RayJob still held its quota."""

    namespace: str
    seen: list[str]
    created: list[dict[str, Any]]
    killed_at: datetime
    fails_at: datetime
    holding_after_measure: bool


class OrphanKill:
    """The orphan test's first half, on a thread: `submit` SIGKILLed once its cluster is ready, and KubeRay's deadline
    read while the RayJob runs. The `cluster` fixture starts it with the release's cluster, so the minute until that
    deadline passes while the release's other tests run instead of in a test of its own; the test (last in the module)
    takes what it saw and waits for what is left. What it does not do: assert (the test does, on what it kept)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.proc: Optional[subprocess.Popen[str]] = None
        self.result: Optional[KilledRun] = None
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, name="orphan-kill", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self._kill()
        except BaseException as exc:  # noqa: BLE001 - raised again by `outcome` in the test
            self.error = exc

    def _kill(self) -> KilledRun:
        cluster = self.cluster
        namespace, lq = cluster.queue()
        with created_rayjobs(cluster.kubeconfig, namespace) as created:
            self.proc = proc = subprocess.Popen(
                [sys.executable, "-m", "raybridge", "-v", "submit", "-n", namespace, "--queue", lq, "--name", "orphan",
                 "--submission-id", "orphan-run-1", "--orphan-timeout", str(ORPHAN_BOUND), "--", "python", "-c", "import time; time.sleep(600)"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(KUBECONFIG=cluster.kubeconfig), cwd=str(ROOT),
            )  # fmt: skip
            seen: list[str] = []
            try:
                assert proc.stderr is not None
                for line in proc.stderr:
                    seen.append(line)
                    if "is ready" in line:
                        break
                proc.send_signal(signal.SIGKILL)  # no clean-up of any kind runs
                proc.wait(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
            killed_at = datetime.now(timezone.utc)
            assert any("is ready" in line for line in seen), "".join(seen)
            wait_for(lambda: created, timeout=10, what="the RayJob's creation, as the API server stored it")
        job = wait_for(lambda: _measured(cluster.server.get_object(RAY, "RayJob", "orphan", namespace)), timeout=30,
                       what="KubeRay measuring the RayJob's deadline")  # fmt: skip
        started = datetime.strptime(job["status"]["startTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        fails_at = started + timedelta(seconds=job["spec"]["activeDeadlineSeconds"])
        time.sleep(1)
        return KilledRun(namespace, seen, list(created), killed_at, fails_at, _holding(cluster, namespace))

    def outcome(self, timeout: float = 180) -> KilledRun:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise TimeoutError(f"the orphan run's first half did not end within {timeout:.0f} s")
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def stop(self) -> None:
        """After the module: a `submit` still running (its test never came) is killed; its namespace stays, as a failed
        test's does."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.thread.join(60)


def _orphan_test_selected(request: pytest.FixtureRequest, release: str) -> bool:
    """Whether this run holds the orphan test of `release` (not left out by -k or a node id)."""
    return any(item.name == f"{ORPHAN_TEST}[{release}]" for item in request.session.items)


@pytest.mark.realtime  # on the real programs the bound itself (a minute) passes in wall-clock time
def test_raybridge_killed_at_any_moment_frees_the_quota_within_the_orphan_bound(cluster: Cluster) -> None:
    """SIGKILL once the cluster is ready (KubeRay's Waiting, where v1.3-v1.5 check neither suspend nor
    deadlines): the RayJob's deadline falls within --orphan-timeout of the kill, and once KubeRay's clock
    reaches it the RayJob fails and Kueue marks it finished (quota freed). The kill came at the module's start
    (OrphanKill); the release's other tests ran while the bound passed."""
    if "kuberay" not in cluster.release:
        pytest.skip("the RayJob state machine is KubeRay's: one run per KubeRay release")
    assert cluster.orphan is not None, "the cluster fixture starts the orphan run where this test is selected"
    run = cluster.orphan.outcome()
    namespace, seen, bound = run.namespace, run.seen, ORPHAN_BOUND
    # One protection, the same fields on every release (kuberay@v1.3.2..v1.7.0 honour activeDeadlineSeconds in
    # Initializing and Running; the job id set from the start keeps the RayJob out of Waiting, which checks
    # neither), and no one-day cap on the run as a side effect.
    as_created = run.created[0]
    assert [line for line in seen if "orphan protection:" in line and "KubeRay operator" not in line] == [
        "orphan protection: if raybridge stops renewing it, the RayJob fails within 1m and frees its cluster and quota "
        "(spec.activeDeadlineSeconds, renewed while raybridge runs)\n"
    ], "".join(seen)
    # What bounds an eviction after raybridge's end depends on the operator's release, read from its Deployment.
    [eviction] = [line for line in seen if "KubeRay operator" in line]
    operator = REAL_RELEASES[cluster.release].get("kuberay", "v1.6.1")
    assert f"KubeRay operator {operator} (Deployment kuberay-system/kuberay-operator)" in eviction, eviction
    if tuple(int(part) for part in operator[1:].split(".")[:2]) >= (1, 6):
        assert "honours preRunningDeadlineSeconds" in eviction and "fails within 1m of its new start" in eviction, eviction
    else:
        assert "predates v1.6, so no preRunningDeadlineSeconds" in eviction and "the job's age then plus 1m" in eviction, eviction
    assert as_created["spec"]["activeDeadlineSeconds"] == bound
    assert as_created["spec"]["jobId"] == "orphan-run-1"
    assert "preRunningDeadlineSeconds" not in as_created["spec"]
    assert "kueue.x-k8s.io/max-exec-time-seconds" not in (as_created["metadata"].get("labels") or {})

    # +1: startTime's whole seconds; +3: KubeRay's reconcile once the deadline has passed, on a loaded machine
    assert run.fails_at - run.killed_at <= timedelta(seconds=bound + 4), (run.fails_at, run.killed_at)
    assert run.holding_after_measure, "failed before its deadline"

    # the real operator's wall clock: wait for the deadline itself (most of it passed during the other tests)
    left = max(0.0, (run.fails_at - datetime.now(timezone.utc)).total_seconds())
    wait_for(lambda: not _holding(cluster, namespace), timeout=left + 45,
             what="the RayJob failed at its deadline and its Workload finished")  # fmt: skip
    status = cluster.server.get_object(RAY, "RayJob", "orphan", namespace)["status"]
    assert (status["jobDeploymentStatus"], status.get("reason")) == ("Failed", "DeadlineExceeded")
    assert cluster.cli("delete", "orphan", "-n", namespace).returncode == 0
