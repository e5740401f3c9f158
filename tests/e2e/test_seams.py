"""The seams between raybridge and the Kubernetes API: every command, every kind of fault, through the CLI.

Why: a real API server (or the proxy before it) throttles, fails for a moment,
drops connections, stops answering, or answers something that is not a
Kubernetes object. For each (command, fault) row the fault proxy in front of
the real kube-apiserver (testcluster/fault_proxy.py, the `fault_proxy`
fixture) breaks one chosen request of the CLI's, and the row says what the
user must see: the command's normal answer after a retry, or exit 3 with one
`error:` line naming the server and what was being fetched, within the bound,
never exit 1 or a traceback. The controllers (KubeRay, Kueue) talk to the API
server directly, so no fault is spent on them.

What it deliberately does not do: run a Ray job. Every RayJob is queued in a
LocalQueue whose ClusterQueue a holder Workload fills, so Kueue keeps it
suspended and KubeRay starts nothing; `submit` rows end before a Ray job is
needed (a missing LocalQueue, or no admission within `--timeout`). Also here: the target seam
(a `--kubeconfig` that does not exist, `KUBECONFIG` with missing files, a
`KUBECONFIG` list whose files only together make a configuration).
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest
import yaml

from tests.helpers import cli_env, run_cli
from tests.builders import rayjob_manifest
from tests.cluster_state import make_cluster_queue, make_local_queue
from tests.waits import wait_for
from testcluster.fault_proxy import HTML_ERROR_PAGE

NS = f"seams-{uuid.uuid4().hex[:6]}"

#: One worker runs the module, and test_unreachable.py after it (one group): their tests mostly wait out a client's
#: timeout or retry, and dealt out to every worker at once they left the two cores half idle for a minute (as two
#: groups, dealt out first as the largest, they still had two workers waiting at the run's start); together, the
#: module's namespace is also made once.
pytestmark = pytest.mark.xdist_group("client-timeouts")
CQ = f"cq-{NS}"
KUEUE = "kueue.x-k8s.io/v1beta2"
RAY = "ray.io/v1"
MANAGED = {"app.kubernetes.io/managed-by": "raybridge"}
RAYJOBS = rf"/apis/ray.io/v1/namespaces/{NS}/rayjobs"
WORKLOADS = rf"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"
LOCALQUEUE = rf"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues/lq"
NODES, PODS = r"/api/v1/nodes", r"/api/v1/pods"
NAMESPACE, KUEUE_GROUP = rf"/api/v1/namespaces/{NS}", r"/apis/kueue.x-k8s.io"


@dataclass(frozen=True)
class Fault:
    """One fault proxy recipe (`FaultProxy.arm`); `times=None` lasts the whole run."""

    options: dict[str, Any]
    lasting: bool = False
    retried: bool = True  # a lasting fault on a request the client may repeat: it must have been repeated


FAULTS = {
    "503 once": Fault({"code": 503}),
    "429 once, Retry-After 1": Fault({"code": 429, "retry_after": 1}),
    "500 once": Fault({"code": 500}),
    "dropped once": Fault({"code": None, "drop": True}),
    "proxy 502 page once": Fault({"code": None, "body": HTML_ERROR_PAGE}),
    # A request that outlasts --request-timeout is never repeated, even with --timeout time left: the user's
    # bound on one call is the bound on a silent server (exit 3 within it), not the job's whole --timeout.
    "silent once": Fault({"code": None, "delay": 4}, lasting=True, retried=False),
    "late once": Fault({"code": None, "delay": 3}),  # past the client's timeout, then served: a create lands late
    # Later still: it lands after the clean-up deleted what the second try created, and would bring the RayJob back.
    "late past the clean-up once": Fault({"code": None, "delay": 8}),
    "503 always": Fault({"code": 503, "times": None}, lasting=True),
    "dropped always": Fault({"code": None, "drop": True, "times": None}, lasting=True),
    "silent always": Fault({"code": None, "delay": 25, "times": None}, lasting=True, retried=False),
    "HTML 200 always": Fault({"code": 200, "body": HTML_ERROR_PAGE, "times": None}, lasting=True, retried=False),
    "truncated JSON always": Fault(
        {"code": 200, "body": '{"kind": "List", "items": [{"metad', "content_type": "application/json", "times": None},
        lasting=True, retried=False,
    ),
    "wrong shape always": Fault(
        {"code": 200, "body": '{"kind": "List", "apiVersion": "v1", "items": [42]}', "content_type": "application/json",
         "times": None},
        lasting=True, retried=False,
    ),  # fmt: skip
    "object without spec always": Fault(
        {"code": 200, "body": '{"kind": "LocalQueue", "metadata": {"name": "lq"}, "spec": "cq"}',
         "content_type": "application/json", "times": None},
        lasting=True, retried=False,
    ),  # fmt: skip
}


@dataclass(frozen=True)
class Command:
    """A command line for a fresh job name, and what it answers when nothing breaks."""

    argv: Callable[[str], list[str]]
    exit_code: int
    says: Callable[[str], str]  # the fragment of stdout+stderr that shows the command did its work
    what: str  # the start of the error line when a lasting fault breaks it
    job: str = "none"  # what to create first: none, rayjob, queued (a RayJob with its Workload)


#: What `logs` and `stop` say of a RayJob that Kueue holds suspended: its state is the real operator's word for it.
NOT_SUBMITTED = re.compile(r"has no Ray job submitted yet \(state: [\w ]+\); `raybridge delete (\S+)` removes it")
COMMANDS = {
    "list": Command(lambda j: ["list", "-n", NS], 0, lambda j: j, f"listing RayJobs in {NS}", job="rayjob"),
    "status": Command(lambda j: ["status", j, "-n", NS], 0, lambda j: f"RayJob {NS}/{j}", "reading", job="queued"),
    "logs": Command(lambda j: ["logs", j, "-n", NS], 2, lambda j: f"`raybridge delete {j}` removes it", "reading RayJob", job="rayjob"),
    "stop": Command(lambda j: ["stop", j, "-n", NS], 2, lambda j: f"`raybridge delete {j}` removes it", "reading RayJob", job="rayjob"),
    "delete": Command(lambda j: ["delete", j, "-n", NS], 0, lambda j: f"deleted RayJob {NS}/{j}", "deleting RayJob", job="rayjob"),
    "discover": Command(lambda j: ["discover"], 0, lambda j: "gpu-0", "listing"),
    "submit --dry-run": Command(
        lambda j: ["submit", "--dry-run", "--backend", "kubernetes", "-n", NS, "--name", j, "--", "python", "x.py"],
        0, lambda j: "kind: RayJob", "listing nodes",
    ),  # fmt: skip
    "submit (preflight)": Command(
        lambda j: ["submit", "--backend", "kubernetes", "-n", NS, "--queue", "no-such-queue", "--name", j,
                   "--timeout", "20", "--", "python", "x.py"],
        2, lambda j: "LocalQueue no-such-queue does not exist", "",
    ),  # fmt: skip
    "submit (create)": Command(
        lambda j: ["submit", "--backend", "kubernetes", "-n", NS, "--queue", "lq", "--name", j,
                   "--timeout", "6", "--", "python", "x.py"],
        3, lambda j: f"RayJob {NS}/{j} was not admitted within 6s", "creating RayJob",
    ),  # fmt: skip
}


@dataclass(frozen=True)
class Row:
    command: str
    method: str
    path: str  # a regex; {job} is the row's job name
    fault: str
    extra: tuple[str, ...] = ()  # more flags (a shorter --request-timeout)
    bound: float = 20.0  # seconds the whole run may take
    slower_than: float = 0.0  # seconds it must take at least (a Retry-After honoured)
    what: Optional[str] = None  # the error line's start, when not the command's own

    def __str__(self) -> str:
        # The module's namespace is random: a test id must not be (pytest-xdist's workers collect the ids apart).
        return f"{self.command} | {self.method} {self.path.replace(NS, 'NAMESPACE').rsplit('/', 1)[-1]} | {self.fault}"


RT2 = ("--request-timeout", "2")
ROWS = [
    Row("list", "GET", RAYJOBS, "503 once"),
    Row("list", "GET", RAYJOBS, "429 once, Retry-After 1", slower_than=1.0),
    Row("list", "GET", RAYJOBS, "dropped once"),
    Row("list", "GET", RAYJOBS, "proxy 502 page once"),
    Row("list", "GET", RAYJOBS, "503 always"),
    Row("list", "GET", RAYJOBS, "HTML 200 always"),
    Row("list", "GET", RAYJOBS, "truncated JSON always"),
    Row("list", "GET", RAYJOBS, "wrong shape always"),
    Row("status", "GET", RAYJOBS + "/{job}", "500 once"),
    Row("status", "GET", RAYJOBS + "/{job}", "dropped always", what="reading RayJob"),
    Row("status", "GET", WORKLOADS, "dropped once"),
    Row("status", "GET", WORKLOADS, "HTML 200 always", what="listing Kueue Workloads"),
    Row("status", "GET", WORKLOADS, "wrong shape always", what="listing Kueue Workloads"),
    Row("status", "GET", LOCALQUEUE, "object without spec always", what="reading LocalQueue"),
    Row("status", "GET", LOCALQUEUE, "truncated JSON always", what="reading LocalQueue"),
    Row("logs", "GET", RAYJOBS + "/{job}", "503 once"),
    Row("logs", "GET", RAYJOBS + "/{job}", "dropped always", what="reading RayJob"),
    Row("stop", "GET", RAYJOBS + "/{job}", "503 once"),
    Row("delete", "GET", RAYJOBS + "/{job}", "429 once, Retry-After 1", slower_than=1.0),
    Row("delete", "DELETE", RAYJOBS + "/{job}", "503 once"),
    Row("delete", "DELETE", RAYJOBS + "/{job}", "dropped once"),
    Row("delete", "DELETE", RAYJOBS + "/{job}", "503 always"),
    Row("discover", "GET", NODES, "503 once"),
    Row("discover", "GET", NODES, "503 always", what="listing nodes"),
    Row("discover", "GET", PODS, "dropped once"),
    Row("discover", "GET", PODS, "HTML 200 always", what="listing pods"),
    Row("submit --dry-run", "GET", NODES, "500 once"),
    Row("submit --dry-run", "GET", NODES, "truncated JSON always"),
    Row("submit (preflight)", "GET", NODES, "silent once", RT2, bound=10, what="listing nodes"),
    # --timeout 5 with the default --request-timeout of 30 s: it took 32 s; now 5 s and the process's own start.
    Row("submit (preflight)", "GET", NODES, "silent always", ("--timeout", "5"), bound=15, what="listing nodes"),
    Row("submit (preflight)", "GET", NAMESPACE, "503 once"),
    Row("submit (preflight)", "GET", KUEUE_GROUP, "HTML 200 always", what="reading Kueue's API group"),
    Row("submit (preflight)", "GET", LOCALQUEUE.replace("/lq", "/no-such-queue"), "429 once, Retry-After 1", slower_than=1.0),
    Row("submit (create)", "POST", RAYJOBS, "503 once"),
    Row("submit (create)", "POST", RAYJOBS, "dropped once"),
    Row("submit (create)", "POST", RAYJOBS, "late once", RT2),
    Row("submit (create)", "POST", RAYJOBS, "late past the clean-up once", RT2, bound=25),
]


@pytest.fixture(scope="module")
def api(fault_proxy: Any) -> Iterator[Any]:
    """The fault proxy before the session's real cluster, with this module's namespace and a LocalQueue `lq` whose
    ClusterQueue a holder Workload fills (its whole CPU quota): Kueue admits nothing more, so every RayJob here stays
    suspended, its Workload pending, and KubeRay starts no Ray cluster for it (the kwok nodes gpu-0... are the
    session's)."""
    admin = fault_proxy.admin
    admin.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    make_cluster_queue(admin, CQ, gpus=8, cpu="64")
    make_local_queue(admin, "lq", NS, CQ)
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "64"}}}]}}
    admin.create_object({"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "holder", "namespace": NS},
                         "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": template}]}})  # fmt: skip

    def holder_admitted() -> bool:
        conditions = (admin.get_object(KUEUE, "Workload", "holder", NS) or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in conditions)

    wait_for(holder_admitted, timeout=60, what="Kueue to reserve the holder's quota")
    try:
        yield fault_proxy
    finally:
        admin.delete_object("v1", "Namespace", NS)
        admin.delete_object(KUEUE, "ClusterQueue", CQ)


