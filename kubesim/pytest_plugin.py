"""pytest fixtures for tests that talk to the in-process Kubernetes API server.

Why: most tests against kubesim want a fresh, started `KubeApiServer` and
an official-client `ApiClient` bound to it, torn down afterwards, or one such
server per supported release. Register it with
`pytest_plugins = ["kubesim.pytest_plugin"]` in a top-level conftest.py.

It also skips, with the reason, every test whose setup or body asks for the
CRDs where the CRD folder beside the clone is absent (kubesim/crds_skip.py's
hooks, which it registers).
What this deliberately does not do: no cluster state (namespaces beyond the
server's defaults, nodes, queues); the tests add that (raybridge's with tests/cluster_state.py).
No decision at collection time: which tests need the CRDs shows when they ask.
"""

from __future__ import annotations

from typing import Iterator

import kubernetes.client
import pytest

from kubesim.crds_skip import pytest_runtest_call, pytest_runtest_setup, skip_if_crds_absent  # noqa: F401 - the plugin's hooks
from kubesim.schemas import RELEASES
from kubesim.server import KubeApiServer


@pytest.fixture
def kube_server() -> Iterator[KubeApiServer]:
    """A started server with the newest KubeRay and Kueue CRDs; stopped after the test.

    For another release use the `release_server` fixture or
    `KubeApiServer(release=...)`.

    A test fails if the server hit an internal error (an unexpected exception
    answered as 500) while it ran.
    """
    with KubeApiServer() as server:
        yield server
    assert server.internal_errors == [], "\n".join(server.internal_errors)


@pytest.fixture
def kube_api(kube_server: KubeApiServer) -> Iterator[kubernetes.client.ApiClient]:
    """An official-client ApiClient for `kube_server`."""
    api = kube_server.api_client()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(params=RELEASES)
def release(request: pytest.FixtureRequest) -> str:
    """One supported release id per test instance (`kuberay-v1.3.2`, ..., `kueue-newest`).

    The id is the test id too, so `pytest -k kuberay-v1.3.2` runs that release's tests.
    """
    return request.param


@pytest.fixture
def release_server(release: str) -> Iterator[KubeApiServer]:
    """A started test API server serving the CRDs of `release` (the other project at its newest)."""
    with KubeApiServer(release=release) as server:
        yield server
    assert server.internal_errors == [], "\n".join(server.internal_errors)
