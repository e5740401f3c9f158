"""kube/portforward.py: a port-forward stream opened while another thread calls the API does not take that call over.

The official client's `stream`/`portforward` swap `call_api` on the ApiClient they are given for as long as the
stream's handshake runs (kubernetes/stream/stream.py `_websocket_request`). Opened on the command's shared client,
a dashboard connection's stream turned a RayJob poll or delete made meanwhile by another thread into a port-forward
request, which failed "Missing required parameter `ports`" (seen as a submit that could not delete its RayJob).
"""

from __future__ import annotations

import threading

from kubernetes import client

from raybridge.kube.client import Kube
from raybridge.kube.portforward import PortForward


def test_a_call_made_during_a_streams_handshake_goes_out_as_itself(monkeypatch):
    shared = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # port 9: nothing answers
    forward = PortForward(Kube(shared, "team", in_cluster=False), "team", "head-0", 8265)
    in_handshake, call_done = threading.Event(), threading.Event()
    serialize = client.CoreV1Api._connect_get_namespaced_pod_portforward_serialize

    def slow_serialize(self, *args, **kwargs):  # the stream's handshake, held open until the other call is done
        in_handshake.set()
        call_done.wait(10)
        return serialize(self, *args, **kwargs)

    monkeypatch.setattr(client.CoreV1Api, "_connect_get_namespaced_pod_portforward_serialize", slow_serialize)
    opener = threading.Thread(target=lambda: _ignore_errors(forward._open_stream), daemon=True)
    opener.start()
    assert in_handshake.wait(10)
    try:
        client.CoreV1Api(shared).list_namespaced_pod("team", _request_timeout=2)
        failure: BaseException | None = None
    except BaseException as exc:  # nothing listens: a connection error is the call going out as itself
        failure = exc
    finally:
        call_done.set()
        opener.join(10)
    assert "ports" not in str(failure), failure
    assert shared.call_api == client.ApiClient.call_api.__get__(shared)  # the shared client is left as it was


def _ignore_errors(fn):
    try:
        fn()
    except Exception:
        pass
