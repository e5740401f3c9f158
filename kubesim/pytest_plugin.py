"""pytest fixtures for tests that talk to the in-process Kubernetes API server.

Why: most tests against kubesim want a fresh, started `KubeApiServer` and
an official-client `ApiClient` bound to it, torn down afterwards, or one such
server per supported release. Register it with
`pytest_plugins = ["kubesim.pytest_plugin"]` in a top-level conftest.py.

It also skips, with the reason, every test whose setup or body asks for the
CRDs (kubesim/schemas.py raises `CrdsAbsent`) where the CRD folder beside the
clone is absent: a clone with nothing beside it runs what it can and skips the
rest, and never errors for it. Only that one condition skips; any other error,
and every error while the folder is present, is reported as it is.
What this deliberately does not do: no cluster state (namespaces beyond the
server's defaults, nodes, queues); tests and kubesim/fixtures.py add that.
No decision at collection time: which tests need the CRDs shows when they ask.
"""

from __future__ import annotations

from typing import Iterator, Optional

import kubernetes.client
import pytest

from kubesim.schemas import RELEASES, CrdsAbsent, crds_present
from kubesim.server import KubeApiServer


def _crds_absent_in(error: BaseException) -> Optional[CrdsAbsent]:
    """The CrdsAbsent that `error` is, or was raised from or while handling (groups included)."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, CrdsAbsent):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend((current.__cause__, current.__context__))
    return None


def skip_if_crds_absent(error: BaseException) -> None:
    """Skip the running test, with the reason, where `error` comes of CrdsAbsent and the CRD folder is absent
    (the repository's top-level conftest.py applies this rule without loading the plugin)."""
    absent = _crds_absent_in(error)
    if absent is not None and not crds_present():
        pytest.skip(str(absent))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """A fixture that needs the CRDs (`kube_server`, `release_server`, a test's own) skips its test where they are absent."""
    try:
        return (yield)
    except Exception as exc:
        skip_if_crds_absent(exc)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test body that needs the CRDs (a server it starts, a schema it checks) skips where they are absent."""
    try:
        return (yield)
    except Exception as exc:
        skip_if_crds_absent(exc)
        raise


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
