"""A local TCP port that forwards to a pod's port through the Kubernetes API.

What `kubectl port-forward pod/x 8265` does, with the official client: a
listener on 127.0.0.1, and for each accepted connection a new port-forward
stream (`kubernetes.stream.portforward`), bytes pumped both ways. Used to
reach the Ray dashboard of a KubeRay head from outside the cluster.

`start` opens one stream first, so a port-forward the API refuses (RBAC, a
pod not running) fails there with the server's reason rather than later as a
dead local port. It does not pick the pod (the launcher does) and never
listens beyond loopback.

The official client pumps each stream in a thread of its own ("Kubernetes port forward proxy: PORT"), which ends
in an uncaught exception when the stream is cut (the pod went away, the API server closed it): Python would print
that traceback on the user's terminal. raybridge's side of the stream sees the cut as a closed connection and
acts on it, so those threads' exceptions are logged at debug level (`-v`), not printed (`_quiet_stream_threads`).
"""

from __future__ import annotations

import logging
import re
import select
import socket
import threading
from typing import Any, Optional

from raybridge.kube.calls import api_call
from raybridge.kube.client import Kube

#: The name the official client gives its port-forward threads (kubernetes/stream/ws_client.py PortForward).
CLIENT_THREAD_PREFIX = "Kubernetes port forward proxy"
_log = logging.getLogger(__name__)
_hook_lock = threading.Lock()
_hooked = False


def _quiet_stream_threads() -> None:
    """Route an uncaught exception of the client's port-forward threads to the debug log; every other thread's
    exception goes to the hook that was there before."""
    global _hooked
    with _hook_lock:
        if _hooked:
            return
        previous = threading.excepthook

        def hook(args: "threading.ExceptHookArgs") -> None:
            thread = args.thread
            if thread is not None and thread.name.startswith(CLIENT_THREAD_PREFIX):
                _log.debug("port-forward stream ended: %s: %s", getattr(args.exc_type, "__name__", args.exc_type), args.exc_value)
                return
            previous(args)

        threading.excepthook = hook
        _hooked = True


class PortForward:
    def __init__(self, kube: Kube, namespace: str, pod: str, remote_port: int) -> None:
        self.kube = kube
        self.namespace = namespace
        self.pod = pod
        self.remote_port = remote_port
        self._listener: Optional[socket.socket] = None
        self._closed = threading.Event()
        self.local_port: Optional[int] = None

    def start(self, local_port: int = 0) -> int:
        """Listen on 127.0.0.1 (`local_port`, else one the kernel picks) and forward; the port."""
        _quiet_stream_threads()
        self._check_allowed()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("127.0.0.1", local_port))
        except OSError as exc:
            listener.close()
            from raybridge.errors import BadInput

            raise BadInput(f"cannot listen on 127.0.0.1:{local_port}: {exc.strerror} (choose another --port)") from None
        listener.listen(16)
        self._listener = listener
        self.local_port = int(listener.getsockname()[1])
        threading.Thread(target=self._accept, name="raybridge-port-forward", daemon=True).start()
        return self.local_port

    def _check_allowed(self) -> None:
        """Open one stream now, so a refusal (no RBAC for pods/portforward, a pod not running) is an error here, not a dead port later."""
        forward = api_call(f"port-forwarding to pod {self.namespace}/{self.pod}", self._open_stream_with_status)
        try:
            forward.close()  # type: ignore[union-attr]
        except Exception:
            pass

    def _open_stream_with_status(self) -> Any:
        """`_open_stream`; a refused WebSocket handshake re-raised with its HTTP status and Status body (the client packs both into `reason`)."""
        from kubernetes.client.exceptions import ApiException

        try:
            return self._open_stream()
        except ApiException as exc:
            text = str(exc.reason or "")
            found = re.match(r"Handshake status (\d+)", text)
            if not found or exc.status:
                raise
            refused = ApiException(status=int(found.group(1)), reason=text.split(" -+-+- ", 1)[0])
            refused.body = text.rsplit(" -+-+- ", 1)[-1]
            raise refused from None

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _open_stream(self) -> Any:
        """A port-forward stream, opened on an ApiClient of its own (the command's configuration).

        The client's `portforward` swaps `call_api` on the ApiClient it is given while the handshake runs
        (kubernetes/stream/stream.py `_websocket_request`): on the command's shared client, a RayJob poll or
        delete another thread made meanwhile went out as a port-forward and failed "Missing required parameter
        `ports`". The stream's WebSocket is its own connection, so the private client is closed once it is open."""
        from kubernetes import client
        from kubernetes.stream import portforward

        own = client.ApiClient(self.kube.api_client.configuration)
        try:
            core = client.CoreV1Api(own)
            return portforward(core.connect_get_namespaced_pod_portforward, self.pod, self.namespace, ports=str(self.remote_port))
        finally:
            own.close()

    def _serve(self, conn: socket.socket) -> None:
        forward = None
        try:
            forward = self._open_stream()
            remote = forward.socket(self.remote_port)
            remote.setblocking(True)
            _pump(conn, remote, self._closed)
        except Exception:
            pass
        finally:
            conn.close()
            if forward is not None:
                try:
                    forward.close()
                except Exception:
                    pass

    def close(self) -> None:
        self._closed.set()
        if self._listener is not None:
            try:
                self._listener.close()
            except OSError:
                pass

    def __enter__(self) -> "PortForward":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _pump(a: socket.socket, b: Any, closed: threading.Event) -> None:
    """Copy bytes both ways until either side closes."""
    while not closed.is_set():
        readable, _, _ = select.select([a, b], [], [], 0.5)
        for source in readable:
            target = b if source is a else a
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            try:
                target.sendall(data)
            except OSError:
                return
