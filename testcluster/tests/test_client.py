"""testcluster/client.py's ClusterClient, without a cluster: a kind whose CRD was installed after the client read the
API server's discovery is found once the discovery is read again, and two threads sharing a client never read it at
once, and a namespace it makes is handed over once a pod in it passes admission (Kueue's pod webhook reads
namespaces from a cache).

Why: tests and benchmarks create a client, then install CRDs (or start an operator that does); the client must not
fail on the first object of such a kind. What it does not do: talk to an API server (the end-to-end tests do).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Optional

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError, ResourceNotFoundError

from testcluster.client import ClusterClient


class _Instance:
    def __init__(self, obj: dict[str, Any]) -> None:
        self._obj = obj

    def to_dict(self) -> dict[str, Any]:
        return self._obj


class _Resource:
    namespaced = False
    subresources: dict[str, Any] = {}

    def get(self, name: str, namespace: Any = None, serializer: Any = None) -> Any:
        answer = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}}
        return serializer(None, answer) if serializer is not None else _Instance(answer)


class _Discovery:
    """Discovery as it was read before the Queue CRD came: it knows Queues only once read again."""

    def __init__(self) -> None:
        self.fresh = False

    def invalidate_cache(self) -> None:
        self.fresh = True

    def get(self, api_version: str, kind: str) -> _Resource:
        if not self.fresh:
            raise ResourceNotFoundError(f"No matches found for {{'api_version': '{api_version}', 'kind': '{kind}'}}")
        return _Resource()


class _Dynamic:
    def __init__(self) -> None:
        self.resources = _Discovery()


def test_a_kind_installed_after_discovery_was_read_is_found_once_it_is_read_again() -> None:
    client = ClusterClient.__new__(ClusterClient)  # no kubeconfig, no API server: the discovery is the fake's
    client._dynamic = _Dynamic()
    found = client.get_object("scheduling.run.ai/v2", "Queue", "research")
    assert found is not None and found["metadata"]["name"] == "research"
    assert client._dynamic.resources.fresh


class _OneReaderDiscovery(_Discovery):
    """Discovery that fails, as the kubernetes client's cache does (`KeyError: 'resources'`), when a second thread
    reads it again while the first still is."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = 0
        self.overlapped = False

    def invalidate_cache(self) -> None:
        self.reading += 1
        try:
            if self.reading > 1:
                self.overlapped = True
                raise KeyError("resources")
            time.sleep(0.05)  # the API server's answer takes a while: time enough for another thread to come
            self.fresh = True
        finally:
            self.reading -= 1


def test_two_threads_sharing_a_client_read_discovery_again_one_after_the_other() -> None:
    client = ClusterClient.__new__(ClusterClient)
    client._dynamic = _Dynamic()
    client._dynamic.resources = _OneReaderDiscovery()
    errors: list[BaseException] = []

    def look_up() -> None:
        try:
            client.get_object("scheduling.run.ai/v2", "Queue", "research")
        except BaseException as exc:  # noqa: BLE001 - the test asserts none came
            errors.append(exc)

    threads = [threading.Thread(target=look_up) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not client._dynamic.resources.overlapped and errors == []


class _NamespaceUnseenByAWebhook(ClusterClient):
    """A cluster whose pod webhook answers `unseen` dry runs in a new namespace with its NotFound, as Kueue's does until
    its cache has the namespace; then `then` (an exception or None for admitted)."""

    def __init__(self, unseen: int, then: Optional[BaseException] = None) -> None:
        self.unseen, self.then, self.created, self.probes = unseen, then, [], 0

    def create_object(self, obj: dict[str, Any], *, dry_run: bool = False, write_status: bool = True) -> dict[str, Any]:
        if not dry_run:
            self.created.append(obj["kind"])
            return obj
        self.probes += 1
        if self.probes <= self.unseen:
            refusal = ApiException(status=404, reason="Not Found")
            refusal.body = ('{"message":"admission webhook \\"mpod.kb.io\\" denied the request: Namespace \\"team\\" not found",'
                            '"details":{"name":"team","kind":"Namespace"},"code":404}')  # fmt: skip
            raise NotFoundError(refusal)
        if self.then is not None:
            raise self.then
        return obj


def test_a_namespace_is_handed_over_once_a_pod_in_it_passes_admission() -> None:
    client = _NamespaceUnseenByAWebhook(unseen=3)
    assert client.create_namespace("team", timeout=10)["metadata"]["name"] == "team"
    assert client.created == ["Namespace"] and client.probes == 4  # the three refusals waited out, no pod kept


def test_a_namespace_wait_stops_at_its_timeout_and_passes_other_refusals_on() -> None:
    with pytest.raises(TimeoutError):
        _NamespaceUnseenByAWebhook(unseen=10**6).create_namespace("team", timeout=0.3)
    forbidden = ApiException(status=403, reason="Forbidden")
    forbidden.body = '{"message":"pods is forbidden"}'
    with pytest.raises(DynamicApiError):
        _NamespaceUnseenByAWebhook(unseen=0, then=DynamicApiError(forbidden)).create_namespace("team", timeout=10)
