"""pytest support: one real cluster per test session, shared by every xdist worker.

Why: a stack takes 20 to 40 s to start and about 1.5 GB of memory, so a session starts
one, in the controlling process (which outlives every worker), when a worker first
asks for it, and stops it at the end, as tests/conftest.py does for the shared Ray
head. The programs are built before the workers start (a first build takes many
minutes, longer than any test's timeout), with a line of progress per program, and
only when the run includes the end-to-end tests. Without Go the tests that need the
cluster are skipped with one line saying what to install.

The stack is started and stopped on one thread that lives as long as it does: its
processes die with the thread that started them (processes.py).

A test that fails while it holds a stack (the session's, or a module's own) gets one line in
its report naming where that stack's logs are kept: the stack removes its directory when it
stops, and a failure that does not come again (a Ray head that stopped answering under load)
can then still be read. The copy is made once per failure, in a directory of this user's
alone (mode 0700, a fresh name), and is never removed by the run.

What this does not do: no cluster per test or per module (tests isolate themselves by
namespace and unique names), no cluster state beyond the stack's (tests add theirs), no logs
printed into the report (a program's log is long; the report names the copy).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

import pytest

from testcluster.programs import RELEASES, BuildError, GoMissing, ensure_built

__all__ = ["RealCluster", "own_cluster", "real_cluster"]

CLUSTER_DIR_KEY = "testcluster_dir"
WANTED, STARTED, FAILED = "wanted.json", "cluster.json", "failed"
#: How long a worker waits for the controller to start the stack (the programs are built already).
START_WAIT_SECONDS = 240.0
#: Set to 0 to skip the real-cluster tests without looking for Go.
ENABLE_ENV = "RAYBRIDGE_TESTCLUSTER"


class RealCluster:
    """What a test gets: the admin kubeconfig, the server, where the programs log, and the stack's CA directory
    (pki.py; a fault proxy, fault_proxy.py, names itself by it)."""

    def __init__(self, kubeconfig: Path, server: str, logs: Path, pki: Path) -> None:
        self.kubeconfig = kubeconfig
        self.server = server
        self.logs = logs
        self.pki = pki

    def client(self) -> Any:
        from testcluster.client import ClusterClient

        return ClusterClient(self.kubeconfig)


def stack_logs_of(values: Iterable[Any]) -> list[Path]:
    """The log directories of the stacks among a test's fixture values: a RealCluster's, or a stack's own (anything
    with a `workdir` whose `logs` exists, as `own_cluster` yields), each once."""
    found: list[Path] = []
    for value in values:
        if isinstance(value, RealCluster):
            logs: Optional[Path] = Path(value.logs)
        elif isinstance(getattr(value, "workdir", None), Path):
            logs = value.workdir / "logs"
        else:
            continue
        if logs.is_dir() and logs not in found:
            found.append(logs)
    return found


_kept_logs_root: Optional[Path] = None


def keep_logs(logs: Path) -> Path:
    """A copy of a stack's `logs` directory (and of its own Ray head's session logs, in `ray-session/`), refreshed on
    each call, under a directory made once per process with a fresh name and mode 0700 (a stack's logs are the
    user's alone, as its directory is)."""
    global _kept_logs_root
    if _kept_logs_root is None:
        _kept_logs_root = Path(tempfile.mkdtemp(prefix="testcluster-failed-logs-"))
    kept = _kept_logs_root / logs.parent.name
    shutil.copytree(logs, kept, dirs_exist_ok=True)
    ray_session = logs.parent / "ray" / "session_latest" / "logs"  # the stack's own Ray head (ray_head.py): its dashboard's log
    if ray_session.is_dir():
        shutil.copytree(ray_session, kept / "ray-session", dirs_exist_ok=True, ignore_dangling_symlinks=True)
    return kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """On a failed test that held a stack, one line in its report: where that stack's logs are kept."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    for logs in stack_logs_of(getattr(item, "funcargs", {}).values()):
        try:
            said = f"the logs of the stack this test used are kept in {keep_logs(logs)}"
        except OSError as exc:
            said = f"the logs of the stack this test used ({logs}) could not be kept: {exc}"
        report.sections.append(("testcluster", said))


def _unavailable() -> Optional[str]:
    if os.environ.get(ENABLE_ENV) == "0":
        return f"{ENABLE_ENV}=0: the real-cluster tests are off"
    if shutil.which("go") is None:
        return "Go is not installed: install Go 1.24 or later (and reach the Go module proxy) to run the real-cluster tests"
    return None


def _options(request: dict) -> Any:
    """The session cluster's StackOptions from a `testcluster_request` (JSON-able: it crosses processes)."""
    from testcluster.stack import StackOptions

    return StackOptions(ray_dashboard=request.get("ray_dashboard"), nodes=request.get("nodes", []))


class _ClusterOnRequest:
    """In the controlling process: starts the stack once a worker asks, stops it at the end, on one thread."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="testcluster-req-"))
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="testcluster-on-request", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        from testcluster.stack import Stack

        wanted = self.directory / WANTED
        while not wanted.exists():
            if self.done.wait(0.1):
                return
        time.sleep(0.05)  # the asking worker writes the file whole before renaming it in
        request = json.loads(wanted.read_text())
        try:
            stack = Stack(_options(request)).start()
        except Exception as exc:  # noqa: BLE001 - told to every worker that waits
            (self.directory / FAILED).write_text(f"{type(exc).__name__}: {exc}")
            return
        try:
            found = {"kubeconfig": str(stack.kubeconfig), "server": stack.server, "logs": str(stack.workdir / "logs"),
                     "pki": str(stack.pki.directory)}
            (self.directory / (STARTED + ".new")).write_text(json.dumps(found))
            (self.directory / (STARTED + ".new")).rename(self.directory / STARTED)
            self.done.wait()
        finally:
            stack.stop()

    def stop(self) -> None:
        self.done.set()
        self.thread.join(120)
        shutil.rmtree(self.directory, ignore_errors=True)


_on_request: Optional[_ClusterOnRequest] = None


def _wants_end_to_end(config: pytest.Config) -> bool:
    """Whether this run may reach the real-cluster tests: no path given, or a path that holds e2e tests."""
    paths = [arg.split("::")[0] for arg in config.args] or ["."]
    for path in paths:
        resolved = Path(path).resolve()
        if resolved.is_dir() and (any(resolved.glob("e2e")) or resolved.name == "e2e" or any(resolved.glob("tests/e2e"))):
            return True
        if "e2e" in resolved.parts or "realstack" in resolved.name:
            return True
    return False


def pytest_configure(config: pytest.Config) -> None:
    global _on_request
    if hasattr(config, "workerinput") or _unavailable() is not None or not _wants_end_to_end(config):
        return
    def progress(line: str) -> None:
        # The top-level conftest.py registers this plugin from its own pytest_configure, which runs before the terminal
        # reporter exists: the line goes to the terminal past the output capture then.
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"testcluster: {line}")
            return
        capture = config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            sys.stderr.write(f"testcluster: {line}\n")
            sys.stderr.flush()

    try:
        ensure_built([release for releases in RELEASES.values() for release in releases.values()], progress)
    except (GoMissing, BuildError) as exc:
        raise pytest.UsageError(f"testcluster: {exc}") from exc
    _on_request = _ClusterOnRequest()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist, in the controlling process: tell each worker where to ask for the cluster."""
    if _on_request is not None:
        node.workerinput[CLUSTER_DIR_KEY] = str(_on_request.directory)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _on_request
    if _on_request is not None:
        _on_request.stop()
        _on_request = None


def _ask(directory: Path, request: dict) -> RealCluster:
    wanted = directory / WANTED
    if not wanted.exists():
        temporary = directory / f"{WANTED}.{os.getpid()}"
        temporary.write_text(json.dumps(request))
        try:
            os.link(temporary, wanted)  # the first worker's request wins
        except FileExistsError:
            pass
        temporary.unlink()
    deadline = time.monotonic() + START_WAIT_SECONDS
    while not (directory / STARTED).exists():
        if (directory / FAILED).exists():
            raise RuntimeError(f"the test cluster did not start: {(directory / FAILED).read_text()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the test cluster did not start within {START_WAIT_SECONDS:.0f} s")
        time.sleep(0.1)
    found = json.loads((directory / STARTED).read_text())
    return RealCluster(Path(found["kubeconfig"]), found["server"], Path(found["logs"]), Path(found["pki"]))


@pytest.fixture(scope="session")
def testcluster_request() -> dict:
    """What the session's cluster is started with: override it (a `ray_dashboard` host:port, `nodes`)."""
    return {}


@pytest.fixture(scope="session")
def real_cluster(request: pytest.FixtureRequest) -> Iterator[RealCluster]:
    """The session's real cluster (started on first use); skipped where Go is absent, before anything starts."""
    why = _unavailable()
    if why is not None:
        pytest.skip(why)
    testcluster_request = request.getfixturevalue("testcluster_request")
    directory = getattr(request.config, "workerinput", {}).get(CLUSTER_DIR_KEY)
    if directory is None and _on_request is not None:
        directory = str(_on_request.directory)
    if directory is not None:
        yield _ask(Path(directory), testcluster_request)
        return
    from testcluster.stack import Stack  # a run that did not build up front (a unit-test path given)

    stack = Stack(_options(testcluster_request)).start()
    try:
        yield RealCluster(stack.kubeconfig, stack.server, stack.workdir / "logs", stack.pki.directory)
    finally:
        stack.stop()


@contextlib.contextmanager
def own_cluster(options: Any) -> Iterator[Any]:
    """A stack of a test module's own (`StackOptions`: other nodes, other releases), stopped after; skipped
    where Go is absent. Started on the calling thread, which must outlive it (a module fixture's does)."""
    why = _unavailable()
    if why is not None:
        pytest.skip(why)
    from testcluster.stack import Stack

    with Stack(options) as stack:
        yield stack
