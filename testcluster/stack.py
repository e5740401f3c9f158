"""A Kubernetes cluster made of the real upstream programs, on loopback, for tests and by hand.

Why: raybridge's tests judge it against the real kube-apiserver (and etcd), the
scheduler and controller manager, kwok's nodes and pods, the KubeRay operator and
Kueue, built from their Go modules (programs.py). `Stack` starts them in order, each
waited for until it answers, installs the operators' CRDs and Kueue's webhooks from
their modules (kueue.py, kai.py, karpenter.py), and writes an admin kubeconfig.

How the parts reach each other without leaving loopback:
- the API server listens on 127.0.0.1 only; every client (the controllers, kwok, the
  operators, the tests) uses a kubeconfig with a client certificate of the stack's CA.
- kwok plays every node's kubelet: nodes get `127.0.0.1` as their InternalIP and kwok's
  own port as their kubelet port, and the API server is told to prefer the InternalIP,
  so `kubectl logs` and port-forward reach kwok on loopback. A port-forward to a pod's
  port 8265 is sent by kwok to the local Ray head's dashboard (a ClusterPortForward).
- Pods and Services get IPs of documentation ranges no route of the machine covers: nothing dials them.
- KubeRay dials head services through `HTTP_PROXY` (dashboard_proxy.py).
- Kueue's webhooks are called by `url: https://127.0.0.1:PORT/...` with the stack's CA,
  as Kueue's envtest does (`updateClientConfig` in its pkg/util/testing envtest).

What this does not do: no kubelet, no container runtime, no kube-proxy or DNS (nothing
in the stack resolves a Service), no aggregated API servers (Kueue's visibility API is
off: its server reads certificates from a fixed `/visibility` and is reached only
through a Service's endpoints), no leader election (one replica of each).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import yaml

from testcluster.dashboard_proxy import DashboardProxy
from testcluster.pki import Pki
from testcluster.processes import Process, StartError, free_port, http_ok, wait_until
from testcluster.programs import Program, ensure_built, program

__all__ = ["Stack", "StackOptions", "CORE", "OPERATORS", "completing_stage"]

#: The control plane and the nodes: always started.
CORE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
#: The operators a stack may add (`--with`).
OPERATORS = ("kuberay", "kueue", "karpenter", "kai")
#: The operators a stack starts unless told; the others only on request (Karpenter launches nodes for every pending pod).
DEFAULT_OPERATORS = ("kuberay", "kueue")
#: Ranges for pod and Service IPs (RFC 5737 documentation ranges, RFC 2544's benchmarking range): data only,
#: nothing dials them. A machine may sit on one (a sandbox's eth0 in 192.0.2.0/24), so the stack takes the
#: first two that no route of this machine covers (`_unrouted_ranges`).
ADDRESS_RANGES = ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "198.18.0.0/24", "198.19.0.0/24")
#: The controller manager's controllers a cluster of workloads needs: owners and namespaces cleaned up, service
#: accounts, the workload controllers, endpoints, node health and eviction, PDBs, ValidatingAdmissionPolicy status.
#: Left out what nothing here uses: volumes, cloud, certificates and bootstrap tokens, HPA, resource quota, IPAM.
CONTROLLERS = (
    "garbage-collector-controller", "namespace-controller", "serviceaccount-controller", "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller", "job-controller", "cronjob-controller",
    "replicaset-controller", "deployment-controller", "statefulset-controller", "daemonset-controller",
    "endpointslice-controller", "endpoints-controller", "pod-garbage-collector-controller", "ttl-after-finished-controller",
    "node-lifecycle-controller", "taint-eviction-controller", "disruption-controller", "validatingadmissionpolicy-status-controller",
)  # fmt: skip


@dataclass
class StackOptions:
    """What to start: the operators, the Ray head pods stand for, the nodes to create."""

    operators: tuple[str, ...] = DEFAULT_OPERATORS
    #: Releases other than the newest, by program: {"kuberay": "v1.5.0"}.
    versions: dict[str, str] = field(default_factory=dict)
    #: host:port of the Ray dashboard every head pod stands for (None: head pods answer nothing).
    ray_dashboard: Optional[str] = None
    #: Node objects (plain dicts) to create once the stack is up.
    nodes: list[dict] = field(default_factory=list)
    #: Start a local Ray head of the stack's own for the head pods (when `ray_dashboard` is not given).
    start_ray_head: bool = False
    #: Karpenter's instance types, in its kwok provider's file format (karpenter.py; None: its DEFAULT_INSTANCE_TYPES).
    karpenter_instance_types: Optional[list[dict]] = None
    #: More kwok Stages (plain dicts), after the stack's own: what a test's pods do on their nodes (`completing_stage`).
    stages: list[dict] = field(default_factory=list)
    #: Settings merged over Kueue's own default Configuration (e.g. {"manageJobsWithoutQueueName": True}).
    kueue_config: dict = field(default_factory=dict)
    progress: Callable[[str], None] = lambda line: None


def _module_dir(module_at_version: str, wrapper: Path) -> Path:
    """Where the Go module cache holds `module version`'s source (downloaded if missing)."""
    module, version = module_at_version.split()
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"], cwd=wrapper, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if out.returncode != 0:
        raise StartError(f"go mod download {module}@{version} failed: {out.stderr.strip() or out.stdout.strip()}")
    return Path(json.loads(out.stdout)["Dir"])


def _routed_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks this machine routes other than the default route (/proc/net/route: hex, little-endian)."""
    networks = []
    try:
        lines = Path("/proc/net/route").read_text().splitlines()[1:]
    except OSError:
        return networks
    for line in lines:
        fields = line.split()
        if len(fields) < 8 or fields[7] == "00000000":
            continue
        address, mask = (ipaddress.IPv4Address(int.from_bytes(bytes.fromhex(f), "little")) for f in (fields[1], fields[7]))
        networks.append(ipaddress.IPv4Network(f"{address}/{mask}", strict=False))
    return networks


def _unrouted_ranges(count: int = 2) -> list[str]:
    """The first `count` of ADDRESS_RANGES that no route of this machine overlaps (loopback aside)."""
    routed = _routed_networks()
    free = [r for r in ADDRESS_RANGES if not any(ipaddress.IPv4Network(r).overlaps(n) for n in routed)]
    if len(free) < count:
        raise StartError(f"every candidate range for pod and Service IPs is routed on this machine: {', '.join(ADDRESS_RANGES)}")
    return free[:count]


def _yaml_documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


class Stack:
    """The started programs, their temp directory and the admin kubeconfig; `stop()` ends all of them."""

    def __init__(self, options: Optional[StackOptions] = None, workdir: Optional[Path] = None) -> None:
        self.options = options or StackOptions()
        self._own_workdir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="testcluster-")) if workdir is None else workdir
        self.processes: list[Process] = []
        self.proxy: Optional[DashboardProxy] = None
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.api_port = 0
        self.pki: Optional[Pki] = None
        self.binaries: dict[str, Path] = {}
        self.programs: dict[str, Program] = {}
        self.pod_cidr, self.service_cidr = "", ""

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> "Stack":
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> "Stack":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Every process (the operators first, etcd last), the proxy, then the temp directory."""
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        reaper = getattr(self, "_reaper", None)
        if reaper is not None:
            reaper.kill()
            reaper.wait(10)
            self._reaper = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _start(self) -> None:
        say = self.options.progress
        wanted = list(CORE) + [name for name in OPERATORS if name in self.options.operators and name != "kai"]
        self.programs = {name: program(name, self.options.versions.get(name)) for name in wanted}
        if "kai" in self.options.operators:  # KAI is several programs (kai.py)
            from testcluster import kai

            self.programs.update(kai.kai_programs(self.options.versions.get("kai")))
        self.binaries = ensure_built(list(self.programs.values()), say)
        self.pki = Pki(self.workdir / "pki")
        self.pod_cidr, self.service_cidr = _unrouted_ranges()
        self._start_reaper()
        if self.options.start_ray_head and not self.options.ray_dashboard:
            self.options.ray_dashboard = self._start_ray_head()
            say(f"Ray head ready (dashboard http://{self.options.ray_dashboard}); every head pod stands for it")
        started = time.monotonic()
        self._start_etcd()
        self._start_apiserver()
        self._write_kubeconfigs()
        self._start_controller_manager()
        self._start_scheduler()
        self._start_kwok()
        say(f"control plane ready in {time.monotonic() - started:.1f} s (Kubernetes {self.programs['kube-apiserver'].version})")
        if "kuberay" in self.options.operators:
            self._start_kuberay()
            say(f"KubeRay {self.programs['kuberay'].version} ready")
        if "kueue" in self.options.operators:
            from testcluster.kueue import start_kueue

            start_kueue(self)
            say(f"Kueue {self.programs['kueue'].version} ready")
        if "karpenter" in self.options.operators:
            from testcluster import karpenter  # its own module, which uses this one

            karpenter.start(self)
            say(f"Karpenter {self.programs['karpenter'].version} ready (kwok cloud provider)")
        if "kai" in self.options.operators:
            from testcluster import kai  # its own module, which uses this one

            kai.start_kai(self)
            say(f"KAI scheduler {self.programs['kai-scheduler'].version} ready")
        self._create_nodes(self.options.nodes)

    # -- helpers ------------------------------------------------------------------------------
    def _process(self, name: str, argv: list[str], env: Optional[dict[str, str]] = None) -> Process:
        process = Process(name, argv, self.workdir / "logs" / f"{name}.log", env=env).start()
        self.processes.append(process)
        assert process.popen is not None
        with open(self.workdir / "process-groups", "a") as groups:  # read by the reaper
            groups.write(f"{process.popen.pid}\n")
        return process

    def _start_reaper(self) -> None:
        """A watcher, in a session of its own, that outlives this process: once this process is gone (even
        SIGKILLed, when no `stop()` runs) it kills every process group the stack started and removes the
        temp directory. `stop()` ends it first, having done the same itself."""
        if not self._own_workdir:
            return
        script = (
            'while kill -0 "$1" 2>/dev/null; do sleep 1; done; '
            'for g in $(cat "$2/process-groups" 2>/dev/null); do kill -KILL -- "-$g" 2>/dev/null; done; rm -rf "$2"'
        )
        self._reaper = subprocess.Popen(
            ["sh", "-c", script, "testcluster-reaper", str(os.getpid()), str(self.workdir)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    def _start_ray_head(self) -> str:
        """`ray start --head --block` with every port chosen free and its temp dir in the stack's; its dashboard."""
        ray = Path(sys.executable).with_name("ray")
        dashboard = free_port()
        ports = ("port", "ray-client-server-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                 "runtime-env-agent-port", "metrics-export-port", "node-manager-port", "object-manager-port")  # fmt: skip
        argv = [
            str(ray), "start", "--head", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
            "--dashboard-host=127.0.0.1", "--include-dashboard=true", f"--dashboard-port={dashboard}",
            "--num-cpus=4", "--num-gpus=0", "--min-worker-port=0", "--max-worker-port=0", f"--temp-dir={self.workdir / 'ray'}",
        ] + [f"--{flag}={free_port()}" for flag in ports]  # fmt: skip
        # Ray 2.52+ turns token auth on where ~/.ray/auth_token exists; the head pods here have none (FIDELITY.md).
        # Job drivers run `python ...` from PATH: this interpreter's first, as in the image a head pod runs.
        path = os.pathsep.join([str(ray.parent), os.environ.get("PATH", "")])
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled", PATH=path)
        self._process("ray-head", argv, env).wait_ready(lambda: http_ok(f"http://127.0.0.1:{dashboard}/api/version"), 120)
        return f"127.0.0.1:{dashboard}"

    def _tls(self, client: bool = True) -> ssl.SSLContext:
        assert self.pki is not None
        context = ssl.create_default_context(cafile=str(self.pki.ca_file))
        if client:
            context.load_cert_chain(self._admin.cert, self._admin.key)
        return context

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def api_client(self) -> Any:
        """An official-client ApiClient acting as the admin."""
        from kubernetes import config

        return config.new_client_from_config(str(self.kubeconfig))

    # -- the control plane -------------------------------------------------------------------
    def _start_etcd(self) -> None:
        port, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{port}"
        data = self.workdir / "etcd"
        argv = [
            str(self.binaries["etcd"]), "--name=testcluster", f"--data-dir={data}",
            f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=testcluster=http://127.0.0.1:{peer}", "--unsafe-no-fsync", "--log-level=warn",
        ]  # fmt: skip
        self._process("etcd", argv).wait_ready(lambda: http_ok(f"{self.etcd_url}/health", expect='"health":"true"'), 60)

    def _start_apiserver(self) -> None:
        assert self.pki is not None
        pki = self.pki
        serving = pki.serving("apiserver", ("127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
        self._admin = pki.client("admin", "testcluster-admin", ("system:masters",))
        kubelet_client = pki.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",))
        sa_key, sa_pub = pki.service_account_keys()
        self.api_port = free_port()
        argv = [
            str(self.binaries["kube-apiserver"]), f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}", f"--tls-cert-file={serving.cert}", f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={pki.ca_file}", "--authorization-mode=Node,RBAC", "--allow-privileged=true",
            f"--service-cluster-ip-range={self.service_cidr}", "--endpoint-reconciler-type=none",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_pub}", f"--service-account-signing-key-file={sa_key}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={kubelet_client.cert}", f"--kubelet-client-key={kubelet_client.key}",
            "--profiling=false", "--v=1",
        ]  # fmt: skip
        self._sa_key = sa_key
        context = self._tls()
        self._process("kube-apiserver", argv).wait_ready(lambda: http_ok(f"{self.server}/readyz", context, expect="ok"), 120)

    def _write_kubeconfigs(self) -> None:
        assert self.pki is not None
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "testcluster", "cluster": {"server": self.server, "certificate-authority-data": self.pki.ca_data}}],
            "users": [{"name": "admin", "user": {
                "client-certificate-data": self._admin.cert_data(), "client-key-data": self._admin.key_data(),
            }}],  # fmt: skip
            "contexts": [{"name": "testcluster", "context": {"cluster": "testcluster", "user": "admin", "namespace": "default"}}],
            "current-context": "testcluster",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)

    def _start_controller_manager(self) -> None:
        assert self.pki is not None
        port = free_port()
        argv = [
            str(self.binaries["kube-controller-manager"]), f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", "--leader-elect=false",
            f"--root-ca-file={self.pki.ca_file}", f"--service-account-private-key-file={self._sa_key}",
            f"--service-cluster-ip-range={self.service_cidr}", "--cluster-name=testcluster", "--v=1",
            f"--controllers={','.join(CONTROLLERS)}",
        ]  # fmt: skip
        context = self._tls(client=False)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # its self-signed serving certificate
        self._process("kube-controller-manager", argv).wait_ready(lambda: http_ok(f"https://127.0.0.1:{port}/healthz", context, expect="ok"), 60)

    def _start_scheduler(self) -> None:
        port = free_port()
        argv = [
            str(self.binaries["kube-scheduler"]), f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", "--leader-elect=false", "--v=1",
        ]  # fmt: skip
        context = self._tls(client=False)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        self._process("kube-scheduler", argv).wait_ready(lambda: http_ok(f"https://127.0.0.1:{port}/healthz", context, expect="ok"), 60)

    def _kwok_config(self) -> Path:
        """kwok's stages from its module (node-fast, heartbeat with lease, pod-fast without pod-complete),
        and the port-forward of head pods' dashboard port to the local Ray head."""
        kwok = self.programs["kwok"]
        source = _module_dir(kwok.upstream_module(), kwok.module_dir) / "kustomize" / "stage"
        stage_files = [
            source / "node" / "fast" / "node-initialize.yaml",
            source / "node" / "heartbeat-with-lease" / "node-heartbeat-with-lease.yaml",
            source / "pod" / "fast" / "pod-ready.yaml",
            source / "pod" / "fast" / "pod-delete.yaml",
        ]
        documents = [doc for path in stage_files for doc in _yaml_documents(path)]
        if "kai" in self.options.operators:  # the node-side step of KAI's GPU reservation pods (kai.py)
            from testcluster import kai

            documents.append(kai.reservation_gpu_stage())
        documents += [copy.deepcopy(stage) for stage in self.options.stages]
        if self.options.ray_dashboard:
            host, port = self.options.ray_dashboard.rsplit(":", 1)
            documents.append({
                "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterPortForward", "metadata": {"name": "ray-dashboard"},
                "spec": {"forwards": [{"ports": [8265], "target": {"address": host, "port": int(port)}}]},
            })  # fmt: skip
        path = self.workdir / "kwok.yaml"
        path.write_text(yaml.safe_dump_all(documents))
        return path

    def _start_kwok(self) -> None:
        assert self.pki is not None
        port = free_port()
        serving = self.pki.serving("kwok", ("127.0.0.1", "localhost"))
        argv = [
            str(self.binaries["kwok"]), f"--kubeconfig={self.kubeconfig}", f"--config={self._kwok_config()}",
            "--manage-all-nodes=true", "--node-ip=127.0.0.1", f"--node-port={port}", f"--server-address=127.0.0.1:{port}",
            f"--tls-cert-file={serving.cert}", f"--tls-private-key-file={serving.key}", f"--cidr={self.pod_cidr}",
            "--node-lease-duration-seconds=40",
        ]  # fmt: skip
        context = self._tls(client=False)
        self._process("kwok", argv).wait_ready(lambda: http_ok(f"https://127.0.0.1:{port}/healthz", context), 60)

    # -- objects ------------------------------------------------------------------------------
    def apply(self, documents: Iterable[dict]) -> None:
        """Create each object (server-side apply, field manager `testcluster`)."""
        from kubernetes import dynamic

        api = self.api_client()
        try:
            client = dynamic.DynamicClient(api)
            for document in documents:
                resource = client.resources.get(api_version=document["apiVersion"], kind=document["kind"])
                client.server_side_apply(
                    resource, body=document, name=document["metadata"]["name"],
                    namespace=document["metadata"].get("namespace"), field_manager="testcluster", force_conflicts=True,
                )  # fmt: skip
        finally:
            api.close()

    def _install_crds(self, crds: list[dict]) -> None:
        from kubernetes import client

        api = self.api_client()
        try:
            extensions = client.ApiextensionsV1Api(api)
            for crd in crds:
                extensions.create_custom_resource_definition(crd, _preload_content=False)

            def established() -> bool:
                for crd in crds:
                    found = json.loads(extensions.read_custom_resource_definition(crd["metadata"]["name"], _preload_content=False).data)
                    conditions = {c["type"]: c["status"] for c in (found.get("status") or {}).get("conditions") or []}
                    if conditions.get("Established") != "True":
                        return False
                return True

            wait_until(established, 60, "the CRDs were not established")
        finally:
            api.close()

    def _create_nodes(self, nodes: list[dict]) -> None:
        """Create `nodes` as kwok nodes: their status conditions dropped, so kwok initializes them
        (addresses, kubelet endpoint, Ready) as a kubelet registering would; capacity and labels kept."""
        if not nodes:
            return
        from kubernetes import client

        api = self.api_client()
        try:
            core = client.CoreV1Api(api)
            for node in nodes:
                body = copy.deepcopy(node)
                body.setdefault("apiVersion", "v1")
                body.setdefault("kind", "Node")
                body.get("status", {}).pop("conditions", None)
                body["metadata"] = {k: v for k, v in body["metadata"].items() if k in ("name", "labels", "annotations")}
                core.create_node(body, _preload_content=False)

            def ready() -> bool:
                listed = json.loads(core.list_node(_preload_content=False).data)["items"]
                status = {n["metadata"]["name"]: {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])} for n in listed}
                return all(status.get(n["metadata"]["name"], {}).get("Ready") == "True" for n in nodes)

            wait_until(ready, 60, "the nodes did not become Ready")
        finally:
            api.close()

    # -- the operators ------------------------------------------------------------------------
    def _start_kuberay(self) -> None:
        kuberay = self.programs["kuberay"]
        source = _module_dir(kuberay.upstream_module(), kuberay.module_dir)
        self._install_crds([doc for path in sorted((source / "config" / "crd" / "bases").glob("*.yaml")) for doc in _yaml_documents(path)])
        self.proxy = DashboardProxy(self._dashboard_backend()).start()
        probe, metrics = free_port(), free_port()
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), HTTP_PROXY=self.proxy.url, http_proxy=self.proxy.url, NO_PROXY="", no_proxy="")
        env.pop("HTTPS_PROXY", None)
        argv = [
            str(self.binaries["kuberay"]), f"--metrics-addr=127.0.0.1:{metrics}", f"--health-probe-bind-address=127.0.0.1:{probe}",
            "--enable-leader-election=false", "--log-stdout-encoder=console",
        ]  # fmt: skip
        self._process("kuberay", argv, env).wait_ready(lambda: http_ok(f"http://127.0.0.1:{probe}/readyz"), 60)
        self.apply(kuberay_operator_record(kuberay.version))

    def _dashboard_backend(self) -> tuple[str, int]:
        if not self.options.ray_dashboard:
            return ("127.0.0.1", 9)  # discard: nothing answers, as a head pod without a head
        host, port = self.options.ray_dashboard.rsplit(":", 1)
        return host, int(port)

#: Where the KubeRay operator's Deployment is recorded (the namespace its Helm chart's docs install it in).
KUBERAY_NAMESPACE = "kuberay-system"


def kuberay_operator_record(version: str) -> list[dict]:
    """The Deployment KubeRay's Helm chart creates for the operator this stack runs as a process, with no replicas:
    what a client reads to tell the operator's release (its labels and image, as
    helm-chart/kuberay-operator/templates/deployment.yaml and _helpers.tpl "kuberay-operator.labels" at v1.6.1 write
    them). No pod of it runs; the process is the operator."""
    labels = {
        "app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/instance": "kuberay-operator",
        "app.kubernetes.io/version": version, "app.kubernetes.io/managed-by": "Helm",
        "helm.sh/chart": f"kuberay-operator-{version.removeprefix('v')}",
    }  # fmt: skip
    selector = {"app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/instance": "kuberay-operator"}
    container = {"name": "kuberay-operator", "image": f"quay.io/kuberay/operator:{version}", "command": ["/manager"]}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUBERAY_NAMESPACE}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "kuberay-operator", "namespace": KUBERAY_NAMESPACE, "labels": labels},
         "spec": {"replicas": 0, "selector": {"matchLabels": selector},
                  "template": {"metadata": {"labels": selector}, "spec": {"containers": [container]}}}},
    ]  # fmt: skip


def completing_stage(name: str, match_labels: dict[str, str]) -> dict:
    """A kwok Stage: a running pod with `match_labels` completes at once, exit code 0 (phase Succeeded), as a pod whose
    one container runs `true` with `restartPolicy: Never` does on a node. kwok's own pod-complete Stage
    (kustomize/stage/pod/fast/pod-complete.yaml at v0.8.0) does the same for Job pods only."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchLabels": dict(match_labels),
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                ],
            },
            "next": {"statusTemplate": _COMPLETED_STATUS},
        },
    }  # fmt: skip


_COMPLETED_STATUS = """{{ $now := Now }}
containerStatuses:
{{ range $index, $item := .spec.containers }}
- image: {{ $item.image | Quote }}
  name: {{ $item.name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Succeeded
"""
