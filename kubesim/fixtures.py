"""Plain helpers that set up cluster state for tests against the in-process API server.

Why this module exists: tests of raybridge against `kubesim/server.py`
and the simulated controllers keep needing the same objects (a ClusterQueue
with a GPU quota, a LocalQueue, GPU nodes labelled as NVIDIA GFD or the ROCm
node labeller label them, a RayJob shaped like raybridge's) and a real local
Ray head for the dashboard. These are plain functions; callers wrap them in
pytest fixtures as they need.

What it deliberately does not do: no pytest fixtures or decorators, no
teardown of the objects it creates (the server is thrown away with the test),
no pods on the nodes (tests add their own when they need used capacity).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, TypeVar

T = TypeVar("T")

KUEUE_API = "kueue.x-k8s.io/v1beta2"
RAY_API = "ray.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RAY_IMAGE = "rayproject/ray:2.55.1"


# --------------------------------------------------------------------------
# Kueue queues
# --------------------------------------------------------------------------


def make_resource_flavor(
    server: Any, name: str = "default-flavor", node_labels: Optional[Mapping[str, str]] = None
) -> dict:
    """A ResourceFlavor, created unless one of that name exists (also when a test beside this one creates it
    at the same moment, on a cluster the tests share)."""
    existing = server.get_object(KUEUE_API, "ResourceFlavor", name)
    if existing is not None:
        return existing
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    try:
        return server.create_object(
            {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}
        )
    except Exception as exc:  # a test beside this one on a shared cluster created it first: 409 AlreadyExists
        if getattr(exc, "status", None) != 409 and getattr(exc, "code", None) != 409:
            raise
        return server.get_object(KUEUE_API, "ResourceFlavor", name)


def make_cluster_queue(
    server: Any,
    name: str = "cq",
    gpus: int = 8,
    vendor_key: str = "nvidia.com/gpu",
    cpu: str = "64",
    memory: str = "512Gi",
    flavor: str = "default-flavor",
    *,
    node_labels: Optional[Mapping[str, str]] = None,
    queueing_strategy: Optional[str] = None,
    preemption: Optional[Mapping[str, Any]] = None,
) -> dict:
    """A ClusterQueue with one resource group (cpu, memory and the GPU key) in one flavor.

    The flavor is created too (with `node_labels`, if given). `gpus=0` leaves the
    GPU key out of the queue. `preemption`: the queue's `spec.preemption`
    (e.g. `{"withinClusterQueue": "LowerPriority"}`).
    """
    make_resource_flavor(server, flavor, node_labels)
    covered = ["cpu", "memory"]
    resources = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]
    if gpus and vendor_key:
        covered.append(vendor_key)
        resources.append({"name": vendor_key, "nominalQuota": str(gpus)})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": covered, "flavors": [{"name": flavor, "resources": resources}]}],
    }
    if queueing_strategy:
        spec["queueingStrategy"] = queueing_strategy
    if preemption:
        spec["preemption"] = dict(preemption)
    return server.create_object(
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}
    )


def make_local_queue(server: Any, name: str = "lq", namespace: str = "default", cluster_queue: str = "cq") -> dict:
    return server.create_object(
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }
    )


def make_priority_class(server: Any, name: str, value: int) -> dict:
    return server.create_object(
        {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
    )


# --------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------

_VENDOR_KEYS = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


def gpu_node_labels(name: str, vendor: str, gpus: int, product: str, memory_mib: int) -> dict[str, str]:
    """Labels as NVIDIA GPU Feature Discovery or the ROCm node labeller write them."""
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    if vendor == "nvidia":
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.memory": str(memory_mib),
            }
        )
    elif vendor == "amd":
        vram = f"{round(memory_mib / 1024)}G"
        labels.update(
            {
                "amd.com/gpu.product-name": product,
                "amd.com/gpu.vram": vram,
                "beta.amd.com/gpu.product-name": product,
                "beta.amd.com/gpu.vram": vram,
            }
        )
    else:
        raise ValueError(f"unknown GPU vendor {vendor!r}; expected one of {sorted(_VENDOR_KEYS)}")
    return labels


def gpu_node_manifest(
    name: str,
    vendor: str = "nvidia",
    gpus: int = 8,
    product: str = "NVIDIA-H100-80GB-HBM3",
    memory_mib: int = 81559,
    ready: bool = True,
    unschedulable: bool = False,
    taints: Iterable[Mapping[str, str]] = (),
    *,
    cpu: str = "128",
    memory: str = "1024Gi",
) -> dict:
    """The Node `make_gpu_node` creates, as a dict (for a cluster that creates its nodes itself)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", _VENDOR_KEYS.get(vendor, "nvidia.com/gpu"): str(gpus)}
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {
        "capacity": dict(capacity),
        "allocatable": dict(capacity),
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "kubelet is posting ready status" if ready else "container runtime is down",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
        "nodeInfo": _node_info(),
    }
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": gpu_node_labels(name, vendor, gpus, product, memory_mib)},
        "spec": spec,
        "status": status,
    }
    return node


def make_gpu_node(server: Any, name: str, *args: Any, **kwargs: Any) -> dict:
    """A Node with `gpus` of the vendor's extended resource in capacity and allocatable, created on `server`
    (the arguments are `gpu_node_manifest`'s)."""
    node = gpu_node_manifest(name, *args, **kwargs)
    status, capacity = node["status"], node["status"]["capacity"]
    created = server.create_object(node)
    if (created.get("status") or {}).get("capacity") != capacity:
        server.update_status({**created, "status": status})
        created = server.get_object("v1", "Node", name) or created
    return created


def _node_info() -> dict[str, str]:
    return {
        "architecture": "amd64",
        "bootID": "",
        "containerRuntimeVersion": "containerd://1.7.0",
        "kernelVersion": "6.8.0",
        "kubeProxyVersion": "",
        "kubeletVersion": "v1.33.0",
        "machineID": "",
        "operatingSystem": "linux",
        "osImage": "Ubuntu 24.04 LTS",
        "systemUUID": "",
    }


# --------------------------------------------------------------------------
# Ray objects shaped like raybridge's
# --------------------------------------------------------------------------


def _pod_template(cpu: str, memory: str, gpus: int, vendor_key: str, container: str) -> dict:
    amounts: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpus:
        amounts[vendor_key] = str(gpus)
    return {
        "spec": {
            "containers": [
                {
                    "name": container,
                    "image": RAY_IMAGE,
                    "resources": {"requests": dict(amounts), "limits": dict(amounts)},
                }
            ]
        }
    }


def ray_cluster_spec(
    *, workers: int = 1, gpus_per_worker: int = 0, vendor_key: str = "nvidia.com/gpu", group: str = "workers"
) -> dict:
    """A RayCluster spec: a small head and one fixed-size worker group."""
    spec: dict[str, Any] = {
        "rayVersion": "2.55.1",
        "headGroupSpec": {
            "rayStartParams": {"dashboard-host": "0.0.0.0"},
            "template": _pod_template("1", "2Gi", 0, vendor_key, "ray-head"),
        },
        "workerGroupSpecs": [],
    }
    if workers:
        worker_params = {"num-gpus": str(gpus_per_worker)} if gpus_per_worker else {}
        spec["workerGroupSpecs"].append(
            {
                "groupName": group,
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": worker_params,
                "template": _pod_template("4", "16Gi", gpus_per_worker, vendor_key, "ray-worker"),
            }
        )
    return spec


