"""`kube.core_api.CoreApi` sends exactly the requests the client's own CoreV1Api sends, without importing it.

Each row is a call raybridge makes (the arguments it passes); both APIs run it on one recording ApiClient, which
answers without a server, and the method, URL, headers and timeout they hand to `call_api` must be the same, and the
body the caller's JSON as it is (the client's own reads it into its model and writes it back, timestamps with +00:00
for Z: the same instants).
An answer outside 2xx raises the same ApiException; a call CoreApi does not route goes to CoreV1Api itself.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from raybridge.kube.core_api import ROUTES, CoreApi, core_api

kubernetes = pytest.importorskip("kubernetes")


class _Answer:
    """What `call_api` returns (the client's RESTResponse): a status, a body, the urllib3 response."""

    def __init__(self, status: int, data: bytes) -> None:
        self.status, self.data, self.reason = status, data, "Not Found" if status == 404 else "OK"
        self.response = self
        self.headers: dict[str, str] = {}

    def read(self) -> bytes:
        return self.data

    def getheaders(self) -> dict[str, str]:
        return {}

    def getheader(self, name: str, default: Any = None) -> Any:
        return default


def _recording_client(status: int = 200) -> Any:
    from kubernetes import client

    class Recording(client.ApiClient):  # type: ignore[misc,valid-type]
        calls: list[tuple[Any, ...]] = []

        def call_api(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None, **_bounded):  # noqa: ANN001
            # _bounded: kube.client.BoundedApiClient's own options (`_retry`), which raybridge's ApiClient takes
            self.calls.append((method, url, dict(header_params or {}), body, post_params or [], _request_timeout))
            return _Answer(status, b'{"kind": "Status"}' if status >= 300 else b'{"items": []}')

    configuration = client.Configuration()
    configuration.host = "https://127.0.0.1:6443"
    configuration.api_key = {"authorization": "Bearer abc"}
    return Recording(configuration)


def _instants(value: Any) -> Any:
    """`value` with every RFC 3339 timestamp read as the instant it names."""
    from datetime import datetime

    if isinstance(value, dict):
        return {k: _instants(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_instants(v) for v in value]
    if isinstance(value, str) and len(value) >= 20 and value[4:5] == "-" and value[10:11] == "T":
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
#: An Event as the adjuster posts it (adjuster/scaler.py post_event).
EVENT = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "p.", "namespace": "ns"},
         "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": "7"},
         "reason": "TriggeredScaleUp", "message": "é", "type": "Normal", "firstTimestamp": "2026-11-30T12:00:00Z",
         "lastTimestamp": "2026-11-30T12:00:00Z", "count": 1, "source": {"component": "raybridge-adjuster"},
         "reportingComponent": "raybridge-adjuster"}  # fmt: skip
TIMEOUT = {"_request_timeout": (3.0, 3.0), "_preload_content": False}

#: (method, positional arguments, keyword arguments): the calls raybridge makes, and a watch as the informer makes it.
ROWS = [
    ("list_node", (), dict(TIMEOUT)),
    ("list_node", (), {"watch": True, "resource_version": "41", "timeout_seconds": 300, "allow_watch_bookmarks": True, **TIMEOUT}),
    ("list_node", (), {"limit": 500, "_continue": "token", **TIMEOUT}),
    ("patch_node", ("gpu-0", {"metadata": {"labels": {"a": "b"}}}), {"_content_type": "application/merge-patch+json", **TIMEOUT}),
    ("list_namespace", (), dict(TIMEOUT)),
    ("read_namespace", ("team-a",), dict(TIMEOUT)),
    ("list_pod_for_all_namespaces", (), {"label_selector": "a=b,c in (d)", **TIMEOUT}),
    ("list_pod_for_all_namespaces", (), {"field_selector": "spec.nodeName=", **TIMEOUT}),
    ("list_namespaced_pod", ("team-a",), {"label_selector": "ray.io/cluster=x", **TIMEOUT}),
    ("read_namespaced_pod", ("p", "team-a"), dict(TIMEOUT)),
    ("create_namespaced_pod", ("team-a", POD), dict(TIMEOUT)),
    ("delete_namespaced_pod", ("p", "team-a"), {"grace_period_seconds": 0, "body": {"preconditions": {"uid": "u-1"}}, **TIMEOUT}),
    ("delete_namespaced_pod", ("p", "team-a"), {"grace_period_seconds": 30, **TIMEOUT}),
    ("list_namespaced_pod_template", ("ns",), {"label_selector": "x=y", **TIMEOUT}),
    ("create_namespaced_pod_template", ("ns", {"kind": "PodTemplate", "template": {}}), dict(TIMEOUT)),
    ("delete_namespaced_pod_template", ("t", "ns"), dict(TIMEOUT)),
    ("list_namespaced_event", ("ns",), dict(TIMEOUT)),
    ("create_namespaced_event", ("ns", EVENT), dict(TIMEOUT)),
    ("read_namespaced_secret", ("s", "ns"), dict(TIMEOUT)),
    ("read_namespaced_config_map", ("cm", "kueue-system"), dict(TIMEOUT)),
    ("create_namespaced_config_map", ("ns", {"kind": "ConfigMap", "data": {"a": "1"}}), dict(TIMEOUT)),
]


