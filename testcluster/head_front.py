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

What it deliberately does not do: parse HTTP beyond each request's head and its Content-Length. A connection
carries the requests its client sends, each with the token put in (a kept connection stays one port-forward
stream, as a real head's keep-alive allows), or one upgraded WebSocket (log tails) whose bytes then pass unread both
ways; a request with a chunked body is the connection's last (`Connection: close` is asked of the head). A
connection idle past IDLE_TIMEOUT_SECONDS between requests is closed. A caller it cannot identify (no Linux socket
table) is refused.
The TCP front cannot tell a process of this user that forwards for others from one that does not: the stack keeps
no such forwarder (kwok runs in a network namespace of its own behind the kubelet client certificate, netjail.py;
the dashboard proxy serves the KubeRay operator alone), and the tests start none.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Optional

from testcluster.loopback import peer_is_this_user
from testcluster.netjail import Relay, peer_pid, pipe, unix_listener

__all__ = ["HeadFront", "body_length", "with_token"]

#: The most a request's head may be (request line and headers), and how long a client may take to send it.
MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT_SECONDS = 30.0
#: How long a kept connection may wait for its next request (a Ray dashboard keeps idle ones about as long).
IDLE_TIMEOUT_SECONDS = 120.0


def _header_lines(head: bytes) -> Optional[tuple[str, list[str], list[str]]]:
    """A request head's request line, header lines and lower-cased header names; None when it is no request head."""
    text = head.decode("latin-1")
    if not text.endswith("\r\n\r\n"):
        return None
    lines = text[:-4].split("\r\n")
    request_line, headers = lines[0], lines[1:]
    if len(request_line.split(" ")) != 3 or any(":" not in line for line in headers):
        return None
    return request_line, headers, [line.split(":", 1)[0].strip().lower() for line in headers]


def body_length(head: bytes) -> Optional[int]:
    """How many bytes of body follow the request head `head` before the next request may: its Content-Length (0
    without one); None when the rest of the connection is not framed as requests (an upgrade, a chunked body) or
    the head is no request head or names an unreadable length."""
    parsed = _header_lines(head)
    if parsed is None:
        return None
    _, headers, names = parsed
    if "upgrade" in names or "transfer-encoding" in names:
        return None
    lengths = {line.split(":", 1)[1].strip() for line, name in zip(headers, names) if name == "content-length"}
    if not lengths:
        return 0
    [length] = lengths if len(lengths) == 1 else [""]
    return int(length) if length.isdigit() else None


def with_token(head: bytes, token: str) -> Optional[bytes]:
    """The request head `head` (up to and including its blank line) with `Authorization: Bearer <token>` in place
    of any the client sent; a request whose body is not framed by a length (chunked) also asks the head to close
    the connection after it. None when it is no request head."""
    parsed = _header_lines(head)
    if parsed is None:
        return None
    request_line, headers, names = parsed
    last = "upgrade" not in names and "transfer-encoding" in names
    kept = [line for line, name in zip(headers, names) if name != "authorization" and not (last and name == "connection")]
    added = [f"Authorization: Bearer {token}"] + (["Connection: close"] if last else [])
    return ("\r\n".join([request_line, *kept, *added]) + "\r\n\r\n").encode("latin-1")


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
        onward = self._pass_requests if token is not None else None
        self._relay = Relay(listener, self._dial, admit, name="head-front", onward=onward)

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

    def _pass_requests(self, client: socket.socket, upstream: socket.socket) -> None:
        """The client's requests on to the head, each head with the token put in and its body after it, until the
        client ends, sends no request head in time, or sends what cannot be framed; then the head is told no more
        comes. An upgrade or a chunked body ends the framing: the rest passes unread."""
        assert self.token is not None
        buffered = b""
        try:
            while True:
                client.settimeout(IDLE_TIMEOUT_SECONDS if not buffered else HEAD_TIMEOUT_SECONDS)
                while b"\r\n\r\n" not in buffered:
                    chunk = client.recv(65536)
                    if not chunk or len(buffered) + len(chunk) > MAX_HEAD_BYTES:
                        return
                    buffered += chunk
                    client.settimeout(HEAD_TIMEOUT_SECONDS)
                end = buffered.index(b"\r\n\r\n") + 4
                head, buffered = buffered[:end], buffered[end:]
                rewritten = with_token(head, self.token)
                if rewritten is None:
                    return
                upstream.sendall(rewritten)
                remaining = body_length(head)
                if remaining is None:  # the rest is not requests: passed on as it comes
                    upstream.sendall(buffered)
                    client.settimeout(None)
                    pipe(client, upstream)
                    return
                client.settimeout(HEAD_TIMEOUT_SECONDS)
                while remaining > 0:
                    if not buffered:
                        buffered = client.recv(min(65536, remaining))
                        if not buffered:
                            return
                    part, buffered = buffered[:remaining], buffered[remaining:]
                    upstream.sendall(part)
                    remaining -= len(part)
        except OSError:
            return
        finally:
            try:
                upstream.shutdown(socket.SHUT_WR)
            except OSError:
                pass
