"""GPUs as DRA devices on the real programs: kube-apiserver and kube-scheduler v1.34.4 (the scheduler's
DynamicResources allocator), kube-controller-manager's resourceclaim controller, KubeRay v1.6.1 and Kueue v0.19.2
with `deviceClassMappings`, a stack of this module's own.

The nodes: two kwok nodes whose eight H100s each are DRA devices only (a ResourceSlice per node shaped as NVIDIA's
k8s-dra-driver-gpu v0.4.0 publishes it, with the driver's DeviceClass), and one node of eight A100s through the
device plugin. The stand-in for the driver publishes slices and nothing else: no kubelet plugin prepares a
device on a node (kwok runs no kubelet); the scheduler allocates from the slices as it would from a real
driver's (kubesim/FIDELITY.md).

Shown here: sizing on the mixed cluster (the way that reaches more GPUs is chosen, the other node left out and
said); a RayJob whose workers claim DRA GPUs admitted against the `nvidia.com/gpu` quota Kueue maps the class to,
its claims allocated by the scheduler, run to the end and cleaned up (the claim template with it); a job that
does not fit the quota waiting, and `explain` saying why in devices; `check`'s rows. On the session's cluster
(Kueue v0.17.0, which counts DRA devices only with its alpha gate): a DRA job refused before anything is created.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

import pytest

from tests.cluster_state import leftovers, make_cluster_queue, make_local_queue
from tests.waits import wait_for
from raybridge.core.dra import GPU_DRIVERS
from tests.builders import device_class, dra_device, gpu_node, h100_node, resource_slice
from tests.helpers import cli_env, run_cli

#: One stack for the module's tests: dealt to several workers, each started its own (about 45 s of both cores each).
pytestmark = pytest.mark.xdist_group("dra-real")

NVIDIA = GPU_DRIVERS["gpu.nvidia.com"]
DRA_NODES = ("dra-0", "dra-1")
#: A DRA node's device plugin, registered and counting none of its GPUs.
NO_PLUGIN_GPUS = {"nvidia.com/gpu": "0"}
MAPPING = {"resources": {"deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": [NVIDIA.device_class]}]}}


def dra_objects(nodes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The driver's DeviceClass, and a ResourceSlice per DRA node owned by its Node (as the driver's kubelet plugin
    writes it: generateName from the node and the driver, the Node as its controller owner)."""
    objects = [device_class(NVIDIA.device_class, NVIDIA.class_selector)]
    for name in DRA_NODES:
        piece = resource_slice(name, [dra_device(f"gpu-{i}", extra={"uuid": {"string": f"GPU-{name}-{i}"}}) for i in range(8)])
        node = nodes[name]
        piece["metadata"] = {"generateName": f"{name}-{NVIDIA.name}-",
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"], "controller": True}]}  # fmt: skip
        objects.append(piece)
    return objects


@pytest.fixture(scope="module")
def stack(ray_head: Any) -> Iterator[Any]:
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import StackOptions

    nodes = [h100_node(name, 0, extra_resources=NO_PLUGIN_GPUS) for name in DRA_NODES]
    nodes.append(gpu_node("plugin-a100", product="NVIDIA-A100-SXM4-40GB", memory_mib=40960))
    options = StackOptions(nodes=nodes, versions={"kueue": "v0.19.2"}, ray_dashboard=urlparse(ray_head.dashboard_url).netloc,
                           kueue_config=MAPPING)  # fmt: skip
    with own_cluster(options) as started:
        from testcluster.client import ClusterClient

        client = ClusterClient(started.kubeconfig)
        try:
            by_name = {n: client.get_object("v1", "Node", n) for n in DRA_NODES}
            for obj in dra_objects(by_name):  # type: ignore[arg-type]
                client.create_object(obj)
        finally:
            client.close()
        yield started


@pytest.fixture
def server(stack: Any) -> Iterator[Any]:
    from testcluster.client import ClusterClient

    client = ClusterClient(stack.kubeconfig)
    try:
        yield client
    finally:
        client.close()


def cli(stack: Any, *args: str, timeout: float = 240) -> Any:
    return run_cli(*args, env=cli_env(KUBECONFIG=str(stack.kubeconfig)), timeout=timeout)


def queue(server: Any, gpus: int) -> tuple[str, str]:
    """A fresh namespace with a LocalQueue `q` on a ClusterQueue of `gpus` nvidia.com/gpu (the name Kueue counts
    the class's devices under)."""
    suffix = uuid.uuid4().hex[:6]
    namespace = f"dra-{suffix}"
    server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    make_cluster_queue(server, f"cq-{suffix}", gpus=gpus, cpu="512", memory="4Ti")
    make_local_queue(server, "q", namespace, f"cq-{suffix}")
    return namespace, f"cq-{suffix}"


def _state(server: Any, namespace: str) -> str:
    """What the cluster holds for a namespace's job, for a failure's message."""
    lines = []
    for api, kind in (("kueue.x-k8s.io/v1beta2", "Workload"), ("resource.k8s.io/v1", "ResourceClaim"), ("v1", "Pod")):
        for obj in server.list_objects(api, kind, namespace):
            status = obj.get("status") or {}
            lines.append(f"{kind} {obj['metadata']['name']}: {json.dumps(status)[:1500]}")
    return "\n".join(lines)


def test_sizing_on_the_mixed_cluster_takes_the_dra_gpus_and_says_what_it_leaves_out(stack: Any) -> None:
    out = cli(stack, "discover")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.split() and line.split()[0] in (*DRA_NODES, "plugin-a100")}
    assert all("DRA (class gpu.nvidia.com)" in rows[n] and "NVIDIA H100 80GB HBM3" in rows[n] for n in DRA_NODES), out.stdout
    assert "device plugin" in rows["plugin-a100"] and "NVIDIA-A100-SXM4-40GB" in rows["plugin-a100"], out.stdout
    plan = cli(stack, "plan", "--gpus", "16", "-o", "json")
    assert plan.returncode == 0, plan.stderr
    data = json.loads(plan.stdout)
    assert (data["deviceClass"], data["replicas"], data["gpusPerReplica"], data["clusterGpus"]) == ("gpu.nvidia.com", 2, 8, 16)
    assert any("8 nvidia GPUs on 1 node left out (plugin-a100)" in w for w in data["warnings"]), data["warnings"]
    a100 = json.loads(cli(stack, "plan", "--gpus", "8", "--gpu-model", "A100", "-o", "json").stdout)
    assert (a100["deviceClass"], a100["gpuModels"]) == (None, ["NVIDIA-A100-SXM4-40GB"])


