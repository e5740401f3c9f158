"""testcluster's own tests: the stack comes up as a user runs it, kubectl works on it, and it leaves nothing.

Why: every end-to-end test of raybridge stands on this stack, so what it promises is checked here,
apart from raybridge: `python -m testcluster up` says ready and serves the example nodes to a real
kubectl; Ctrl-C stops every process it started and removes its temp directory; a stack whose
owner is SIGKILLed is cleaned up by its reaper; the dashboard proxy sends only head-service
dashboard requests to the Ray head; without Go the real-cluster tests skip with one line.

What it does not do: test the upstream programs themselves, or raybridge (tests/e2e does).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest

from testcluster.dashboard_proxy import DashboardProxy
from testcluster.pytest_plugin import _unavailable

ROOT = Path(__file__).resolve().parents[2]
needs_go = pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable()))


def _stack_processes(workdir: str) -> list[str]:
    """Processes whose command line names the stack's temp directory (every program it starts does)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if workdir in line and "testcluster-reaper" not in line]


def _connections_off_loopback(workdir: str) -> list[str]:
    """The stack's established TCP connections whose peer is not on loopback (there must be none)."""
    pids = {line.split()[0] for line in _stack_processes(workdir)}
    out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        peer = fields[3] if len(fields) > 3 else ""
        owners = {part.split("=")[1].rstrip(",)") for part in line.split() for part in part.split(",") if part.startswith("pid=")}
        if owners & pids and not (peer.startswith("127.") or peer.startswith("[::1]") or peer.startswith("[::ffff:127.")):
            found.append(line)
    return found


def _read_until(stream, marker: str, timeout: float) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    for line in stream:
        lines.append(line)
        if marker in line or time.monotonic() > deadline:
            break
    return lines


@needs_go
@pytest.mark.realtime
def test_up_serves_a_real_cluster_to_kubectl_and_ctrl_c_leaves_nothing(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "testcluster", "up", "--kubeconfig", str(kubeconfig), "--no-ray", "--with", "kueue"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        lines = _read_until(proc.stderr, "ready:", 240)
        assert lines and lines[-1].startswith("ready: https://127.0.0.1:"), "".join(lines)
        assert "Kueue v0.17.0 ready" in "".join(lines)
        nodes = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "json"], capture_output=True, text=True, timeout=60)
        assert nodes.returncode == 0, nodes.stderr
        listed = {n["metadata"]["name"]: n for n in json.loads(nodes.stdout)["items"]}
        example = {n["metadata"]["name"] for n in json.loads((ROOT / "examples" / "cluster" / "nodes.json").read_text())["items"]}
        assert set(listed) == example
        ready = {name: {c["type"]: c["status"] for c in n["status"]["conditions"]}["Ready"] for name, n in listed.items()}
        assert set(ready.values()) == {"True"}, ready
        assert listed["mi300x-0"]["status"]["allocatable"]["amd.com/gpu"] == "8"
        workdir = lines[-1].split(" logs in ")[1].split()[0].removesuffix("/logs")
        assert _stack_processes(workdir), "no process of the stack found"
        assert _connections_off_loopback(workdir) == []
        proc.send_signal(signal.SIGINT)
        # Every program gets SIGTERM at once and one shared grace (processes.stop_all): stopped one after another,
        # each with a grace of its own, this once took over 60 s.
        asked = time.monotonic()
        assert proc.wait(40) == 0, proc.stderr.read()
        assert time.monotonic() - asked < 30, f"stopping took {time.monotonic() - asked:.0f} s"
        said = proc.stderr.read().strip().splitlines()[-1]
        # Kueue ended on SIGTERM (stopped together with the API server, the two had waited on each other out the
        # whole grace and were both killed). Under load, a request in flight can still hold the API server's own
        # shutdown past the grace (seen once in a suite run): that kill alone is allowed.
        killed = said.partition("killed after the grace: ")[2]
        assert said.startswith("stopped") and set(filter(None, killed.split(", "))) <= {"kube-apiserver", "etcd"}, said
        assert _stack_processes(workdir) == []
        assert not Path(workdir).exists()
    finally:
        if proc.poll() is None:
            proc.kill()


@needs_go
@pytest.mark.realtime
def test_a_stack_whose_owner_is_killed_is_cleaned_up_by_its_reaper(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        from testcluster.stack import Stack, StackOptions
        stack = Stack(StackOptions(operators=())).start()
        print(stack.workdir, flush=True)
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        workdir = proc.stdout.readline().strip()
        assert workdir and _stack_processes(workdir), workdir
        proc.send_signal(signal.SIGKILL)  # no stop() runs
        proc.wait(30)
        deadline = time.monotonic() + 30
        while (_stack_processes(workdir) or Path(workdir).exists()) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _stack_processes(workdir) == []
        assert not Path(workdir).exists()
    finally:
        if proc.poll() is None:
            proc.kill()


class _Dashboard(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        body = json.dumps({"path": self.path, "host": self.headers.get("Host")}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    "url,answered",
    [
        ("http://rc-head-svc.team-a.svc.cluster.local:8265/api/jobs/x", True),
        ("http://rc-head-svc.team-a.svc.cluster.local:6379/", False),  # not the dashboard port
        ("http://example.com:8265/api/jobs/x", False),  # not a Service
        ("http://10.0.0.1:8265/api/jobs/x", False),  # an address: never dialled
    ],
)
def test_the_dashboard_proxy_forwards_only_head_service_dashboards(url: str, answered: bool) -> None:
    head = ThreadingHTTPServer(("127.0.0.1", 0), _Dashboard)
    Thread(target=head.serve_forever, daemon=True).start()
    proxy = DashboardProxy(("127.0.0.1", head.server_address[1])).start()
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy.url}))
        try:
            with opener.open(url, timeout=10) as answer:
                status, body = answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            status, body = error.code, {}
        if answered:
            assert status == 200 and body["path"] == "/api/jobs/x"
        else:
            assert status == 502 and body == {}
    finally:
        proxy.stop()
        head.shutdown()


def test_without_go_the_real_cluster_tests_skip_with_what_to_install(tmp_path: Path) -> None:
    """A contributor without Go: the tests that need the real cluster skip, saying what to install, and
    nothing is built or started."""
    test = tmp_path / "test_needs_cluster.py"
    test.write_text("def test_x(real_cluster):\n    raise AssertionError('ran')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not (Path(p) / "go").exists())
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-rs", "-p", "testcluster.pytest_plugin", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(test)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "1 skipped" in out.stdout, out.stdout + out.stderr
    assert "Go is not installed: install Go 1.24 or later" in out.stdout


def test_stopping_many_programs_that_ignore_sigterm_takes_one_grace_not_one_each(tmp_path) -> None:
    """A stack's programs stop together: a dozen that ignore SIGTERM end in one grace and a kill, not a grace each
    (stopped one after another, `testcluster up` once took over a minute to end after Ctrl-C)."""
    import time

    from testcluster.processes import Process, stop_all

    stubborn = ["python3", "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"]
    processes = [Process(f"p{i}", stubborn, tmp_path / f"p{i}.log").start() for i in range(12)]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all("up" in (tmp_path / f"p{i}.log").read_text() for i in range(12)):
        time.sleep(0.1)
    started = time.monotonic()
    stop_all(processes, grace=1.0)
    took = time.monotonic() - started
    assert all(p.popen is not None and p.popen.poll() is not None for p in processes)
    assert took < 8, f"took {took:.1f} s"


@pytest.mark.parametrize("environment, expected", [
    # one row per case: what the stack's starter has set, what each program it starts runs with
    ({}, {"GOGC": "400", "GOMEMLIMIT": "1200MiB"}),
    ({"GOGC": "100"}, {"GOGC": "100", "GOMEMLIMIT": "1200MiB"}),  # the default collector asked for: kept
    ({"GOGC": "off", "GOMEMLIMIT": "4GiB"}, {"GOGC": "off", "GOMEMLIMIT": "4GiB"}),
])
def test_the_stacks_programs_run_with_a_lazier_go_collector_unless_the_environment_says_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], expected: dict[str, str]) -> None:
    from testcluster.stack import Stack

    for name in ("GOGC", "GOMEMLIMIT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    stack = Stack.__new__(Stack)  # only what start_process uses: a temp directory and the process list
    stack.workdir, stack.processes = tmp_path, []
    process = stack.start_process("echo-go-settings", ["sh", "-c", 'echo "GOGC=$GOGC GOMEMLIMIT=$GOMEMLIMIT"'])
    assert process.popen is not None and process.popen.wait(10) == 0
    assert process.log.read_text().strip() == f"GOGC={expected['GOGC']} GOMEMLIMIT={expected['GOMEMLIMIT']}"


class _Answer:
    def __init__(self, status: int, document: dict) -> None:
        self.status, self.data = status, json.dumps(document).encode()


class _DiscoveryApi:
    """An ApiClient whose API server answers GET /apis (aggregated discovery) with `document`."""

    def __init__(self, status: int, document: dict) -> None:
        from types import SimpleNamespace

        self.configuration = SimpleNamespace(host="https://127.0.0.1:6443")
        self.asked: list[dict] = []

        def request(method: str, url: str, headers: dict, timeout: float) -> _Answer:
            self.asked.append({"method": method, "url": url, "accept": headers["Accept"]})
            return _Answer(status, document)

        self.rest_client = SimpleNamespace(pool_manager=SimpleNamespace(request=request))


def _discovery(*served: tuple[str, str, str]) -> dict:
    groups: dict[str, dict[str, list[str]]] = {}
    for group, version, resource in served:
        groups.setdefault(group, {}).setdefault(version, []).append(resource)
    return {"items": [{"metadata": {"name": group}, "versions": [{"version": v, "resources": [{"resource": r} for r in rs]} for v, rs in versions.items()]}
                      for group, versions in groups.items()]}  # fmt: skip


_WORKLOADS = {"spec": {"group": "kueue.x-k8s.io", "names": {"plural": "workloads"},
                       "versions": [{"name": "v1beta1", "served": True}, {"name": "v1beta2", "served": True}, {"name": "v1alpha1", "served": False}]}}  # fmt: skip


@pytest.mark.parametrize("status, document, ready", [
    # one row per case: what discovery answers, whether the stack may start the operators
    (200, _discovery(("kueue.x-k8s.io", "v1beta1", "workloads"), ("kueue.x-k8s.io", "v1beta2", "workloads")), True),
    (200, _discovery(("kueue.x-k8s.io", "v1beta1", "workloads")), False),  # Established, v1beta2 not yet listed: Kueue v0.17 exits
    (200, _discovery(), False),
    (503, _discovery(("kueue.x-k8s.io", "v1beta1", "workloads"), ("kueue.x-k8s.io", "v1beta2", "workloads")), False),
])
def test_operators_start_only_once_discovery_lists_every_served_version_of_their_crds(status: int, document: dict, ready: bool) -> None:
    from testcluster.stack import AGGREGATED_DISCOVERY, _discovery_serves

    api = _DiscoveryApi(status, document)
    assert _discovery_serves(api, [_WORKLOADS]) is ready
    assert api.asked == [{"method": "GET", "url": "https://127.0.0.1:6443/apis", "accept": AGGREGATED_DISCOVERY}]
