"""The fault-injection seam of the test API server (`fail_next`), through the official client.

Why: retry and failure paths of raybridge are tested by making chosen
requests hang, drop, or answer with errors or broken bodies; each kind of
fault must look to the client as it would on a real network.
What this deliberately does not do: test any retry logic (that belongs to
the code under test).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from kubesim.server import HTML_ERROR_PAGE, KubeApiServer

CMS = r"/api/v1/namespaces/default/configmaps"


@pytest.fixture
def kube_api(kube_server: KubeApiServer):
    """A client without urllib3's own retries (by default it retries reads, and 429/503 with Retry-After)."""
    api = kube_server.api_client(retries=False)
    try:
        yield api
    finally:
        api.close()


def _cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


STATUS_CASES = [
    # (code, reason, message start, Retry-After)
    (409, "Conflict", "Operation cannot be fulfilled", None),
    (429, "TooManyRequests", "Too many requests, please try again later.", "1"),
    (500, "InternalError", "Internal error occurred: injected failure", None),
    (503, "ServiceUnavailable", "the server is currently unable to handle the request", "1"),
]


@pytest.mark.parametrize(("code", "reason", "message", "retry_after"), STATUS_CASES, ids=[str(c[0]) for c in STATUS_CASES])
def test_status_faults_carry_the_real_reason_and_retry_after(
    kube_server: KubeApiServer, kube_api: client.ApiClient, code: int, reason: str, message: str,
    retry_after: str | None,
) -> None:
    kube_server.fail_next("GET", CMS, code=code)
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(kube_api).list_namespaced_config_map("default")
    body = json.loads(caught.value.body)
    assert caught.value.status == code and body["reason"] == reason and body["message"].startswith(message)
    assert caught.value.headers.get("Retry-After") == retry_after
    if retry_after:
        assert body["details"]["retryAfterSeconds"] == int(retry_after)
    client.CoreV1Api(kube_api).list_namespaced_config_map("default")  # once only


def test_a_fault_without_a_count_lasts_until_cleared(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    fault = kube_server.fail_next("*", CMS, code=503, times=None, retry_after=7)
    for _ in range(3):
        with pytest.raises(ApiException) as caught:
            core.list_namespaced_config_map("default")
        assert caught.value.headers["Retry-After"] == "7"
    assert fault.hits == 3
    fault.clear()
    core.list_namespaced_config_map("default")
    kube_server.fail_next("*", CMS, code=500, times=None)
    kube_server.clear_faults()
    core.list_namespaced_config_map("default")


@pytest.mark.realtime
def test_a_delay_longer_than_the_client_timeout_is_a_hang(kube_server: KubeApiServer,
                                                          kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    kube_server.fail_next("GET", CMS, code=None, delay=3)
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.list_namespaced_config_map("default", _request_timeout=0.5)
    assert time.monotonic() - started < 2.5
    kube_server.fail_next("GET", CMS, code=None, delay=0.3)
    started = time.monotonic()
    assert core.list_namespaced_config_map("default").items == []  # a short delay, then the real answer
    assert time.monotonic() - started >= 0.3


def test_a_dropped_connection_gets_no_answer(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    kube_server.fail_next("POST", CMS, drop=True)
    with pytest.raises(urllib3.exceptions.HTTPError):
        client.CoreV1Api(kube_api).create_namespaced_config_map("default", _cm("c"))
    assert kube_server.get_object("v1", "ConfigMap", "c", "default") is None


def test_an_html_error_page_from_a_proxy(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    kube_server.fail_next("GET", CMS, code=None, body=HTML_ERROR_PAGE)
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(kube_api).list_namespaced_config_map("default")
    assert caught.value.status == 502 and "502 Bad Gateway" in str(caught.value.body)
    assert caught.value.headers["Content-Type"] == "text/html"


def test_a_truncated_json_body(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    kube_server.fail_next("GET", CMS, code=200, body='{"kind": "ConfigMapList", "apiVersion": "v1", "ite',
                          content_type="application/json")
    response = client.CoreV1Api(kube_api).list_namespaced_config_map("default", _preload_content=False)
    assert response.status == 200
    with pytest.raises(ValueError):
        json.loads(response.data)


def _watch_events(kube_api: client.ApiClient, **kwargs: Any) -> tuple[list[str], BaseException | None]:
    seen: list[str] = []
    try:
        for event in watch.Watch().stream(client.CoreV1Api(kube_api).list_namespaced_config_map, "default",
                                          timeout_seconds=3, **kwargs):
            seen.append(event["object"].metadata.name)
    except BaseException as error:  # noqa: BLE001 - what the client raised is the result
        return seen, error
    return seen, None


@pytest.mark.realtime
def test_a_watch_dropped_mid_stream(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    for name in ("a", "b", "c"):
        kube_server.create_object(_cm(name))
    kube_server.fail_next("GET", CMS, after_events=2, drop=True)
    started = time.monotonic()
    seen, error = _watch_events(kube_api)
    assert seen == ["a", "b"]
    assert error is not None and not isinstance(error, ApiException)  # a broken stream, not a Status
    assert time.monotonic() - started < 2.5


def test_a_watch_that_expires_gets_a_410_error_event(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    for name in ("a", "b"):
        kube_server.create_object(_cm(name))
    kube_server.fail_next("GET", CMS, code=410, after_events=1)
    seen, error = _watch_events(kube_api)
    assert seen == ["a"]
    assert isinstance(error, ApiException) and error.status == 410
    kube_server.fail_next("GET", CMS, code=410)
    seen, error = _watch_events(kube_api)
    assert seen == [] and isinstance(error, ApiException) and error.status == 410