def test_a_dra_job_is_admitted_against_the_mapped_quota_its_claims_allocated_and_it_runs_to_the_end(stack: Any, server: Any) -> None:
    namespace, cluster_queue = queue(server, gpus=16)
    seen: dict[str, Any] = {}

    def watch_claims() -> bool:
        claims = server.list_objects("resource.k8s.io/v1", "ResourceClaim", namespace)
        allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
        if allocated:
            seen["claims"] = allocated
        workloads = server.list_objects("kueue.x-k8s.io/v1beta2", "Workload", namespace)
        for w in workloads:
            for assignment in ((w.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
                if "nvidia.com/gpu" in (assignment.get("resourceUsage") or {}):
                    seen["usage"] = assignment["resourceUsage"]["nvidia.com/gpu"]
        return len(seen.get("claims", [])) >= 2 and "usage" in seen

    process = subprocess.Popen(
        [sys.executable, "-m", "raybridge", "submit", "-n", namespace, "--queue", "q", "--name", "dra-job", "--gpus", "16",
         "--", "python", "-c", "import time; print('ran on DRA GPUs', flush=True); time.sleep(8)"],
        env=cli_env(KUBECONFIG=str(stack.kubeconfig)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(watch_claims, timeout=180, what="the workers' claims allocated and the Workload admitted with its GPUs counted")
        out, err = process.communicate(timeout=240)
    except TimeoutError:
        process.kill()
        out, err = process.communicate(timeout=30)
        raise AssertionError(_state(server, namespace) + f"\nsubmit said: {err[-3000:]}") from None
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "ran on DRA GPUs" in out
    assert "note: Kueue counts the job's DRA devices as nvidia.com/gpu" in err, err
    assert seen["usage"] in ("16", 16), seen["usage"]
    devices = {(r["pool"], r["device"]) for c in seen["claims"] for r in c["status"]["allocation"]["devices"]["results"]}
    assert len(devices) == 16 and {pool for pool, _ in devices} == set(DRA_NODES), devices  # 8 per worker, on the DRA nodes
    try:
        wait_for(lambda: leftovers(server, namespace) == {}, timeout=120, what="nothing left")
    except TimeoutError:
        raise AssertionError(f"left: {leftovers(server, namespace)}\nsubmit said: {err[-2500:]}") from None
    assert server.list_objects("resource.k8s.io/v1", "ResourceClaimTemplate", namespace) == []
    server.delete_object("kueue.x-k8s.io/v1beta2", "ClusterQueue", cluster_queue)


def test_a_dra_job_over_the_quota_waits_and_explain_says_why_in_devices(stack: Any, server: Any) -> None:
    namespace, cluster_queue = queue(server, gpus=8)
    holder = subprocess.Popen(
        [sys.executable, "-m", "raybridge", "submit", "-n", namespace, "--queue", "q", "--name", "holder", "--gpus", "8",
         "--", "python", "-c", "import time; print('holding', flush=True); time.sleep(120)"],
        env=cli_env(KUBECONFIG=str(stack.kubeconfig)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    waiter = None
    try:
        wait_for(lambda: any((w.get("status") or {}).get("admission") for w in server.list_objects("kueue.x-k8s.io/v1beta2", "Workload", namespace)),
                 timeout=180, what="the first job admitted")  # fmt: skip
        waiter = subprocess.Popen(
            [sys.executable, "-m", "raybridge", "submit", "-n", namespace, "--queue", "q", "--name", "waiter", "--gpus", "8",
             "--timeout", "300", "--", "python", "-c", "print('second')"],
            env=cli_env(KUBECONFIG=str(stack.kubeconfig)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

        def explained() -> Any:
            out = cli(stack, "explain", "waiter", "-n", namespace, "-o", "json", timeout=60)
            if out.returncode != 0:
                return None
            data = json.loads(out.stdout)
            kueue = data.get("kueue") or {}
            return kueue if kueue.get("state") == "pending" and (kueue.get("requested") or {}).get("nvidia.com/gpu") else None

        # Kueue v0.19 writes the claims' devices, under the mapped name, into the pending Workload's
        # status.resourceRequests; the pods' templates show none of them.
        found = wait_for(explained, timeout=120, what="explain of the waiting job with its GPUs counted")
        assert found["requested"]["nvidia.com/gpu"] == 8, found
        gpu_rows = [r for r in found["flavors"] if r["resource"] == "nvidia.com/gpu"]
        assert gpu_rows and (gpu_rows[0]["requested"], gpu_rows[0]["nominalQuota"], gpu_rows[0]["used"]) == (8, 8, 8), found["flavors"]
        text = cli(stack, "explain", "waiter", "-n", namespace, timeout=60)
        assert text.returncode == 0, text.stderr
        assert "nvidia.com/gpu: 8 of 8 quota (8 in use)" in text.stdout, text.stdout
    finally:
        for process in (holder, waiter):
            if process is not None and process.poll() is None:
                process.send_signal(2)
        for process in (holder, waiter):
            if process is not None:
                try:
                    process.communicate(timeout=120)
                except subprocess.TimeoutExpired:
                    process.kill()
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=120, what="nothing left")
    server.delete_object("kueue.x-k8s.io/v1beta2", "ClusterQueue", cluster_queue)


def test_check_says_the_cluster_s_dra_gpus_and_that_kueue_counts_them(stack: Any) -> None:
    out = cli(stack, "check", "-o", "json")
    rows = {(r["check"], r["status"]): r["detail"] for r in json.loads(out.stdout)["checks"]}
    assert "16 nvidia GPUs on 2 nodes as DRA devices of gpu.nvidia.com, claimed through DeviceClass gpu.nvidia.com" == rows[("DRA GPUs", "ok")]
    assert rows[("Kueue and DRA", "ok")] == "Kueue counts DeviceClass gpu.nvidia.com as nvidia.com/gpu"


def test_kueue_v0_17_0_would_leave_dra_devices_uncounted_so_the_job_is_refused_before_anything_exists(
    real_cluster: Any, tmp_path: Path
) -> None:
    """The session's cluster runs Kueue v0.17.0 without its alpha DynamicResourceAllocation gate; the nodes are a
    DRA cluster's (`--nodes`), the queue and Kueue the real ones."""
    from testcluster.client import ClusterClient

    client = ClusterClient(real_cluster.kubeconfig)
    nodes = {n: {"metadata": {"uid": f"uid-{n}"}} for n in DRA_NODES}
    items = [h100_node(n, 0, extra_resources=NO_PLUGIN_GPUS) for n in DRA_NODES] + dra_objects(nodes)
    for obj in items:
        obj.setdefault("metadata", {}).setdefault("name", obj["metadata"].get("generateName", "x") + "1")
    (tmp_path / "dra.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    suffix = uuid.uuid4().hex[:6]
    namespace = f"dra17-{suffix}"
    try:
        client.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        make_cluster_queue(client, f"cq17-{suffix}", gpus=16)
        make_local_queue(client, "q", namespace, f"cq17-{suffix}")
        started = time.monotonic()
        out = run_cli("submit", "-n", namespace, "--queue", "q", "--gpus", "8", "--nodes", str(tmp_path / "dra.json"), "--", "python", "-c", "1",
                      env=cli_env(KUBECONFIG=str(real_cluster.kubeconfig)), timeout=120)  # fmt: skip
        assert out.returncode == 2, out.stderr
        assert "this cluster's Kueue v0.17.0 counts DRA devices only with its alpha feature gate DynamicResourceAllocation=true" in out.stderr
        assert "nothing was created" in out.stderr and time.monotonic() - started < 60
        assert leftovers(client, namespace) == {}
        assert client.list_objects("resource.k8s.io/v1", "ResourceClaimTemplate", namespace) == []
    finally:
        client.delete_object("kueue.x-k8s.io/v1beta2", "ClusterQueue", f"cq17-{suffix}")
        client.close()
