"""A door to a Ray head with token authentication, for this user's processes or for chosen ones, that adds the token.

Why: the tests' shared head, and the head of `python -m testcluster up`, stand for Ray clusters without
authentication (the simulated and the real cluster's head pods, a cluster reached by address), so what talks to them
sends no token. The heads themselves run as `submit` runs one, with Ray's token authentication on: left open, any
local user could submit a job to one and run code as whoever runs the tests (root, in CI). A front hands each
request on to the head with the head's token added, and lets in only:
- on loopback TCP (the tests' front, which the tests' own processes use): a connection whose socket the kernel's
  socket table says belongs to this user;
- on a Unix socket in the stack's private directory (the stack's door, which head pods' port-forwards reach): a
  connection from a process the stack names (kwok's network namespace, whose only way in is the API server's
  kubelet client certificate, and the stack's own dashboard proxy), by the peer's process id (SO_PEERCRED).

What it deliberately does not do: parse HTTP beyond each request's head and its `Content-Length`. A connection
carries request after request (HTTP keep-alive, as the head's own server does: a client's port-forward then lasts
as long as its connection, not one request), each head given the token; an upgraded WebSocket (log tails), or a
body of no stated length (chunked), is passed on unread both ways after its head, and the connection ends with it.
Responses pass back unread. An idle connection is closed after IDLE_SECONDS; it keeps no connection open past the
session. A caller it cannot identify (no Linux socket table) is refused.
The TCP front cannot tell a process of this user that forwards for others from one that does not: the stack keeps
no such forwarder (kwok runs in a network namespace of its own behind the kubelet client certificate, netjail.py;
the dashboard proxy serves the KubeRay operator alone), and the tests start none.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Optional

from testcluster.loopback import peer_is_this_user
from testcluster.netjail import Relay, peer_pid, unix_listener

__all__ = ["HeadFront", "with_token"]

#: The most a request's head may be (request line and headers), and how long a client may take to send it.
MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT_SECONDS = 30.0
#: How long a kept-alive connection may wait for its next request.
IDLE_SECONDS = 120.0


def with_token(head: bytes, token: str) -> Optional[bytes]:
    """The request head `head` (up to and including its blank line) with `Authorization: Bearer <token>` in place
    of any the client sent; None when it is no request head. Its other headers pass as they came."""
    read = _read_head(head)
    if read is None:
        return None
    request_line, headers, _names = read
    kept = [line for line in headers if line.split(":", 1)[0].strip().lower() != "authorization"]
    return ("\r\n".join([request_line, *kept, f"Authorization: Bearer {token}"]) + "\r\n\r\n").encode("latin-1")


def body_length(head: bytes) -> Optional[int]:
    """The bytes of body that follow the request head `head`: its Content-Length, 0 when it states none and is not
    chunked; None where the body's end cannot be told from the head (chunked, an upgrade, a malformed length)."""
    read = _read_head(head)
    if read is None:
        return None
    _line, headers, names = read
    values = {name: line.split(":", 1)[1].strip() for line, name in zip(headers, names)}
    if "upgrade" in names or "transfer-encoding" in names:
        return None
    length = values.get("content-length", "0")
    return int(length) if length.isdigit() else None


def _read_head(head: bytes) -> Optional[tuple[str, list[str], list[str]]]:
    text = head.decode("latin-1")
    if not text.endswith("\r\n\r\n"):
        return None
    lines = text[:-4].split("\r\n")
    request_line, headers = lines[0], lines[1:]
    if len(request_line.split(" ")) != 3 or any(":" not in line for line in headers):
        return None
    return request_line, headers, [line.split(":", 1)[0].strip().lower() for line in headers]


