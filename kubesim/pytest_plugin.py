"""pytest fixtures for tests that talk to the in-process Kubernetes API server.

Why: most tests against kubesim want a fresh, started `KubeApiServer` and
an official-client `ApiClient` bound to it, torn down afterwards.
What this deliberately does not do: no cluster state (namespaces beyond the
server's defaults, nodes, queues); tests and kubesim/fixtures.py add that.
"""

from __future__ import annotations

from typing import Iterator

import kubernetes.client
import pytest

from kubesim.server import KubeApiServer


@pytest.fixture
def kube_server() -> Iterator[KubeApiServer]:
    """A started server with the newest KubeRay and Kueue CRDs; stopped after the test.

    For another release use the `release_server` fixture (conftest.py) or
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