def rayjob_manifest(
    name: str,
    *,
    namespace: str = "default",
    queue: Optional[str] = "lq",
    workers: int = 1,
    gpus_per_worker: int = 0,
    vendor_key: str = "nvidia.com/gpu",
    submission_mode: str = "InteractiveMode",
    entrypoint: str = "python -c 'print(42)'",
    **spec_overrides: Any,
) -> dict:
    """A RayJob as raybridge submits it (InteractiveMode, shutdownAfterJobFinishes, queue label)."""
    labels = {QUEUE_LABEL: queue} if queue else {}
    spec: dict[str, Any] = {
        "entrypoint": entrypoint,
        "submissionMode": submission_mode,
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": ray_cluster_spec(workers=workers, gpus_per_worker=gpus_per_worker, vendor_key=vendor_key),
    }
    spec.update(spec_overrides)
    return {
        "apiVersion": RAY_API,
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def raycluster_manifest(
    name: str,
    *,
    namespace: str = "default",
    queue: Optional[str] = "lq",
    workers: int = 1,
    gpus_per_worker: int = 0,
    vendor_key: str = "nvidia.com/gpu",
) -> dict:
    labels = {QUEUE_LABEL: queue} if queue else {}
    return {
        "apiVersion": RAY_API,
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": ray_cluster_spec(workers=workers, gpus_per_worker=gpus_per_worker, vendor_key=vendor_key),
    }


# --------------------------------------------------------------------------
# Waiting
# --------------------------------------------------------------------------


@contextlib.contextmanager
def simulated_cluster(dashboard_address: str, kubeconfig: Path, gpu_nodes: int = 2) -> Iterator[tuple[Any, str, Any, Any]]:
    """The newest releases with `gpu_nodes` 8-GPU NVIDIA nodes, the simulated Kueue and KubeRay (its clusters' Ray
    jobs run on the real head at `dashboard_address`): (server, kubeconfig path, kueue, kuberay); all stopped after."""
    from kubesim.controllers import FakeKubeRay, FakeKueue
    from kubesim.server import KubeApiServer

    server = KubeApiServer().start()
    try:
        path = server.write_kubeconfig(kubeconfig)
        for i in range(gpu_nodes):
            make_gpu_node(server, f"gpu-{i}", vendor="nvidia", gpus=8)
        kueue = FakeKueue(server).start()
        try:
            kuberay = FakeKubeRay(server, dashboard_address=dashboard_address).start()
            try:
                yield server, str(path), kueue, kuberay
            finally:
                kuberay.stop()
        finally:
            kueue.stop()
    finally:
        server.stop()


def fresh_queue(server: Any, gpus: int = 8, *, preemption: Optional[Mapping[str, Any]] = None) -> tuple[str, str, str]:
    """A new namespace with a LocalQueue -> ClusterQueue of `gpus` GPUs (and `preemption`, if given):
    (namespace, local queue, cluster queue)."""
    suffix = uuid.uuid4().hex[:6]
    namespace = f"team-{suffix}"
    server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    make_cluster_queue(server, f"cq-{suffix}", gpus=gpus, preemption=preemption)
    make_local_queue(server, f"lq-{suffix}", namespace, f"cq-{suffix}")
    return namespace, f"lq-{suffix}", f"cq-{suffix}"


def leftovers(server: Any, namespace: str, kueue_api: str = KUEUE_API) -> dict[str, list[str]]:
    """What still holds (or could hold) quota in `namespace`: RayJobs, RayClusters and Workloads by kind."""
    found = {}
    for api, kind in ((RAY_API, "RayJob"), (RAY_API, "RayCluster"), (kueue_api, "Workload")):
        names = [o["metadata"]["name"] for o in server.list_objects(api, kind, namespace)]
        if names:
            found[kind] = names
    return found


def wait_for(
    probe: Callable[[], Optional[T]], timeout: float = 10.0, interval: float = 0.05, what: str = "condition"
) -> T:
    """Call `probe` until it returns something truthy; return that, or raise TimeoutError with the last value."""
    deadline = time.monotonic() + timeout
    last: Optional[T] = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
        time.sleep(interval)


def report_status(server: Any, api_version: str, kind: str, name: str, status: dict, namespace: str = "default") -> dict:
    """Replace an object's status as its controller reports it: read, change, write, again on a conflict.

    A controller whose status update conflicts reads the object again (KubeRay requeues
    its reconcile); a test standing in for it must too, since the simulated controllers
    (Kueue unsuspending a RayJob, say) may update the object between the read and the write.
    """
    from kubesim.errors import ApiError

    for _ in range(50):
        obj = server.get_object(api_version, kind, name, namespace)
        try:
            return server.update_status({**obj, "status": status})
        except ApiError as error:
            if error.code != 409:
                raise
    raise AssertionError(f"{kind} {namespace}/{name}: its status update kept conflicting")


# --------------------------------------------------------------------------
# A real Ray head on loopback
# --------------------------------------------------------------------------


def free_port() -> int:
    """A free loopback port chosen by the kernel (its ephemeral range, outside 10002-19999)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RayHead:
    """`ray start --head --block` in its own session, every port chosen free, workers on OS-chosen ports.

    `stop()` ends the whole process group it started (and only that), then
    removes its temporary directory. Usable as a context manager.
    """

    def __init__(self, num_cpus: int = 2, startup_timeout: float = 90.0) -> None:
        self.num_cpus = num_cpus
        self.startup_timeout = startup_timeout
        self.dashboard_port = 0
        self.session_id = 0  # the process group and session of `ray start`
        self._process: Optional[subprocess.Popen] = None
        self._temp_dir: Optional[str] = None

    @property
    def dashboard_address(self) -> str:
        return f"127.0.0.1:{self.dashboard_port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://{self.dashboard_address}"

    def start(self, attempts: int = 3) -> "RayHead":
        """Start the head; a start that fails (a port taken between choosing and binding it, a dashboard
        that never answers) is stopped whole and tried again on fresh ports, up to `attempts` times."""
        failures: list[str] = []
        for _ in range(attempts):
            try:
                return self._start_once()
            except (TimeoutError, RuntimeError) as exc:
                failures.append(str(exc))
        raise TimeoutError(f"the Ray head did not start in {attempts} attempts: " + " || ".join(failures))

    def _start_once(self) -> "RayHead":
        ray = Path(sys.executable).with_name("ray")
        self._temp_dir = tempfile.mkdtemp(prefix="rbray-", dir="/tmp")  # short: Ray puts unix sockets here
        self.dashboard_port = free_port()
        ports = {
            "port": free_port(),
            "ray-client-server-port": free_port(),
            "dashboard-agent-listen-port": free_port(),
            "dashboard-agent-grpc-port": free_port(),
            "runtime-env-agent-port": free_port(),
            "metrics-export-port": free_port(),
            "node-manager-port": free_port(),
            "object-manager-port": free_port(),
        }
        command = [
            str(ray),
            "start",
            "--head",
            "--block",
            "--disable-usage-stats",
            "--node-ip-address=127.0.0.1",
            "--dashboard-host=127.0.0.1",
            "--include-dashboard=true",
            f"--dashboard-port={self.dashboard_port}",
            f"--num-cpus={self.num_cpus}",
            "--num-gpus=0",
            "--min-worker-port=0",
            "--max-worker-port=0",
            f"--temp-dir={self._temp_dir}",
        ] + [f"--{flag}={port}" for flag, port in ports.items()]
        log_file = open(os.path.join(self._temp_dir, "ray-start.log"), "w")
        # Ray 2.52+ turns token authentication on for a head when ~/.ray/auth_token exists (a plain local
        # `ray.init()` writes one) or RAY_AUTH_MODE=token is inherited; this head is a test double of an
        # unauthenticated dashboard, so it says so explicitly.
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
        self._process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        log_file.close()
        self.session_id = self._process.pid
        try:
            wait_for(self._dashboard_up, timeout=self.startup_timeout, interval=0.3, what="the Ray dashboard")
        except (TimeoutError, RuntimeError) as exc:
            tail = self.log_tail()  # before stop() removes the temp dir with the logs
            self.stop()
            raise type(exc)(f"{exc}; {tail}") from exc
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self, lines: int = 8) -> str:
        """The last lines of `ray start`'s output and of the dashboard's log, for a failure message."""
        if not self._temp_dir:
            return "(no logs)"
        parts = []
        for path in [Path(self._temp_dir) / "ray-start.log", *Path(self._temp_dir).glob("session_latest/logs/dashboard.*")]:
            try:
                text = path.read_text(errors="replace").strip().splitlines()[-lines:]
            except OSError:
                continue
            parts.append(f"{path.name}: " + " | ".join(text))
        return " ;; ".join(parts) or "(empty logs)"

    def _dashboard_up(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(f"ray start exited with {self._process.returncode}; see {self._temp_dir}/ray-start.log")
        try:
            with urllib.request.urlopen(f"{self.dashboard_url}/api/version", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM the process group of `ray start`, SIGKILL what is left after 5 s; wait until it is gone."""
        process, self._process = self._process, None
        if process is not None:
            for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + grace
                while time.monotonic() < deadline:
                    process.poll()  # reap `ray start` itself so it does not linger as a zombie
                    if not self.leftover_pids(process.pid):
                        break
                    time.sleep(0.2)
                else:
                    continue
                break
            process.poll()
        if self._temp_dir:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    @staticmethod
    def leftover_pids(session_id: int) -> list[int]:
        """Processes still in the session that `ray start` led."""
        out = subprocess.run(["ps", "-o", "pid=", "-s", str(session_id)], capture_output=True, text=True).stdout
        return [int(pid) for pid in out.split()]

    def __enter__(self) -> "RayHead":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
