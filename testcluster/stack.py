"""A Kubernetes cluster made of the real upstream programs, on loopback, for tests and by hand.

Why: raybridge's tests judge it against the real kube-apiserver (and etcd), the
scheduler and controller manager, kwok's nodes and pods, the KubeRay operator and
Kueue, built from their Go modules (programs.py). `Stack` starts them in order, each
waited for until it answers, installs the operators' CRDs and Kueue's webhooks from
their modules (kueue.py, kai.py, karpenter.py), and writes an admin kubeconfig.

How the parts reach each other without leaving loopback, and keep out every other user of the machine:
- etcd listens on 127.0.0.1 with TLS and lets in only clients (the API server) and peers with a certificate of the
  stack's CA (`--client-cert-auth`, `--peer-client-cert-auth`).
- the API server listens on 127.0.0.1 only; every client (the controllers, kwok, the
  operators, the tests) uses a kubeconfig with a client certificate of the stack's CA.
- kwok plays every node's kubelet (kwok.py), in a network namespace of its own (netjail.py): nodes get `127.0.0.1`
  as their InternalIP and the kubelet gate's port as their kubelet port (kubelet_gate.py: TLS that lets through the
  API server's kubelet client certificate alone), and the API server is told to prefer the InternalIP, so
  `kubectl logs` and port-forward reach kwok as the API server asks for them, and nothing else does. A port-forward
  to a pod's port 8265 is sent by kwok to the stack's door to the Ray head (a ClusterPortForward to a port inside
  its namespace that leads to the door's Unix socket).
- the door to the Ray head (head_front.py) is a Unix socket in the stack's private directory that lets in kwok's
  namespace and this process (the dashboard proxy) alone: to the head given (`ray_dashboard`), or to a head of the
  stack's own (ray_head.py: every component on loopback, no metrics servers, Ray's token authentication on),
  adding its token.
- KubeRay dials head services through `HTTP_PROXY` (dashboard_proxy.py), which serves the operator's process alone.
- Programs that listen on every interface with no flag to say otherwise (Karpenter, KAI's scheduler, admission and
  node-scale-adjuster) run in network namespaces of their own too; the API server reaches a webhook among them on a
  loopback port of the stack's that leads in (`expose`), the stack their health through Unix sockets.
- Pods and Services get IPs of documentation ranges no route of the machine covers: nothing dials them.
- Kueue's webhooks are called by `url: https://127.0.0.1:PORT/...` with the stack's CA,
  as Kueue's envtest does (`updateClientConfig` in its pkg/util/testing envtest).

- The aggregation layer is on (the front-proxy flags, as kubeadm sets them): Kueue's visibility API, when a stack
  turns on its VisibilityOnDemand gate, is an APIService whose Service is an ExternalName for 127.0.0.1 (kueue.py).

What this does not do: no kubelet, no container runtime, no kube-proxy or DNS (nothing
in the stack resolves a Service), no leader election (one replica of each), nothing that keeps out
the stack's own user (who holds its keys anyway).
"""

from __future__ import annotations

import contextlib
import copy
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Union

import yaml

from testcluster.dashboard_proxy import DashboardProxy
from testcluster.fault_proxy import FaultProxy
from testcluster.head_front import HeadFront
from testcluster.kubelet_gate import KubeletGate
from testcluster.netjail import Relay, jail_argv, unix_connect, unix_listener
from testcluster.pki import CertPair, Pki
from testcluster.processes import Process, StartError, free_port, http_ok, stop_all, wait_until, with_go_runtime_defaults
from testcluster.programs import Program, ensure_built, program
from testcluster.sources import CRDS_ONLY, release_crds
from testcluster.ray_head import RAY_HEAD_PROCESS, RayHead, end_all_but_the_gcs, launch_ray_head, wait_for_ray_head

__all__ = ["Stack", "StackOptions", "CORE", "OPERATORS", "completing_stage"]