def _create_job(admin: Any, name: str, queued: bool) -> None:
    """A RayJob of raybridge's in `lq`; `queued`: once Kueue has made its Workload."""
    manifest = rayjob_manifest(name, namespace=NS, queue="lq")
    manifest["metadata"]["labels"].update(MANAGED)
    job = admin.create_object(manifest)
    if queued:
        uid = job["metadata"]["uid"]
        wait_for(lambda: [w for w in admin.list_objects(KUEUE, "Workload", NS) if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == uid],
                 timeout=30, what=f"Kueue to make RayJob {name}'s Workload")  # fmt: skip


def _with_flags(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """`flags` before the `--` that starts the entrypoint (after it they would be the job's arguments)."""
    cut = argv.index("--") if "--" in argv else len(argv)
    return argv[:cut] + list(flags) + argv[cut:]


@pytest.mark.realtime
@pytest.mark.parametrize("row", ROWS, ids=str)
def test_a_fault_gives_the_normal_answer_after_a_retry_or_exit_3_in_one_line(api, row: Row) -> None:
    proxy, kubeconfig = api, api.kubeconfig
    command, fault = COMMANDS[row.command], FAULTS[row.fault]
    job = f"seam-{uuid.uuid4().hex[:6]}"
    if command.job != "none":
        _create_job(proxy.admin, job, queued=command.job == "queued")
    injected = proxy.arm(row.method, row.path.format(job=job), **fault.options)
    started = time.monotonic()
    try:
        out = run_cli(*_with_flags(command.argv(job), row.extra), env=cli_env(KUBECONFIG=str(kubeconfig)), timeout=90)
    finally:
        injected.clear()
    elapsed = time.monotonic() - started
    shown = out.stdout + out.stderr
    assert "Traceback" not in shown and "internal error" not in shown, shown
    assert injected.hits >= 1, "the fault was never reached: the row tests nothing"
    assert elapsed < row.bound, f"took {elapsed:.1f}s, more than {row.bound}s"
    assert elapsed >= row.slower_than, f"took {elapsed:.1f}s: Retry-After not honoured"
    if not fault.lasting:  # the user sees the command's normal answer
        assert out.returncode == command.exit_code, shown
        assert command.says(job) in shown, shown
        if row.command in ("logs", "stop"):
            assert NOT_SUBMITTED.search(shown), shown
        if row.command == "submit (create)":
            # a delayed create is carried out once its delay is over, whether raybridge still waits or not
            time.sleep(max(0.0, started + fault.options.get("delay", 0) + 4 - time.monotonic()))  # + the preflight before it
            assert proxy.admin.get_object(RAY, "RayJob", job, NS) is None, "the RayJob was left behind"
        return
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert out.returncode == 3, shown
    assert len(errors) == 1, out.stderr
    assert errors[0].startswith(f"error: {row.what or command.what}"), errors[0]
    assert proxy.url in errors[0], errors[0]  # names the server
    if fault.retried:
        assert injected.hits >= 2, f"a transient failure of a {row.method} was not retried"


# --- the target seam: which kubeconfig, said once, merged as kubectl merges ------------------------------


def test_a_named_kubeconfig_that_does_not_exist_is_exit_2_whatever_the_backend(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-config")
    rows = [
        ["submit", "--dry-run", "--kubeconfig", missing, "--", "python", "x.py"],
        ["submit", "--dry-run", "--backend", "local", "--kubeconfig", missing, "--", "python", "x.py"],
        ["submit", "--dry-run", "--backend", "kubernetes", "--kubeconfig", missing, "--", "python", "x.py"],
        ["list", "--kubeconfig", missing],
    ]
    for argv in rows:
        out = run_cli(*argv, timeout=60)
        assert out.returncode == 2, (argv, out.stderr)
        assert out.stderr.strip().splitlines()[-1] == f"error: --kubeconfig '{missing}' does not exist", (argv, out.stderr)
        assert out.stdout == "", argv


def test_kubeconfig_files_that_do_not_exist_are_said_once_before_anything_else(tmp_path: Path) -> None:
    gone = str(tmp_path / "gone")
    env = cli_env(KUBECONFIG=gone)
    note = f"kubeconfig '{gone}' does not exist"
    dry = run_cli("submit", "--dry-run", "--", "python", "x.py", env=env, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert dry.stderr.count(note) == 1 and dry.stderr.index(note) < dry.stderr.index("dry run, nothing is created"), dry.stderr
    for argv in (["list"], ["status", "some-job"]):
        out = run_cli(*argv, env=env, timeout=60)
        assert out.returncode == 3, out.stderr
        assert out.stderr.count(note) == 1, out.stderr
        assert "KUBECONFIG names only files that do not exist" in out.stderr


def test_a_kubeconfig_list_is_merged_as_kubectl_merges_it(api, tmp_path: Path) -> None:
    """Cluster and user in the first file, the context (namespace team-b) in the second: both are used."""
    whole = yaml.safe_load(api.kubeconfig.read_text())
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": whole["clusters"], "users": whole["users"]}))
    context = {"cluster": whole["clusters"][0]["name"], "user": whole["users"][0]["name"], "namespace": "team-b"}
    second.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "ctx-b", "contexts": [{"name": "ctx-b", "context": context}],
    }))  # fmt: skip
    env = cli_env(KUBECONFIG=f"{first}:{second}")
    rendered = run_cli("render", "--nodes", str(_nodes_file(tmp_path)), "--", "python", "x.py", env=env, timeout=60)
    assert yaml.safe_load(rendered.stdout)["metadata"]["namespace"] == "team-b", rendered.stderr
    listed = run_cli("list", env=env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert "No resources found in team-b namespace." in listed.stdout + listed.stderr


def _nodes_file(tmp_path: Path) -> Path:
    import json

    from tests.builders import gpu_node

    path = tmp_path / "nodes.json"
    labels = gpu_node("gpu-0", 8, product="NVIDIA-H100-80GB-HBM3", memory_mib=81559)["metadata"]["labels"]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0", "labels": labels},
            "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
                       "allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}))
    return path
