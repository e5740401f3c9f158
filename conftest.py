"""Top-level pytest configuration, for tests/, kubesim/tests and testcluster/tests alike.

Why it exists: the three trees share the guard against Ray state leaking from one module into
the next (tests/ starts real Ray heads), the run order, a plugin loaded only where a run needs it
and a rule for every tree, so that a pure unit test runs without the kubernetes package, kubesim
or testcluster imported (tests/unit/test_suite_plugins.py checks that):
- testcluster/pytest_plugin.py (the real cluster: programs built before the workers start, one
  cluster for the session) is registered here, in every process of a run whose paths reach a tree
  that uses it (`REAL_CLUSTER_TREES`): the controlling process must have it before the workers
  start, and it collects nothing, so a conftest beside those tests would come too late.
- testcluster/crds_skip.py's rule, that a test asking for absent CRDs skips, is applied here, to
  every tree; it imports nothing more once a test has imported testcluster.crd_schemas.
What it deliberately does not do: no raybridge fixtures (tests/conftest.py has those).
"""

from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

import pytest

# pytest caches each test module's assertion-rewritten bytecode, unless bytecode is not to be written: with
# PYTHONDONTWRITEBYTECODE set (as on the CI machine) every process of every run rewrote all 270 test modules again,
# about 6 s of CPU each. The tests' bytecode is written whatever that variable says, as raybridge's is
# (pytest_sessionstart); the processes the tests start still honour it.
sys.dont_write_bytecode = False

from testcluster.crds_skip import pytest_runtest_call, pytest_runtest_setup  # noqa: F401 - hooks, registered by name

ROOT = Path(__file__).resolve().parent
#: The test trees that use the real test cluster (`real_cluster`; testcluster/pytest_plugin.py).
REAL_CLUSTER_TREES = ("tests/e2e", "testcluster/tests", "kubesim/tests")
REAL_CLUSTER_PLUGIN = "testcluster.pytest_plugin"


def _run_reaches(config: pytest.Config, trees: tuple[str, ...]) -> bool:
    """Whether the run's paths may collect tests of `trees`: a path inside one, one above it, or no path of this
    clone (--pyargs, a path pytest will refuse). xdist's workers get the controlling process's arguments, so
    every process of a run decides alike."""
    wanted = [ROOT / tree for tree in trees]
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if not path.exists():
            return True
        if any(path == tree or tree in path.parents or path in tree.parents for tree in wanted):
            return True
    return False


#: The fast tier (`pytest --fast`, CONTRIBUTING.md): pure units, the offline CLI and the property tests. Left out:
#: the trees that test the test harness and the simulation, and what needs Go, a Ray head, a cluster or real time.
FAST_TREES = ("tests/unit/", "tests/property/")
#: The end-to-end modules that run the CLI offline (files in, output and exit status out), in the fast tier too.
FAST_E2E_MODULES = tuple(f"tests/e2e/test_{name}.py" for name in (
    "cli_flags", "cli_help_and_notes", "cli_completion", "cli_offline", "cli_adjuster", "cli_adjuster_claims", "examples",
    "readme_tour", "strict_spec_fields", "printed_input_is_escaped", "hostile_input_answers", "hostile_input_crashes",
    "explain_files", "svg_pictures",
))  # fmt: skip
#: Tests of the harness and of the benchmarks: not the product's behaviour (the Go oracle of `go_number` is marked needs_go).
NOT_FAST_MODULES = ("tests/unit/test_suite_", "tests/unit/test_benchmark")
#: Fixtures that start a Ray head or a cluster (a test that uses any, even through another fixture, is not fast).
SLOW_FIXTURES = frozenset({"ray_head", "real_cluster", "real_admin", "fault_proxy", "explain_scene", "explain_sim_cluster", "sim"})
SLOW_MARKERS = ("realtime", "fresh_head", "realcluster", "needs_go", "slow")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fast", action="store_true", default=False,
                     help="the fast tier alone: pure units, offline CLI, property tests; no Go, Ray head, cluster or real-time wait")  # fmt: skip


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With --fast, a test module outside the fast tier's files is not imported at all: each of a run's workers
    collects, and the modules that only the other tiers run (clusters, Ray heads) cost about 1 CPU-s to import."""
    if not config.getoption("fast") or not collection_path.name.startswith("test_") or collection_path.suffix != ".py":
        return None
    path = collection_path.resolve()
    relative = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else ""  # outside this clone: not the tier's
    return None if _in_fast_files(relative) else True


def _in_fast_files(path: str) -> bool:
    """Whether a path (a test's node id, a module's path from the clone's root) lies in the fast tier's files."""
    return path.startswith(FAST_TREES + FAST_E2E_MODULES) and not path.startswith(NOT_FAST_MODULES)


def is_fast(item: pytest.Item) -> bool:
    """Whether a test belongs to the fast tier (`--fast`)."""
    if not _in_fast_files(item.nodeid):
        return False
    if any(item.get_closest_marker(name) for name in SLOW_MARKERS):
        return False
    return not SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("fast"):
        return  # the fast tier builds and starts nothing
    if _run_reaches(config, REAL_CLUSTER_TREES):
        config.pluginmanager.import_plugin(REAL_CLUSTER_PLUGIN)  # its own pytest_configure runs now


@pytest.fixture(scope="module", autouse=True)
def no_ray_state_leaks_out_of_a_module():
    """Fail the module that changes Ray's environment variables or creates ~/.ray/auth_token.

    A plain local `ray.init()` in Ray 2.52+ sets RAY_AUTH_MODE=token in this process and writes a
    token to ~/.ray/auth_token; every Ray head started afterwards by any test then refuses
    unauthenticated calls. Such a leak shows up here, in the module that caused it.
    """
    from pathlib import Path

    token = Path.home() / ".ray" / "auth_token"

    def ray_environment() -> dict[str, str]:
        # `import ray` itself sets RAY_CLIENT_MODE=0, its default: that is no leak.
        return {k: v for k, v in os.environ.items() if k.startswith("RAY_") and k != "RAY_CLIENT_MODE"}

    before = ray_environment()
    had_token = token.exists()
    yield
    after = ray_environment()
    assert after == before, f"this module changed Ray's environment: {before} -> {after}"
    assert token.exists() == had_token, f"this module created or removed {token}"


def _run_order(item: pytest.Item) -> int:
    """Longest first, so the parallel workers end together: the tests that wait in real time or start a Ray
    head of their own (tens of seconds, mostly idle), then the other end-to-end tests (seconds each), then the
    rest (milliseconds each), which fill the workers' gaps to the end. xdist deals tests out in this order."""
    if item.get_closest_marker("realtime") or item.get_closest_marker("fresh_head"):
        return 0
    if "/e2e/" in item.nodeid:
        return 1
    return 2


def _group(item: pytest.Item) -> object:
    """The item's xdist_group name, None if it has none."""
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return marker.args[0] if marker.args else marker.kwargs.get("name")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Sort by `_run_order`, an xdist_group as a whole (at its most urgent member's place): a group shares a costly
    module fixture (a cluster per release), which pytest set up once for the group's run in collection order;
    pulling one member ahead of the others would set it up twice."""
    if config.getoption("fast"):
        kept = [item for item in items if is_fast(item)]
        config.hook.pytest_deselected(items=[item for item in items if not is_fast(item)])
        items[:] = kept
    group_order: dict[object, int] = {}
    for item in items:
        group = _group(item)
        if group is not None:
            group_order[group] = min(group_order.get(group, 2), _run_order(item))
    items.sort(key=lambda item: group_order.get(_group(item), _run_order(item)))  # no group: None is never a key


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile raybridge's and kubesim's sources once, before the workers start.

    The tests run the CLI as several hundred processes. Where PYTHONDONTWRITEBYTECODE is set (as on the CI
    machine), no process writes the bytecode it compiles, so each compiled the sources it imports again: about
    a tenth of each CLI call's CPU. compileall writes it whatever that variable says; every later import reads it.
    """
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controlling process did it
        return
    for package in ("raybridge", "kubesim"):
        compileall.compile_dir(str(ROOT / package), quiet=1, workers=1)
