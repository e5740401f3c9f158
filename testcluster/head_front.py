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

What it deliberately does not do: parse HTTP beyond a request's head. Each connection carries one
request (`Connection: close` is asked of the head, so a client opens the next one anew) or one
upgraded WebSocket (log tails), whose bytes are then passed on unread both ways. It keeps no
connection open past the session. A caller it cannot identify (no Linux socket table) is refused.
The TCP front cannot tell a process of this user that forwards for others from one that does not: the stack keeps
no such forwarder (kwok runs in a network namespace of its own behind the kubelet client certificate, netjail.py;
the dashboard proxy serves the KubeRay operator alone), and the tests start none.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Optional

from testcluster.loopback import peer_is_this_user
from testcluster.netjail import Relay, peer_pid, unix_listener

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
        opening = self._rewritten_head if token is not None else (lambda connection: b"")
        self._relay = Relay(listener, self._dial, admit, name="head-front", opening=opening)

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

    def _rewritten_head(self, client: socket.socket) -> Optional[bytes]:
        """The client's request head with the token in, and whatever of its body came with it; None if it sends
        no request head in time."""
        assert self.token is not None
        client.settimeout(HEAD_TIMEOUT_SECONDS)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk or len(head) + len(chunk) > MAX_HEAD_BYTES:
                return None
            head += chunk
        end = head.index(b"\r\n\r\n") + 4
        rewritten = with_token(head[:end], self.token)
        return None if rewritten is None else rewritten + head[end:]
