"""Shared fixtures: one real local Ray head for the whole test session, shared by every worker.

The check that no module leaks Ray state, and the real cluster's plugin (testcluster/pytest_plugin.py:
`real_cluster`, for runs that reach tests/e2e), come from the top-level conftest.py. Nothing here imports
kubesim, testcluster or the kubernetes package before a fixture that needs them runs: a pure unit test
runs without them (tests/unit/test_suite_plugins.py).

With pytest-xdist (the default, see pyproject.toml's addopts) the head belongs to the controlling
process, which outlives every worker: it starts the head when a worker first asks for it (a file in a
directory the workers are told of) and stops it at the end. A head owned by one worker would die
with that worker (its supervisor takes it down with its owner) while others still use it.
What this deliberately does not do: no head for tests about a head's own life (marked `fresh_head`,
they start their own), and no head at all when no test asks for one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

#: The workers' key (in `workerinput`) for the directory through which they ask for the shared head.
HEAD_DIR_KEY = "raybridge_ray_head_dir"
WANTED = "wanted"
STARTED = "head.json"
FAILED = "failed"
#: How long a worker waits for the controller to start the head (a head starts in 5 to 30 s).
HEAD_WAIT_SECONDS = 240.0


@dataclass(frozen=True)
class SharedHead:
    """What tests use of the head: where its dashboard (Job API) answers without a token (the front, for this
    user's processes alone), where its GCS answers (with the token), and the token's file."""

    dashboard_url: str
    gcs_address: str
    token_path: str

    def token_env(self) -> dict[str, str]:
        """What a Ray client needs in its environment to reach the GCS (as for any cluster with token auth)."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": self.token_path}


class _Head:
    """raybridge's own private head (kernel-chosen ports, its own temp dir, Ray's token authentication), as `submit`
    starts one, behind a front that lets this user's processes in without the token: the head stands for
    clusters without authentication, which no other local user may use (testcluster/head_front.py)."""

    def __init__(self) -> None:
        from raybridge.jobs.private_head import PrivateRayHead
        from testcluster.head_front import HeadFront
        from tests.helpers import short_tmpdir

        old = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = short_tmpdir()
        self.head = PrivateRayHead(num_cpus=4)
        try:
            self.head.start()
        finally:
            if old is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = old
        assert self.head.dashboard_url is not None and self.head.token_path is not None
        self.front = HeadFront(self.head.dashboard_url.split("://", 1)[1], self.head.token_path.read_text())
        self.shared = SharedHead(f"http://{self.front.netloc}", self.head.gcs_address or "", str(self.head.token_path))

    def stop(self) -> None:
        self.front.close()
        self.head.stop()


class _HeadOnRequest:
    """In the controlling process: starts the head once a worker writes WANTED, stops it at the end."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="rbhead"))
        self.head: Any = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="ray-head-on-request", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.done.wait(0.1):
            if (self.directory / WANTED).exists():
                break
        else:
            return
        try:
            self.head = _Head()
        except Exception as exc:  # noqa: BLE001 - told to every worker that waits
            (self.directory / FAILED).write_text(f"{type(exc).__name__}: {exc}")
            return
        written = self.directory / (STARTED + ".new")
        written.write_text(json.dumps(asdict(self.head.shared)))
        written.rename(self.directory / STARTED)

    def stop(self) -> None:
        self.done.set()
        self.thread.join(HEAD_WAIT_SECONDS)
        if self.head is not None:
            self.head.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


_on_request: Optional[_HeadOnRequest] = None


def pytest_configure(config: pytest.Config) -> None:
    global _on_request
    if not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        _on_request = _HeadOnRequest()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist, in the controlling process: tell each worker where to ask for the head."""
    if _on_request is not None:
        node.workerinput[HEAD_DIR_KEY] = str(_on_request.directory)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _on_request
    if _on_request is not None:
        _on_request.stop()
        _on_request = None


def _ask_controller(directory: Path) -> SharedHead:
    (directory / WANTED).touch()
    deadline = time.monotonic() + HEAD_WAIT_SECONDS
    while not (directory / STARTED).exists():
        if (directory / FAILED).exists():
            raise RuntimeError(f"the shared Ray head did not start: {(directory / FAILED).read_text()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the shared Ray head did not start within {HEAD_WAIT_SECONDS:.0f}s")
        time.sleep(0.1)
    found = json.loads((directory / STARTED).read_text())
    return SharedHead(**found)