@pytest.mark.parametrize(("name", "args", "kwargs"), ROWS, ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)])
def test_the_request_is_the_one_core_v1_api_sends(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    from kubernetes import client

    ours, theirs = _recording_client(), _recording_client()
    ours_answer = getattr(CoreApi(ours), name)(*args, **kwargs)
    theirs_answer = getattr(client.CoreV1Api(theirs), name)(*args, **kwargs)
    assert len(ours.calls) == len(theirs.calls) == 1
    assert ours.calls[0][:3] + ours.calls[0][4:] == theirs.calls[0][:3] + theirs.calls[0][4:]
    sent, theirs_sent = ours.calls[0][3], theirs.calls[0][3]
    body = kwargs.get("body", next((a for a in args if isinstance(a, dict)), None))
    assert sent == body  # the caller's JSON as it is
    assert _instants(sent) == _instants(theirs_sent)  # the client's model writes timestamps back with +00:00
    assert ours_answer.data == theirs_answer.data


def test_every_route_has_a_row() -> None:
    assert {name for name, _, _ in ROWS} == set(ROUTES)


def test_an_answer_outside_2xx_raises_what_core_v1_api_raises() -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as ours:
        CoreApi(_recording_client(404)).read_namespaced_pod("p", "ns", **TIMEOUT)
    with pytest.raises(ApiException) as theirs:
        client.CoreV1Api(_recording_client(404)).read_namespaced_pod("p", "ns", **TIMEOUT)
    assert (ours.value.status, ours.value.body) == (theirs.value.status, theirs.value.body) == (404, '{"kind": "Status"}')


@pytest.mark.parametrize(("status", "names_server"), [(503, True), (500, True), (404, False)])
def test_a_failed_call_is_said_as_through_core_v1_api(status: int, names_server: bool) -> None:
    """`kube.calls` names the server from the API object a method is bound to (a 503's one line names it)."""
    from kubernetes import client

    from raybridge.errors import RaybridgeError
    from raybridge.kube.calls import api_call

    said = []
    for api in (CoreApi(_recording_client(status)), client.CoreV1Api(_recording_client(status))):
        with pytest.raises(RaybridgeError) as failed:
            api_call("listing nodes", api.list_node, _preload_content=False)
        said.append(str(failed.value))
    assert said[0] == said[1]
    assert ("https://127.0.0.1:6443" in said[0]) is names_server, said[0]


@pytest.mark.parametrize(
    ("call", "why"),
    [
        (lambda api: api.list_node(_request_timeout=3), "models asked for (_preload_content left True)"),
        (lambda api: api.read_namespaced_pod_log("p", "ns", _preload_content=False), "a method it does not route"),
    ],
    ids=["models", "unrouted"],
)
def test_a_call_it_does_not_route_goes_to_core_v1_api(call: Any, why: str) -> None:
    api = CoreApi(_recording_client())
    call(api)
    from kubernetes import client

    assert isinstance(api._full, client.CoreV1Api), why


def test_bad_arguments_are_refused_as_the_client_refuses_them() -> None:
    api = CoreApi(_recording_client())
    with pytest.raises(TypeError, match="label_selectr"):
        api.list_node(label_selectr="a=b", _preload_content=False)
    with pytest.raises(TypeError, match="'namespace'"):
        api.list_namespaced_pod(_preload_content=False)
    with pytest.raises(TypeError, match="positional"):
        api.read_namespace("a", "b", _preload_content=False)


def test_raw_get_sends_through_the_same_request_and_raises_the_status() -> None:
    """`kube.objects.raw_get` (paths no typed API covers) goes through `send`: JSON accepted, its answer decoded, an
    answer outside 2xx an ApiException with its status."""
    from kubernetes.client.exceptions import ApiException

    from raybridge.kube.client import Kube
    from raybridge.kube.objects import raw_get

    recording = _recording_client()
    assert raw_get(Kube(recording, "default", False), "/apis/visibility.kueue.x-k8s.io/v1beta2", timeout=4) == {"items": []}
    (method, url, headers, body, _, timeout), = recording.calls
    assert (method, url, headers["Accept"], body, timeout) == ("GET", "https://127.0.0.1:6443/apis/visibility.kueue.x-k8s.io/v1beta2", "application/json", None, 4)
    with pytest.raises(ApiException) as failed:
        raw_get(Kube(_recording_client(404), "default", False), "/apis/x", retry=False)
    assert failed.value.status == 404


def test_a_copy_works_and_a_private_name_is_no_method() -> None:
    import copy

    api = copy.copy(CoreApi(_recording_client()))
    assert api.list_node(**TIMEOUT).data == b'{"items": []}'
    with pytest.raises(AttributeError):
        getattr(CoreApi.__new__(CoreApi), "_full")


def test_a_client_without_param_serialize_gets_core_v1_api() -> None:
    from kubernetes import client

    class Legacy:
        pass

    assert isinstance(core_api(_recording_client()), CoreApi)
    assert isinstance(core_api(Legacy()), client.CoreV1Api)


def test_a_command_reading_nodes_does_not_import_core_v1_api() -> None:
    """What the module is for: in a fresh interpreter, a raw-JSON read of nodes leaves CoreV1Api's module unimported."""
    code = (
        "import sys\n"
        "from raybridge.kube.client import Kube\n"
        "from tests.unit.test_kube_core_api import _recording_client\n"
        "kube = Kube(_recording_client(), 'default', False)\n"
        "from raybridge.kube.objects import list_nodes\n"
        "print(list_nodes(kube), 'kubernetes.client.api.core_v1_api' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[] False", out.stdout + out.stderr
