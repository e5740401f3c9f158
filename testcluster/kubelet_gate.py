"""The nodes' kubelet port: TLS that lets in the API server's kubelet client certificate alone, in front of kwok.

Why: kwok plays every node's kubelet, and its server authenticates no one (sigs.k8s.io/kwok v0.8.0
pkg/kwok/server/server.go `Run`: TLS without client certificates, and plain HTTP on the same port); a
`/portForward/<ns>/<pod>?port=8265` it serves reaches the Ray head whoever asked. So kwok runs in a network namespace
of its own (netjail.py), and the port every node names as its kubelet's is this gate: it completes the TLS
handshake only with a client certificate of the stack's CA, lets the connection in only when that certificate names
the API server's kubelet client (`--kubelet-client-certificate`), and passes the plain bytes on to kwok's server
through a Unix socket in the stack's private directory. Port-forwards, logs and exec then reach kwok only as the API
server asks for them, after its own authentication and RBAC.

It runs on an asyncio loop of its own thread: one TLS connection is read and written at once, which an `SSLSocket`
shared by two threads does not allow.

A port-forward ends with its pod, as on a kubelet, where the container it reaches is stopped when the pod is deleted:
kwok's forward leads to a Ray head that outlives every head pod it stands for, so the gate reads the first line of
each connection, keeps the port-forwards by pod, and `end_port_forwards` closes a deleted pod's (kwok.py watches for
it) and turns away new ones to it. Without this a kept connection to a head pod outlived the pod.

What it does not do: read HTTP beyond a connection's request line (the bytes pass unread, HTTP/1.1 alone offered
by ALPN, as kwok's plain port speaks), authorize per request (the API server has), or serve anything but kwok.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from pathlib import Path
from typing import Any, Optional

__all__ = ["KubeletGate", "port_forwarded_pod"]

#: How long a client may take over its TLS handshake, and the gate to reach kwok.
HANDSHAKE_TIMEOUT_SECONDS = 10.0


class KubeletGate:
    """TLS on 127.0.0.1 (a port the kernel picks) with `cert`/`key`; a client certificate from `ca_file` whose
    common name is `client_name` is let through to the Unix socket `target`, every other connection is closed."""

    def __init__(self, cert: Path, key: Path, ca_file: Path, client_name: str, target: Path) -> None:
        self.client_name = client_name
        self.target = target
        self.refused = 0
        #: The open port-forwards by (namespace, pod), and the pods whose port-forwards have ended for good.
        self._forwards: dict[tuple[str, str], set[asyncio.StreamWriter]] = {}
        self._ended: set[tuple[str, str]] = set()
        #: What tells the gate of pods deleted (kwok.py's watch), stopped with it.
        self.pod_watch: Optional[Any] = None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca_file))
        context.load_cert_chain(str(cert), str(key))
        context.verify_mode = ssl.CERT_REQUIRED
        context.set_alpn_protocols(["http/1.1"])
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(lambda loop, context: None)  # failed handshakes are refusals, not errors
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubelet-gate", daemon=True)
        self._thread.start()
        starting = asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=context, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_SECONDS)
        self._server = asyncio.run_coroutine_threadsafe(starting, self._loop).result(10)
        self.port: int = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        if self.pod_watch is not None:
            self.pod_watch.stop()

        async def closing() -> None:
            """No new connections, and the open ones ended here, on the running loop (their clean-up needs it)."""
            self._server.close()
            serving = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in serving:
                task.cancel()
            await asyncio.gather(*serving, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(closing(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def port_forwarded_pods(self) -> set[tuple[str, str]]:
        """The (namespace, pod) pairs with a port-forward open now."""
        return {pod for pod, streams in list(self._forwards.items()) if streams}

    def end_port_forwards(self, namespace: str, pod: str) -> None:
        """Closes every port-forward to the pod and turns away new ones: the pod is gone."""

        def ending() -> None:
            self._ended.add((namespace, pod))
            for writer in self._forwards.pop((namespace, pod), set()):
                writer.transport.abort()

        self._loop.call_soon_threadsafe(ending)

    def pod_started(self, namespace: str, pod: str) -> None:
        """A pod of this name exists anew (a name used again): its port-forwards are served."""
        self._loop.call_soon_threadsafe(self._ended.discard, (namespace, pod))

    def _admitted(self, writer: asyncio.StreamWriter) -> bool:
        certificate = writer.get_extra_info("peercert") or {}
        names = [value for field in certificate.get("subject", ()) for key, value in field if key == "commonName"]
        return names == [self.client_name]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._admitted(writer):
            self.refused += 1
            writer.close()
            return
        try:
            request_line = await asyncio.wait_for(reader.readline(), HANDSHAKE_TIMEOUT_SECONDS)
            kwok_reader, kwok_writer = await asyncio.wait_for(asyncio.open_unix_connection(str(self.target)), HANDSHAKE_TIMEOUT_SECONDS)
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ValueError):
            writer.close()
            return
        pod = port_forwarded_pod(request_line)
        if pod in self._ended:
            writer.close()
            kwok_writer.close()
            return
        streams = self._forwards.setdefault(pod, set()) if pod is not None else set()
        streams.add(writer)
        try:
            kwok_writer.write(request_line)
            await asyncio.gather(_copy(reader, kwok_writer), _copy(kwok_reader, writer))
        finally:
            streams.discard(writer)
            writer.close()
            kwok_writer.close()


def port_forwarded_pod(request_line: bytes) -> Optional[tuple[str, str]]:
    """The (namespace, pod) a kubelet request line asks to port-forward to (`POST /portForward/<ns>/<pod>?...`)."""
    parts = request_line.split(b" ")
    if len(parts) != 3:
        return None
    path = parts[1].split(b"?", 1)[0].decode("latin-1").split("/")
    if len(path) < 4 or path[1] != "portForward" or not path[2] or not path[3]:
        return None
    return path[2], path[3]


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes from `reader` to `writer` until `reader` ends; then `writer` is told (EOF where it can take one, a TLS
    connection is closed)."""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
        pass
    try:
        if writer.can_write_eof():
            writer.write_eof()
        else:
            writer.close()
    except (OSError, RuntimeError):
        pass