@pytest.fixture(scope="session")
def ray_head(request: pytest.FixtureRequest) -> Iterator[SharedHead]:
    """A real Ray head, shared by the whole session (every worker's tests alike), reached without a token by this
    user's processes through its front.

    Yields its dashboard URL (the front's), GCS address and token file; stopped (process group and all) at the end
    of the session.
    """
    directory = getattr(request.config, "workerinput", {}).get(HEAD_DIR_KEY)
    if directory is not None:
        yield _ask_controller(Path(directory))
        return
    head = _Head()  # one process, no workers: this process owns the head
    try:
        yield head.shared
    finally:
        head.stop()


#: The nodes of the session's real cluster: eight 8-GPU NVIDIA H100 nodes, labelled as GPU feature discovery
#: labels them. kwok's nodes cost nothing, so tests running side by side do not wait for each other's GPUs.
REAL_CLUSTER_GPU_NODES = 8


@pytest.fixture(scope="session")
def testcluster_request(ray_head: SharedHead) -> dict:
    """What the session's real cluster (testcluster) is started with: its head pods stand for the shared Ray
    head, and its nodes are GPU nodes built by tests/builders.py h100_node."""
    from urllib.parse import urlparse

    from tests.builders import h100_node

    nodes = [h100_node(f"gpu-{i}") for i in range(REAL_CLUSTER_GPU_NODES)]
    return {"ray_dashboard": urlparse(ray_head.dashboard_url).netloc, "nodes": nodes}


@pytest.fixture(scope="module")
def real_admin(real_cluster: Any) -> Iterator[tuple[Any, str]]:
    """(the admin's client, the kubeconfig path) of the session's real cluster, for one module's tests."""
    client = real_cluster.client()
    try:
        yield client, str(real_cluster.kubeconfig)
    finally:
        client.close()


@dataclass
class ProxiedCluster:
    """The session's real cluster seen through a fault proxy (testcluster/fault_proxy.py): `kubeconfig` names the
    proxy (with the admin's credentials), `arm(...)` arms a fault for the requests that pass it (`clear()` ends
    them all), `url` is the server a client through it reports, and `admin` reaches the API server directly."""

    proxy: Any
    kubeconfig: Path
    admin: Any

    @property
    def url(self) -> str:
        return str(self.proxy.url)

    def arm(self, method: str, path_regex: str, **fault: Any) -> Any:
        return self.proxy.arm(method, path_regex, **fault)

    def clear(self) -> None:
        self.proxy.clear()


@pytest.fixture(scope="module")
def fault_proxy(real_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedCluster]:
    """A module's fault proxy in front of the session's real kube-apiserver, with the stack's certificates; the
    controllers keep talking to the API server directly, so only what a test sends through `kubeconfig` meets a
    fault. Every fault still armed is cleared after each test that asked for it (`_faults_cleared`)."""
    from testcluster.fault_proxy import FaultProxy

    directory = tmp_path_factory.mktemp("fault-proxy")
    proxy = FaultProxy.in_front_of(real_cluster.kubeconfig, real_cluster.pki, directory / "proxy")
    admin = real_cluster.client()
    try:
        with proxy:
            yield ProxiedCluster(proxy, proxy.write_kubeconfig(real_cluster.kubeconfig, directory / "kubeconfig"), admin)
    finally:
        admin.close()


@pytest.fixture(autouse=True)
def _faults_cleared(request: pytest.FixtureRequest) -> Iterator[None]:
    """No fault outlives the test that armed it."""
    yield
    if "fault_proxy" in request.fixturenames:
        request.getfixturevalue("fault_proxy").clear()


@pytest.fixture
def queue(cluster: Any) -> Any:
    """A fresh LocalQueue -> ClusterQueue with 8 GPUs, in a fresh namespace of the module's `cluster` fixture
    (real or simulated; its first part is the admin's client): (namespace, LocalQueue, ClusterQueue)."""
    from tests.cluster_state import fresh_queue

    return fresh_queue(cluster[0])
