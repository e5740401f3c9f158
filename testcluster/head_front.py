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
  kubelet client certificate, and the stack's own dashboard proxy), by the peer's process id (SO_PEERCRED), or from
  a descendant of a process the stack names a forwarder (kwok's: the relay it runs per port-forward stream of a head
  pod, pod_relay.py), which must first name its pod in one line (`POD <namespace>/<name>`).

A connection that names its pod is held to that pod's Ray cluster's token, as the pod's own head would hold it: when
the RayCluster has KubeRay's token authentication (`spec.authOptions.mode: token`), each request without the token
of the cluster's Secret is answered 401, with another token 403, as Ray's dashboard answers (ray 2.x
_private/authentication/http_token_authentication.py `token_auth_middleware`, its public paths from
dashboard/http_server_head.py), and is not passed on; a passed request then gets the head's own token as any other.

What it deliberately does not do: parse HTTP beyond each request's head and its Content-Length; read the token from
a cookie (Ray's dashboard also takes one, for browsers). A connection
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

import hmac
import re
import socket
from pathlib import Path
from typing import Callable, Optional

from testcluster.loopback import peer_is_this_user
from testcluster.netjail import Relay, peer_pid, pipe, unix_listener

__all__ = ["HeadFront", "PodToken", "body_length", "parse_preface", "token_refusal", "with_token"]

#: The most a request's head may be (request line and headers), and how long a client may take to send it.
MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT_SECONDS = 30.0
#: How long a kept connection may wait for its next request (a Ray dashboard keeps idle ones about as long).
IDLE_TIMEOUT_SECONDS = 120.0
#: The most a pod-naming line may be: "POD ", a namespace (63) and a pod name (253), a slash and the newline.
MAX_PREFACE_BYTES = 4 + 63 + 1 + 253 + 1
#: A namespace (a DNS-1123 label) and a pod name (a DNS-1123 subdomain), as the API server validates them.
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_POD_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
#: Paths Ray's dashboard serves without a token (ray 2.x dashboard/http_server_head.py `public_exact_paths` and
#: `public_path_prefixes`).
PUBLIC_PATHS = frozenset({
    "/", "/favicon.ico", "/api/authentication_mode", "/api/authenticate", "/api/healthz", "/api/gcs_healthz",
    "/api/local_raylet_healthz", "/-/healthz",
})  # fmt: skip
PUBLIC_PATH_PREFIXES = ("/static/",)
#: How far up the process tree a Unix door looks for a forwarder.
MAX_ANCESTORS = 32

#: The token a head pod's Ray cluster demands (None: no token authentication), from (namespace, pod name); raises
#: when it cannot tell.
PodToken = Callable[[str, str], Optional[str]]


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


def parse_preface(line: bytes) -> Optional[tuple[str, str]]:
    """(namespace, pod name) from the line a pod's relay sends first (`POD <namespace>/<name>`, newline included);
    None when it is no such line."""
    text = line.decode("ascii", "replace")
    word, _, pod = text.rstrip("\n").partition(" ")
    namespace, _, name = pod.partition("/")
    if not text.endswith("\n") or word != "POD" or not _NAMESPACE.fullmatch(namespace) or not _POD_NAME.fullmatch(name):
        return None
    return namespace, name


def _response(status: int, reason: str, text: str) -> bytes:
    """An answer as Ray's dashboard (aiohttp `web.Response(status=..., text=...)`) writes it, ending the connection."""
    body = text.encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode() + body  # fmt: skip


def token_refusal(head: bytes, token: str) -> Optional[bytes]:
    """Ray's answer to the request head `head` when its cluster demands `token` and the request lacks it (401) or
    carries another (403); None when it may pass (or is no request head: the caller refuses that). The token is
    read from `Authorization`, else `X-Ray-Authorization` (the proxies' header), as `token_auth_middleware` reads it."""
    parsed = _header_lines(head)
    if parsed is None:
        return None
    request_line, headers, names = parsed
    path = request_line.split(" ")[1].split("?", 1)[0]
    if path in PUBLIC_PATHS or path.startswith(PUBLIC_PATH_PREFIXES):
        return None
    values = {name: line.split(":", 1)[1].strip() for line, name in zip(headers, names)}
    given = values.get("authorization") or values.get("x-ray-authorization") or ""
    if not given:
        return _response(401, "Unauthorized", "Unauthorized: Missing authentication token")
    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return _response(403, "Forbidden", "Forbidden: Invalid authentication token")
    return None


def _hang_up(upstream: socket.socket) -> None:
    """Both ways of `upstream` shut, so that its answer to nothing is not waited for."""
    try:
        upstream.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def parent_pid(pid: int) -> Optional[int]:
    """The parent of process `pid` (/proc/PID/stat's fourth field), None when it is gone or unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


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
    directory) only the processes in `admitted`, by the process id the kernel records for the peer, and the
    descendants of those in `forwarders`, which name their pod first and are held to its cluster's token
    (`pod_token`). With `token` None it passes the bytes of a connection that names no pod on unread (a door to a
    head that another front already guards)."""

    def __init__(self, upstream: str, token: Optional[str], unix_path: Optional[Path] = None) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.token = token
        #: The processes a Unix door lets in.
        self.admitted: set[int] = set()
        #: The processes whose descendants a Unix door lets in, each connection naming its pod first.
        self.forwarders: set[int] = set()
        #: What a pod's cluster demands; unset, a connection that names a pod is answered 503.
        self.pod_token: Optional[PodToken] = None
        #: Requests refused for want of their pod's token (401 or 403), and connections that named a pod.
        self.token_refusals = 0
        self.pod_connections = 0
        self.unix_path = unix_path
        if unix_path is None:
            listener = socket.create_server(("127.0.0.1", 0))
            self.port = listener.getsockname()[1]
            admit = self._this_user
        else:
            listener = unix_listener(unix_path)
            self.port = 0
            admit = self._admitted_process
        onward = self._pass_requests if token is not None or unix_path is not None else None
        self._relay = Relay(listener, self._dial, admit, name="head-front", onward=onward)

    @property
    def netloc(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def refused(self) -> int:
        return self._relay.refused

    def close(self) -> None:
        self._relay.close()
        close_lookup = getattr(self.pod_token, "close", None)
        if close_lookup is not None:
            close_lookup()
        if self.unix_path is not None:
            self.unix_path.unlink(missing_ok=True)

    def _this_user(self, client: socket.socket) -> bool:
        try:
            peer_port = client.getpeername()[1]
        except OSError:
            return False
        return peer_is_this_user(self.port, peer_port)

    def _admitted_process(self, client: socket.socket) -> bool:
        pid = peer_pid(client)
        return pid is not None and (pid in self.admitted or self._forwarded(pid))

    def _forwarded(self, pid: int) -> bool:
        """Whether a forwarder is among the ancestors of process `pid` (not `pid` itself)."""
        ancestor: Optional[int] = pid
        for _ in range(MAX_ANCESTORS):
            ancestor = parent_pid(ancestor) if ancestor is not None else None
            if ancestor is None or ancestor <= 1:
                return False
            if ancestor in self.forwarders:
                return True
        return False

    def _read_preface(self, client: socket.socket) -> tuple[Optional[tuple[str, str]], bytes]:
        """The pod a forwarder's connection names, and what followed its line; (None, b"") when it names none."""
        buffered = b""
        client.settimeout(HEAD_TIMEOUT_SECONDS)
        while b"\n" not in buffered:
            chunk = client.recv(MAX_PREFACE_BYTES)
            if not chunk or len(buffered) + len(chunk) > MAX_PREFACE_BYTES + MAX_HEAD_BYTES:
                return None, b""
            buffered += chunk
        end = buffered.index(b"\n") + 1
        if end > MAX_PREFACE_BYTES:
            return None, b""
        return parse_preface(buffered[:end]), buffered[end:]

    def _demanded_token(self, client: socket.socket) -> tuple[bool, Optional[str], bytes]:
        """For a connection from a forwarder's descendant: (whether it may go on, the token its pod's cluster demands
        or None, the bytes read past its first line). Other connections go on, demanding nothing."""
        pid = peer_pid(client)
        if self.unix_path is None or pid is None or pid in self.admitted:
            return True, None, b""
        pod, rest = self._read_preface(client)
        if pod is None:
            return False, None, b""
        self.pod_connections += 1
        try:
            if self.pod_token is None:
                raise LookupError("no lookup of pods' tokens")
            return True, self.pod_token(*pod), rest
        except Exception as exc:  # noqa: BLE001 - an API server slow or refusing: this connection fails, not the door
            client.sendall(_response(503, "Service Unavailable", f"the test cluster cannot tell the token of pod {pod[0]}/{pod[1]}: {exc}"))
            return False, None, b""

    def _dial(self) -> socket.socket:
        return socket.create_connection(self.upstream, timeout=HEAD_TIMEOUT_SECONDS)

    def _pass_requests(self, client: socket.socket, upstream: socket.socket) -> None:
        """The client's requests on to the head, each head with the token put in and its body after it, until the
        client ends, sends no request head in time, or sends what cannot be framed; then the head is told no more
        comes. An upgrade or a chunked body ends the framing: the rest passes unread. A connection that names its pod
        is held to its cluster's token first; one that names none, at a door without a token, passes unread."""
        try:
            admitted, demanded, buffered = self._demanded_token(client)
            if not admitted:
                _hang_up(upstream)
                return
            if demanded is None and self.token is None:  # nothing to check, nothing to put in
                upstream.sendall(buffered)
                client.settimeout(None)
                pipe(client, upstream)
                return
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
                refusal = token_refusal(head, demanded) if demanded is not None else None
                if refusal is not None:  # answered here, as the pod's own head would, and not passed on
                    self.token_refusals += 1
                    client.sendall(refusal)
                    _hang_up(upstream)
                    return
                rewritten = with_token(head, self.token) if self.token is not None else (head if _header_lines(head) else None)
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
