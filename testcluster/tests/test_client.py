"""testcluster/client.py's ClusterClient, without a cluster: a kind whose CRD was installed after the client read the
API server's discovery is found once the discovery is read again, and two threads sharing a client never read it at
once.

Why: tests and benchmarks create a client, then install CRDs (or start an operator that does); the client must not
fail on the first object of such a kind. What it does not do: talk to an API server (the end-to-end tests do).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from kubernetes.dynamic.exceptions import ResourceNotFoundError

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