#: The control plane and the nodes: always started.
CORE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
#: Stopped after every other program, which may need them to shut down cleanly, one after the other in this order
#: (Stack.stop): the API server writes to etcd as it shuts down (its endpoint lease).
STOPPED_LAST = ("kube-apiserver", "etcd")
#: The operators a stack may add (`--with`).
OPERATORS = ("kuberay", "kueue", "karpenter", "kai")
#: The name of the API server's client certificate for aggregated API servers (the one name they believe headers of).
FRONT_PROXY_CLIENT = "front-proxy-client"
#: The operators a stack starts unless told; the others only on request (Karpenter launches nodes for every pending pod).
DEFAULT_OPERATORS = ("kuberay", "kueue")
#: Ranges for pod and Service IPs (RFC 5737 documentation ranges, RFC 2544's benchmarking range): data only,
#: nothing dials them. A machine may sit on one (a sandbox's eth0 in 192.0.2.0/24), so the stack takes the
#: first two that no route of this machine covers (`_unrouted_ranges`).
ADDRESS_RANGES = ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "198.18.0.0/24", "198.19.0.0/24")
#: The kernel's limit on a Unix socket's path (sun_path less its terminating zero).
UNIX_SOCKET_PATH_MAX = 107
#: The controller manager's controllers a cluster of workloads needs: owners and namespaces cleaned up, service
#: accounts, the workload controllers, endpoints, node health and eviction, PDBs, ValidatingAdmissionPolicy status.
#: Left out what nothing here uses: volumes, cloud, certificates and bootstrap tokens, HPA, resource quota, IPAM.
CONTROLLERS = (
    "garbage-collector-controller", "namespace-controller", "serviceaccount-controller", "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller", "job-controller", "cronjob-controller",
    "replicaset-controller", "deployment-controller", "statefulset-controller", "daemonset-controller",
    "endpointslice-controller", "endpoints-controller", "pod-garbage-collector-controller", "ttl-after-finished-controller",
    "node-lifecycle-controller", "taint-eviction-controller", "disruption-controller", "validatingadmissionpolicy-status-controller",
    # DRA: a pod's ResourceClaim made from its ResourceClaimTemplate (kubernetes@v1.34.4
    # cmd/kube-controller-manager/names/controller_names.go ResourceClaimController); without it such a pod stays
    # unschedulable ("ResourceClaim not created yet").
    "resourceclaim-controller",
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
    #: Kueue feature gates set beside the stack's own (e.g. {"LocalQueueDefaulting": False} on a release that has the gate).
    kueue_feature_gates: dict[str, bool] = field(default_factory=dict)
    #: KubeRay talks to the API server through a fault proxy of its own (`Stack.kuberay_faults`): an operator whose
    #: requests a test slows or refuses, the real one (its status write of one RayJob 2 s late, say).
    kuberay_through_fault_proxy: bool = False
    #: Projects (of CRDS_ONLY) whose CRDs are installed with no operator of theirs running, before the operators start:
    #: ("kuberay",) for a MultiKueue manager, where Kueue copies each RayJob to a worker cluster and nothing runs it
    #: here; ("kai", "autoscaler") for objects a test writes as KAI or the cluster autoscaler would have left them.
    crds_only: tuple[str, ...] = ()
    progress: Callable[[str], None] = lambda line: None



#: The aggregated discovery document (GET /apis) as client-go asks for it.
AGGREGATED_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _discovery_serves(api: Any, crds: list[dict]) -> bool:
    """Whether the API server's discovery lists every served version of each CRD. `Established` comes first: the API
    server's discovery controller adds a CRD's group versions to discovery on its own sync afterwards
    (apiextensions-apiserver pkg/apiserver/customresource_discovery_controller.go), and an operator started in between
    finds no such kind and exits (Kueue v0.17.0 did: "setting index on queue for Workload: no matches for kind
    \"Workload\" in version \"kueue.x-k8s.io/v1beta2\""). envtest waits the same way (controller-runtime
    pkg/envtest/crd.go `WaitForCRDs`, through discovery)."""
    answer = api.rest_client.pool_manager.request("GET", f"{api.configuration.host}/apis", headers={"Accept": AGGREGATED_DISCOVERY}, timeout=10.0)
    if answer.status != 200:
        return False
    listed = json.loads(answer.data)
    served = {(group["metadata"]["name"], version["version"], resource["resource"])
              for group in listed.get("items") or [] for version in group.get("versions") or [] for resource in version.get("resources") or []}
    wanted = {(crd["spec"]["group"], version["name"], crd["spec"]["names"]["plural"])
              for crd in crds for version in crd["spec"]["versions"] if version.get("served", True)}
    return wanted <= served


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



class Stack:
    """The started programs, their temp directory and the admin kubeconfig; `stop()` ends all of them."""

    def __init__(self, options: Optional[StackOptions] = None, workdir: Optional[Path] = None) -> None:
        self.options = options or StackOptions()
        self._own_workdir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="testcluster-")) if workdir is None else workdir
        self.processes: list[Process] = []
        #: The programs still running after the grace when the stack stopped (killed), once it has.
        self.killed_at_stop: list[str] = []
        self.proxy: Optional[DashboardProxy] = None
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        #: The Unix sockets that join the stack to the programs in network namespaces of their own (netjail.py).
        self.sockets = self.workdir / "sockets"
        self.api_port = 0
        self.etcd_url = ""
        self.pki: Optional[Pki] = None
        #: The Ray head the stack started (`StackOptions.start_ray_head`; ray_head.py), and the door every head pod
        #: leads to.
        self.ray_head: Optional[RayHead] = None
        self.head_door: Optional[HeadFront] = None
        self.kubelet_gate: Optional[KubeletGate] = None
        #: The fault proxy between KubeRay and the API server (`StackOptions.kuberay_through_fault_proxy`).
        self.kuberay_faults: Optional[FaultProxy] = None
        self._relays: list[Relay] = []
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
        """Every process but the API server and etcd at once (the Ray head too, all but its GCS first:
        `ray_head.end_all_but_the_gcs`; `processes.stop_all`, bounded whatever hangs), then the proxies, the doors and
        relays, then the API server, then etcd, then the temp directory. `killed_at_stop` names the programs that
        outran the grace.

        The API server goes last because the operators shut down through it: Kueue, stopped together with it, and the
        API server waited on each other for the whole grace; so did the API server and the relays that join it to the
        programs in namespaces of their own, and, under load, the API server and an etcd stopped with it. Each
        stack's stop took 10 s or more and a SIGKILL or two; in this order, 2 to 3 s and none."""
        for process in self.processes:
            if process.name == RAY_HEAD_PROCESS:
                end_all_but_the_gcs(process)
        self.killed_at_stop = stop_all([p for p in reversed(self.processes) if p.name not in STOPPED_LAST])
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        if self.kuberay_faults is not None:
            self.kuberay_faults.stop()
            self.kuberay_faults = None
        for door in [*self._relays, self.kubelet_gate, self.head_door]:
            if door is not None:
                door.close()
        self._relays.clear()
        self.kubelet_gate = self.head_door = None
        self.ray_head = None
        for name in STOPPED_LAST:  # the API server, then etcd: on its way out it removes its endpoint lease there
            self.killed_at_stop += stop_all([p for p in self.processes if p.name == name])
        self.processes.clear()
        reaper = getattr(self, "_reaper", None)
        if reaper is not None:
            reaper.kill()
            reaper.wait(10)
            self._reaper = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _start(self) -> None:
        say = self.options.progress
        if set(self.options.crds_only) - set(CRDS_ONLY):
            raise StartError(f"crds_only: the CRDs installed without an operator are {', '.join(CRDS_ONLY)}'s, not {', '.join(sorted(set(self.options.crds_only) - set(CRDS_ONLY)))}")
        wanted = list(CORE) + [name for name in OPERATORS if name in (*self.options.operators, *self.options.crds_only) and name != "kai"]
        self.programs = {name: program(name, self.options.versions.get(name)) for name in wanted}
        if "kai" in self.options.operators:  # KAI is several programs (kai.py)
            from testcluster import kai

            self.programs.update(kai.kai_programs(self.options.versions.get("kai")))
        self.binaries = ensure_built(list(self.programs.values()), say)
        self.pki = Pki(self.workdir / "pki")
        self.pod_cidr, self.service_cidr = _unrouted_ranges()
        self._make_socket_dir()
        self._start_reaper()
        head = self._launch_ray_head()  # it starts while the control plane does
        started = time.monotonic()
        self._start_etcd()
        self._start_apiserver()
        self._write_kubeconfigs()
        self._start_controller_manager()
        self._start_scheduler()
        self._open_head_door(head)
        from testcluster.kwok import start_kwok

        start_kwok(self)
        say(f"control plane ready in {time.monotonic() - started:.1f} s (Kubernetes {self.programs['kube-apiserver'].version})")
        for project in [p for p in self.options.crds_only if p not in self.options.operators]:  # before Kueue looks for them
            self.install_crds(release_crds(project, self.programs, self.options.versions))
            say(f"{project}'s CRDs installed (no operator)")
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

    @contextlib.contextmanager
    def paused(self, name: str) -> Iterator[Process]:
        """One program held back (SIGSTOP to its process group: it reconciles nothing and answers no webhook) while
        the block runs, then resumed, whatever the block raised: an operator that is slow or stuck, for real."""
        [process] = [p for p in self.processes if p.name == name]
        process.pause()
        try:
            yield process
        finally:
            process.resume()

    # -- helpers ------------------------------------------------------------------------------
    def start_process(self, name: str, argv: list[str], env: Optional[dict[str, str]] = None) -> Process:
        process = Process(name, argv, self.workdir / "logs" / f"{name}.log", env=with_go_runtime_defaults(env)).start()
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

    def _make_socket_dir(self) -> None:
        """The private directory of the stack's Unix sockets; its longest path must fit the kernel's limit."""
        longest = self.sockets / "kai-nodescaleadjuster-health.sock"
        if len(str(longest)) > UNIX_SOCKET_PATH_MAX:
            raise StartError(f"the stack's directory {self.workdir} is too long for its Unix sockets ({len(str(longest))} > {UNIX_SOCKET_PATH_MAX} bytes): set TMPDIR to a shorter one")
        self.sockets.mkdir(mode=0o700)

    def _launch_ray_head(self) -> Optional[Process]:
        """A head of the stack's own, when asked for and no other is given (ray_head.py: loopback only, no metrics
        servers, token authentication), started now and waited for by `_open_head_door`."""
        if not self.options.start_ray_head or self.options.ray_dashboard:
            return None
        return launch_ray_head(self)

    def _open_head_door(self, head: Optional[Process]) -> None:
        """The door every head pod's dashboard port leads to (a Unix socket: kwok's namespace and this process's
        dashboard proxy alone may use it): to `StackOptions.ray_dashboard` as it is, or to the stack's own `head`,
        adding its token."""
        upstream, token = self.options.ray_dashboard, None
        if head is not None:
            self.ray_head = wait_for_ray_head(self, head)
            upstream, token = self.ray_head.dashboard, self.ray_head.token()
            self.options.progress(f"Ray head ready ({upstream}, token authentication, its token in {self.ray_head.token_path}); every head pod stands for it")
        if upstream:
            self.head_door = HeadFront(upstream, token, self.sockets / "ray-head.sock")
            self.head_door.admitted.add(os.getpid())

    def jailed(self, name: str, argv: list[str], env: Optional[dict[str, str]] = None,
               serves: Optional[dict[Path, int]] = None, dials: Optional[dict[int, Path]] = None) -> Process:  # fmt: skip
        """`argv` started as `name` in a network namespace of its own (netjail.py): the API server at the
        kubeconfig's address, `dials` (inside port -> Unix socket outside) and `serves` (Unix socket made -> inside
        port) join it to the stack; nothing else reaches it or leaves it."""
        joined = {self.api_port: self.sockets / "apiserver.sock", **(dials or {})}
        return self.start_process(name, jail_argv(argv, joined, serves or {}), env)

    def expose(self, path: Path) -> int:
        """A port on 127.0.0.1 that leads to the Unix socket `path` (a jailed program's webhook, for the API server)."""
        relay = Relay(socket.create_server(("127.0.0.1", 0)), lambda: unix_connect(path), name=f"expose-{path.name}")
        self._relays.append(relay)
        return int(relay.listener.getsockname()[1])

    def _tls(self, client: bool = True, identity: Optional[CertPair] = None) -> ssl.SSLContext:
        """The stack's CA; with `client`, the admin's certificate (or `identity`'s) to show."""
        assert self.pki is not None
        context = ssl.create_default_context(cafile=str(self.pki.ca_file))
        if client:
            pair = identity or self._admin
            context.load_cert_chain(pair.cert, pair.key)
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
        """etcd on loopback, TLS on its client and peer ports, every client (the API server) and peer known by a
        certificate of the stack's CA (etcd's --client-cert-auth, --peer-client-cert-auth)."""
        assert self.pki is not None
        port, peer = free_port(), free_port()
        self.etcd_url = f"https://127.0.0.1:{port}"
        member = self.pki.serving("etcd", ("127.0.0.1", "localhost"), peer=True)
        self._etcd_client = self.pki.client("apiserver-etcd-client", "kube-apiserver-etcd-client")
        ca = self.pki.ca_file
        argv = [
            str(self.binaries["etcd"]), "--name=testcluster", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=https://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=https://127.0.0.1:{peer}",
            f"--initial-cluster=testcluster=https://127.0.0.1:{peer}", "--unsafe-no-fsync", "--log-level=warn",
            f"--cert-file={member.cert}", f"--key-file={member.key}", "--client-cert-auth", f"--trusted-ca-file={ca}",
            f"--peer-cert-file={member.cert}", f"--peer-key-file={member.key}", "--peer-client-cert-auth", f"--peer-trusted-ca-file={ca}",
        ]  # fmt: skip
        context = self._tls(identity=self._etcd_client)
        self.start_process("etcd", argv).wait_ready(lambda: http_ok(f"{self.etcd_url}/health", context, expect='"health":"true"'), 60)

    def _start_apiserver(self) -> None:
        assert self.pki is not None
        pki = self.pki
        serving = pki.serving("apiserver", ("127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
        self._admin = pki.client("admin", "testcluster-admin", ("system:masters",))
        kubelet_client = pki.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",))
        front_proxy = pki.client("front-proxy-client", FRONT_PROXY_CLIENT)
        sa_key, sa_pub = pki.service_account_keys()
        self.api_port = free_port()
        argv = [
            str(self.binaries["kube-apiserver"]), f"--etcd-servers={self.etcd_url}", f"--etcd-cafile={pki.ca_file}",
            f"--etcd-certfile={self._etcd_client.cert}", f"--etcd-keyfile={self._etcd_client.key}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}", f"--tls-cert-file={serving.cert}", f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={pki.ca_file}", "--authorization-mode=Node,RBAC", "--allow-privileged=true",
            f"--service-cluster-ip-range={self.service_cidr}", "--endpoint-reconciler-type=none",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_pub}", f"--service-account-signing-key-file={sa_key}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={kubelet_client.cert}", f"--kubelet-client-key={kubelet_client.key}",
            f"--kubelet-certificate-authority={pki.ca_file}",
            # The aggregation layer, as kubeadm sets it: an APIService's server (kueue.py) believes the X-Remote-* user
            # of this CA's FRONT_PROXY_CLIENT (read from kube-system/extension-apiserver-authentication).
            f"--requestheader-client-ca-file={pki.ca_file}", f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={front_proxy.cert}", f"--proxy-client-key-file={front_proxy.key}",
            "--profiling=false", "--v=1",
        ]  # fmt: skip
        self._sa_key = sa_key
        context = self._tls()
        self.start_process("kube-apiserver", argv).wait_ready(lambda: http_ok(f"{self.server}/readyz", context, expect="ok"), 120)
        # The jailed programs' way to the API server (netjail.py): its address inside each namespace leads here.
        api = ("127.0.0.1", self.api_port)
        self._relays.append(Relay(unix_listener(self.sockets / "apiserver.sock"), lambda: socket.create_connection(api, timeout=10), name="apiserver-relay"))

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
        self.start_process("kube-controller-manager", argv).wait_ready(lambda: http_ok(f"https://127.0.0.1:{port}/healthz", context, expect="ok"), 60)

    def _start_scheduler(self) -> None:
        port = free_port()
        argv = [
            str(self.binaries["kube-scheduler"]), f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", "--leader-elect=false", "--v=1",
        ]  # fmt: skip
        context = self._tls(client=False)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        self.start_process("kube-scheduler", argv).wait_ready(lambda: http_ok(f"https://127.0.0.1:{port}/healthz", context, expect="ok"), 60)

    # -- objects ------------------------------------------------------------------------------
    def apply(self, documents: Iterable[dict]) -> None:
        """Create each object (server-side apply, field manager `testcluster`)."""
        from testcluster.client import dynamic_client

        api = self.api_client()
        try:
            client = dynamic_client(api, self.workdir / "discovery-cache.json")
            for document in documents:
                resource = client.resources.get(api_version=document["apiVersion"], kind=document["kind"])
                client.server_side_apply(
                    resource, body=document, name=document["metadata"]["name"],
                    namespace=document["metadata"].get("namespace"), field_manager="testcluster", force_conflicts=True,
                )  # fmt: skip
        finally:
            api.close()

    def install_crds(self, crds: list[dict]) -> None:
        from kubernetes import client

        api = self.api_client()
        try:
            extensions = client.ApiextensionsV1Api(api)
            for crd in crds:
                extensions.create_custom_resource_definition(crd, _preload_content=False)
            # Discovery lists a CRD's versions only once it is Established (customresource_discovery_controller.go
            # sync skips the others), so one aggregated document says both; reading each CRD back until Established
            # had the API server encode every CRD, some of them megabytes, at each poll of every stack's start.
            wait_until(lambda: _discovery_serves(api, crds), 60, "the CRDs were not established and in the API server's discovery")
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
        self.install_crds(release_crds("kuberay", self.programs, self.options.versions))
        self.proxy = DashboardProxy(self._dashboard_backend()).start()
        probe, metrics = free_port(), free_port()
        kubeconfig = self.kubeconfig
        if self.options.kuberay_through_fault_proxy:
            assert self.pki is not None
            self.kuberay_faults = FaultProxy.in_front_of(self.kubeconfig, self.pki.directory, self.workdir / "kuberay-fault-proxy").start()
            kubeconfig = self.kuberay_faults.write_kubeconfig(self.kubeconfig, self.workdir / "kuberay.kubeconfig")
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), HTTP_PROXY=self.proxy.url, http_proxy=self.proxy.url, NO_PROXY="", no_proxy="")
        env.pop("HTTPS_PROXY", None)
        argv = [
            str(self.binaries["kuberay"]), f"--metrics-addr=127.0.0.1:{metrics}", f"--health-probe-bind-address=127.0.0.1:{probe}",
            "--enable-leader-election=false", "--log-stdout-encoder=console",
        ]  # fmt: skip
        process = self.start_process("kuberay", argv, env)
        assert process.popen is not None
        self.proxy.serve_only(process.popen.pid)
        process.wait_ready(lambda: http_ok(f"http://127.0.0.1:{probe}/readyz"), 60)
        self.apply(kuberay_operator_record(kuberay.version))

    def _dashboard_backend(self) -> Union[tuple[str, int], Path]:
        if self.head_door is None or self.head_door.unix_path is None:
            return ("127.0.0.1", 9)  # discard: nothing answers, as a head pod without a head
        return self.head_door.unix_path

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


# Re-exported for the tests and benchmarks that build their stages with it (its home is kwok.py).
from testcluster.kwok import completing_stage  # noqa: E402,F401
