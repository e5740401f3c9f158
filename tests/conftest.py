"""Shared fixtures: one real local Ray head for the whole test session; the release matrix."""

from __future__ import annotations

import os

import pytest

from tests.schemas import RELEASES


@pytest.fixture(scope="session")
def ray_head():
    """A real Ray head (raybridge's own private head: free ports, its own temp dir).

    Yields the dashboard URL; stopped (process group and all) at the end of the session.
    """
    from raybridge.launch.private_head import PrivateRayHead
    from tests.helpers import short_tmpdir

    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = short_tmpdir()
    head = PrivateRayHead(num_cpus=4, token_auth=False)  # stands for a cluster reached by address, without a token
    try:
        head.start()
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
    yield head
    head.stop()


@pytest.fixture(params=RELEASES)
def release(request) -> str:
    """One supported release id per test instance (`kuberay-v1.3.2`, ..., `kueue-newest`).

    The id is the test id too, so `pytest -k kuberay-v1.3.2` runs that release's tests.
    """
    return request.param


@pytest.fixture
def release_server(release: str):
    """A started test API server serving the CRDs of `release` (the other project at its newest)."""
    from tests.kubeapi.server import KubeApiServer

    with KubeApiServer(release=release) as server:
        yield server
    assert server.internal_errors == [], "\n".join(server.internal_errors)


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
