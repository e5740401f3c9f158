"""A stand-in for a Ray head's dashboard in the tests of the test cluster's doors: it answers each request with the
Authorization header it got, and records it.

Why it exists: the door tests (test_head_front.py, test_head_front_pods.py, test_testcluster_doors.py) check what
reaches the head through a door: which token, on how many connections. One fake head serves them all.
What it deliberately does not do: speak Ray's Job API; answer anything but GET and POST.
"""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

__all__ = ["AuthorizationEcho", "echo_head"]


class AuthorizationEcho(BaseHTTPRequestHandler):
    """Each GET answered `{"authorization": ...}`, each POST that and its body (parsed where it is JSON, else its text,
    so a body that is not JSON gets an answer, not a handler's traceback in the run's output); `seen` the Authorization
    of every request (empty where none), `peers` the connections they came on."""

    seen: list[str] = []
    peers: set[object] = set()

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        self._answer({"authorization": self.headers.get("Authorization")})

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: object = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        self._answer({"authorization": self.headers.get("Authorization"), "body": body})

    def _answer(self, answer: dict) -> None:
        type(self).seen.append(self.headers.get("Authorization") or "")
        type(self).peers.add(self.client_address)
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def echo_head() -> Iterator[int]:
    """The echoing head on a loopback port (yielded), its records emptied first; stopped after."""
    AuthorizationEcho.seen = []
    AuthorizationEcho.peers = set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), AuthorizationEcho)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