class HeadFront:
    """A door in front of the head's dashboard at `upstream` ("127.0.0.1:PORT"), adding `token` to each request.

    On loopback TCP (the default) it lets in this user's sockets; on a Unix socket (`unix_path`, in a private
    directory) only the processes in `admitted`, by the process id the kernel records for the peer. With `token`
    None it passes bytes on unread (a door to a head that another front already guards)."""

    def __init__(self, upstream: str, token: Optional[str], unix_path: Optional[Path] = None) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.token = token
        #: The processes a Unix door lets in.
        self.admitted: set[int] = set()
        self.unix_path = unix_path
        if unix_path is None:
            listener = socket.create_server(("127.0.0.1", 0))
            self.port = listener.getsockname()[1]
            admit = self._this_user
        else:
            listener = unix_listener(unix_path)
            self.port = 0
            admit = self._admitted_process
        self._relay = Relay(listener, self._dial, admit, name="head-front", pump=self._requests if token is not None else None)

    @property
    def netloc(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def refused(self) -> int:
        return self._relay.refused

    def close(self) -> None:
        self._relay.close()
        if self.unix_path is not None:
            self.unix_path.unlink(missing_ok=True)

    def _this_user(self, client: socket.socket) -> bool:
        try:
            peer_port = client.getpeername()[1]
        except OSError:
            return False
        return peer_is_this_user(self.port, peer_port)

    def _admitted_process(self, client: socket.socket) -> bool:
        return peer_pid(client) in self.admitted

    def _dial(self) -> socket.socket:
        return socket.create_connection(self.upstream, timeout=HEAD_TIMEOUT_SECONDS)

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        """Request after request from `client` to `upstream`, each head with the token; the answers pass back
        unread. Ends (both closed) when either end does, at a request that is no request, after an upgrade or a body
        of unstated length has been passed on, or when the client idles IDLE_SECONDS between requests."""
        assert self.token is not None
        upstream.settimeout(None)
        back = threading.Thread(target=_answers, args=(upstream, client), daemon=True)
        back.start()
        pending = b""
        timeout = HEAD_TIMEOUT_SECONDS
        try:
            while True:
                head, pending = _next_head(client, pending, timeout)
                rewritten = with_token(head, self.token) if head is not None else None
                if head is None or rewritten is None:
                    return
                upstream.sendall(rewritten)
                length = body_length(head)
                if length is None:  # an upgrade, or a body whose end the head does not say: the rest unread
                    if pending:
                        upstream.sendall(pending)
                    client.settimeout(None)
                    while chunk := client.recv(65536):  # the answers already flow back (`_answers`)
                        upstream.sendall(chunk)
                    return
                body, pending = pending[:length], pending[length:]
                upstream.sendall(body)
                left = length - len(body)
                client.settimeout(HEAD_TIMEOUT_SECONDS)
                while left:
                    chunk = client.recv(min(65536, left))
                    if not chunk:
                        return
                    upstream.sendall(chunk)
                    left -= len(chunk)
                timeout = IDLE_SECONDS
        except OSError:
            return
        finally:
            for end in (upstream, client):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            back.join(5)
            client.close()
            upstream.close()


def _next_head(client: socket.socket, pending: bytes, timeout: float) -> tuple[Optional[bytes], bytes]:
    """The next request head from `client` (what was read past the last body first), and what followed it; None at
    the end of the connection, past `timeout`, or past MAX_HEAD_BYTES."""
    client.settimeout(timeout)
    while b"\r\n\r\n" not in pending:
        try:
            chunk = client.recv(65536)
        except OSError:
            return None, b""
        if not chunk or len(pending) + len(chunk) > MAX_HEAD_BYTES:
            return None, b""
        pending += chunk
    end = pending.index(b"\r\n\r\n") + 4
    return pending[:end], pending[end:]


def _answers(upstream: socket.socket, client: socket.socket) -> None:
    """The head's answers back to the client, unread, until the head ends the connection; then the client's too."""
    try:
        while True:
            chunk = upstream.recv(65536)
            if not chunk:
                break
            client.sendall(chunk)
    except OSError:
        pass
    try:
        client.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
