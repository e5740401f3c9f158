"""Top-level pytest configuration, for tests/ and kubesim/tests alike.

Why it exists: `pytest_plugins` is honoured only in a top-level conftest, and both test
trees need kubesim's fixtures (kubesim/pytest_plugin.py: the test API server, the release
matrix) and the guard against Ray state leaking from one module into the next (both start
real Ray heads).
What it deliberately does not do: no raybridge fixtures (tests/conftest.py has those).
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path

import pytest

pytest_plugins = ["kubesim.pytest_plugin", "testcluster.pytest_plugin"]


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
    if "/e2e/" in item.nodeid or item.nodeid.startswith("kubesim/tests/test_controllers"):
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
    root = Path(__file__).resolve().parent
    for package in ("raybridge", "kubesim"):
        compileall.compile_dir(str(root / package), quiet=1, workers=1)
