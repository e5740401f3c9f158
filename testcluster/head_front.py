"""A door to a Ray head with token authentication, for this user's processes alone, that adds the token.

Why: the tests' shared head stands for Ray clusters without authentication (the simulated and the
real cluster's head pods, a cluster reached by address), so what talks to it sends no token. The
head itself runs as `submit` runs one, with Ray's token authentication on: left open, any local user
could submit a job to it and run code as whoever runs the tests (root, in CI). This front listens
on loopback, accepts a connection only when the kernel's socket table says the connecting socket
belongs to this user, and hands each request on to the head with the head's token added.

What it deliberately does not do: parse HTTP beyond a request's head. Each connection carries one
request (`Connection: close` is asked of the head, so a client opens the next one anew) or one
upgraded WebSocket (log tails), whose bytes are then passed on unread both ways. It keeps no
connection open past the session. A caller it cannot identify (no Linux socket table) is refused.
Processes of this user that forward for others (kwok's port-forward, which authenticates nobody)
are let through: the front can only see who connected to it.
"""

from __future__ import annotations

import socket
import threading
from typing import Optional

from testcluster.loopback import peer_is_this_user

__all__ = ["HeadFront", "with_token"]

#: The most a request's head may be (request line and headers), and how long a client may take to send it.
MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT_SECONDS = 30.0


def with_token(head: bytes, token: str) -> Optional[bytes]:
    """The request head `head` (up to and including its blank line) with `Authorization: Bearer <token>` in place
    of any the client sent, and `Connection: close` unless it asks for an upgrade; None when it is no request head."""
    text = head.decode("latin-1")
    if not text.endswith("\r\n\r\n"):
        return None
    lines = text[:-4].split("\r\n")
    request_line, headers = lines[0], lines[1:]
    if len(request_line.split(" ")) != 3 or any(":" not in line for line in headers):
        return None
    names = [line.split(":", 1)[0].strip().lower() for line in headers]
    upgrade = "upgrade" in names
    kept = [line for line, name in zip(headers, names) if name != "authorization" and (upgrade or name != "connection")]
    added = [f"Authorization: Bearer {token}"] + ([] if upgrade else ["Connection: close"])
    return ("\r\n".join([request_line, *kept, *added]) + "\r\n\r\n").encode("latin-1")


class HeadFront:
    """A loopback listener in front of the head's dashboard at `upstream` ("127.0.0.1:PORT"), adding `token`."""

    def __init__(self, upstream: str, token: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.token = token
        self.refused = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="head-front", daemon=True)
        self._thread.start()

    @property
    def netloc(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()  # wake accept()
        except OSError:
            pass
        self._thread.join(5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, (_, peer_port) = self._listener.accept()
            except OSError:
                return
            if self._stop.is_set():
                client.close()
                return
            threading.Thread(target=self._relay, args=(client, peer_port), name="head-front-relay", daemon=True).start()

    def _relay(self, client: socket.socket, peer_port: int) -> None:
        upstream: Optional[socket.socket] = None
        if not peer_is_this_user(self.port, peer_port):  # looked up here, so a slow lookup holds up no other caller
            self.refused += 1
            client.close()
            return
        try:
            client.settimeout(HEAD_TIMEOUT_SECONDS)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk or len(head) + len(chunk) > MAX_HEAD_BYTES:
                    return
                head += chunk
            end = head.index(b"\r\n\r\n") + 4
            rewritten = with_token(head[:end], self.token)
            if rewritten is None:
                return
            upstream = socket.create_connection(self.upstream, timeout=HEAD_TIMEOUT_SECONDS)
            upstream.sendall(rewritten + head[end:])
            client.settimeout(None)
            upstream.settimeout(None)
            back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join()
        except OSError:
            return
        finally:
            client.close()
            if upstream is not None:
                upstream.close()


def _pipe(source: socket.socket, target: socket.socket) -> None:
    """Bytes from `source` to `target` until `source` ends; then `target` is told no more will come."""
    try:
        while True:
            chunk = source.recv(65536)
            if not chunk:
                break
            target.sendall(chunk)
    except OSError:
        pass
    try:
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass
