"""The fault proxy's own tests: each kind of fault, what passes unharmed, and who is let in.

Why: the fault tests of raybridge (tests/e2e/test_seams.py, test_adjuster_retry_levels.py, test_adjuster_real.py, test_operator_settings_real.py)
stand on the proxy doing what it is armed to do and nothing else; here it stands before a small TLS server of a CA of
the test's own (pki.py), which records what reached it, so each fault is seen from both sides in milliseconds.
What it does not do: start the real API server (the e2e tests above go through the proxy to it).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Iterator

import pytest

from testcluster import fault_proxy
from testcluster.fault_proxy import HTML_ERROR_PAGE, FaultProxy
from testcluster.pki import CertPair, Pki


class _Upstream(BaseHTTPRequestHandler):
    """An API server in miniature: a pod list, a watch of five events, an upgrade that echoes; it records each
    request with the common name of the certificate it came with."""

    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def _any(self) -> None:
        peer = self.connection.getpeercert()  # type: ignore[attr-defined]
        self.server.seen.append((self.command, self.path, fault_proxy.client_common_name(peer), self.headers.get("Authorization")))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path.startswith("/slow"):
            time.sleep(3)
        if "watch=true" in self.path:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for n in range(5):
                line = json.dumps({"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": f"p{n}"}}}).encode() + b"\n"
                self.wfile.write(f"{len(line):X}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.headers.get("Upgrade"):
            self.send_response(101)
            self.send_header("Connection", "Upgrade")
            self.send_header("Upgrade", "echo")
            self.end_headers()
            self.wfile.flush()
            data = self.connection.recv(100)
            self.connection.sendall(data.upper())
            self.close_connection = True
            return
        data = json.dumps({"kind": "PodList", "items": [], "echo": body.decode()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _any


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki")


@pytest.fixture
def proxy(pki: Pki, tmp_path: Path) -> Iterator[FaultProxy]:
    upstream_cert = pki.serving("upstream", ("127.0.0.1",))
    server = fault_proxy.QuietHTTPServer(("127.0.0.1", 0), _Upstream)  # a dropped connection is what a fault does
    server.daemon_threads = True
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_file))
    context.load_cert_chain(upstream_cert.cert, upstream_cert.key)
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.seen = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    identity = pki.client("admin", "testcluster-admin", ("system:masters",))
    serving = pki.serving("proxy", ("127.0.0.1",))
    with FaultProxy(("127.0.0.1", server.server_address[1]), pki.ca_file, serving.cert, serving.key, identity.cert, identity.key) as running:
        running.upstream_seen = server.seen  # type: ignore[attr-defined]
        running.identity = identity  # type: ignore[attr-defined]
        yield running
    server.shutdown()
    server.server_close()


def _client(proxy: FaultProxy, pki: Pki, identity: CertPair | None = None, timeout: float = 10) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    pair = identity or proxy.identity  # type: ignore[attr-defined]
    context.load_cert_chain(pair.cert, pair.key)
    return http.client.HTTPSConnection("127.0.0.1", proxy.port, context=context, timeout=timeout)


def _get(proxy: FaultProxy, pki: Pki, path: str = "/api/v1/pods", method: str = "GET", **kwargs: Any) -> http.client.HTTPResponse:
    connection = _client(proxy, pki)
    connection.request(method, path, **kwargs)
    return connection.getresponse()


def test_an_unarmed_request_passes_with_its_body_and_authorization_as_the_proxy_s_identity(proxy: FaultProxy, pki: Pki) -> None:
    answer = _get(proxy, pki, "/api/v1/namespaces/a/pods", "POST", body=b'{"x": 1}', headers={"Authorization": "Bearer t0ken"})
    assert answer.status == 200
    assert json.loads(answer.read())["echo"] == '{"x": 1}'
    assert proxy.upstream_seen == [("POST", "/api/v1/namespaces/a/pods", "testcluster-admin", "Bearer t0ken")]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("code", "reason", "retry_after"), [(500, "InternalError", None), (503, "ServiceUnavailable", "1"),
                                                             (429, "TooManyRequests", "2"), (409, "Conflict", None),
                                                             (403, "Forbidden", None)])  # fmt: skip
def test_a_refusal_answers_kube_apiserver_s_status_for_times_requests_then_passes(proxy: FaultProxy, pki: Pki, code: int, reason: str, retry_after: Any) -> None:
    fault = proxy.arm("GET", r"/api/v1/pods", code=code, times=2, retry_after=2 if code == 429 else None)
    for _ in range(2):
        answer = _get(proxy, pki)
        status = json.loads(answer.read())
        assert (answer.status, status["kind"], status["code"], status["reason"]) == (code, "Status", code, reason)
        assert answer.getheader("Retry-After") == retry_after
    assert _get(proxy, pki).status == 200
    assert fault.hits == 2 and len(proxy.upstream_seen) == 1  # type: ignore[attr-defined]


def test_the_first_passes_go_through_then_the_fault_meets_every_request(proxy: FaultProxy, pki: Pki) -> None:
    """`passes=1`: a first create succeeds, the next ones fail (an adjuster that dies between two creates)."""
    fault = proxy.arm("POST", r"/api/v1/namespaces/a/pods", code=503, times=None, passes=1)
    assert _get(proxy, pki, "/api/v1/pods").status == 200  # another request: not counted
    assert [_get(proxy, pki, "/api/v1/namespaces/a/pods", "POST", body=b"{}").status for _ in range(3)] == [200, 503, 503]
    assert fault.hits == 2


def test_a_fault_meets_only_its_method_and_whole_path(proxy: FaultProxy, pki: Pki) -> None:
    fault = proxy.arm("DELETE", r"/api/v1/pods", code=500, times=None)
    assert _get(proxy, pki).status == 200
    assert _get(proxy, pki, "/api/v1/pods/x", "DELETE").status == 200
    assert _get(proxy, pki, "/api/v1/pods?labelSelector=a", "DELETE").status == 500  # the query is not the path
    fault.clear()
    assert _get(proxy, pki, "/api/v1/pods", "DELETE").status == 200


def test_a_delay_holds_the_answer_then_serves_it(proxy: FaultProxy, pki: Pki) -> None:
    proxy.arm("GET", r"/api/v1/pods", code=None, delay=1.0)
    started = time.monotonic()
    assert _get(proxy, pki).status == 200
    assert time.monotonic() - started >= 1.0


def test_a_hang_outlasts_the_client_s_timeout(proxy: FaultProxy, pki: Pki) -> None:
    proxy.arm("GET", r"/api/v1/pods", code=None, delay=30)
    connection = _client(proxy, pki, timeout=1)
    connection.request("GET", "/api/v1/pods")
    with pytest.raises(TimeoutError):
        connection.getresponse()


@pytest.mark.parametrize(("body", "content_type"), [(HTML_ERROR_PAGE, "text/html"), ('{"kind": "PodList", "ite', "application/json")])
def test_garbage_is_answered_as_armed(proxy: FaultProxy, pki: Pki, body: Any, content_type: str) -> None:
    proxy.arm("GET", r"/api/v1/pods", code=200, body=body, content_type=content_type)
    answer = _get(proxy, pki)
    assert (answer.status, answer.getheader("Content-Type")) == (200, content_type)
    assert answer.read() == (body.encode() if isinstance(body, str) else body)


def test_a_dropped_connection_gets_no_answer(proxy: FaultProxy, pki: Pki) -> None:
    proxy.arm("POST", r"/api/v1/pods", drop=True)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, ssl.SSLError)):
        _get(proxy, pki, method="POST", body=b"{}")
    assert proxy.upstream_seen == []  # type: ignore[attr-defined]


def _watch(proxy: FaultProxy, pki: Pki) -> tuple[list[dict], bool]:
    """The events of a watch of pods through the proxy, read from the raw stream, and whether the stream ended
    cleanly (its last, empty chunk came before the connection closed)."""
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(proxy.identity.cert, proxy.identity.key)  # type: ignore[attr-defined]
    raw = b""
    with context.wrap_socket(socket.create_connection(("127.0.0.1", proxy.port), timeout=10), server_hostname="127.0.0.1") as tls:
        tls.sendall(b"GET /api/v1/pods?watch=true HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        try:
            while data := tls.recv(65536):
                raw += data
        except (ssl.SSLError, ConnectionError):
            pass
    body = raw.split(b"\r\n\r\n", 1)[1]
    events = [json.loads(line) for line in body.split(b"\r\n") if line.startswith(b"{")]
    return events, body.endswith(b"0\r\n\r\n")


def test_a_watch_passes_its_events_as_they_come(proxy: FaultProxy, pki: Pki) -> None:
    events, clean = _watch(proxy, pki)
    assert [e["object"]["metadata"]["name"] for e in events] == ["p0", "p1", "p2", "p3", "p4"] and clean


@pytest.mark.parametrize("after", [0, 2])
def test_a_watch_is_dropped_after_n_events(proxy: FaultProxy, pki: Pki, after: int) -> None:
    proxy.arm("GET", r"/api/v1/pods", after_events=after, drop=True)
    events, clean = _watch(proxy, pki)
    assert len(events) == after and not clean


def test_a_watch_ends_with_the_armed_error_event(proxy: FaultProxy, pki: Pki) -> None:
    proxy.arm("GET", r"/api/v1/pods", code=410, after_events=1)
    events, clean = _watch(proxy, pki)
    assert [e["type"] for e in events] == ["ADDED", "ERROR"] and events[1]["object"]["reason"] == "Expired" and clean


def test_an_upgrade_is_spliced_byte_for_byte(proxy: FaultProxy, pki: Pki) -> None:
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(proxy.identity.cert, proxy.identity.key)  # type: ignore[attr-defined]
    with context.wrap_socket(socket.create_connection(("127.0.0.1", proxy.port), timeout=10), server_hostname="127.0.0.1") as tls:
        tls.sendall(b"GET /api/v1/namespaces/a/pods/p/portforward HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += tls.recv(1000)
        assert head.startswith(b"HTTP/1.1 101")
        tls.sendall(b"bytes")
        assert tls.recv(100) == b"BYTES"


def test_a_silent_api_server_is_a_502_within_the_upstream_timeout(proxy: FaultProxy, pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fault_proxy, "UPSTREAM_TIMEOUT_SECONDS", 0.5)
    started = time.monotonic()
    answer = _get(proxy, pki, "/slow")
    assert answer.status == 502 and b"did not answer" in answer.read()
    assert time.monotonic() - started < 2.5


def test_it_listens_on_loopback_alone(proxy: FaultProxy) -> None:
    assert proxy._server.server_address[0] == "127.0.0.1"
    others = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1", "127.0.1.1"}
    for address in others:
        with pytest.raises(OSError):
            socket.create_connection((address, proxy.port), timeout=2).close()


def _refused(proxy: FaultProxy, context: ssl.SSLContext) -> None:
    before = proxy.refused
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
        connection = http.client.HTTPSConnection("127.0.0.1", proxy.port, context=context, timeout=10)
        connection.request("GET", "/api/v1/pods")
        connection.getresponse()
    deadline = time.monotonic() + 5
    while proxy.refused == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.refused == before + 1
    assert proxy.upstream_seen == []  # type: ignore[attr-defined]


def test_a_client_without_a_certificate_is_refused(proxy: FaultProxy, pki: Pki) -> None:
    _refused(proxy, ssl.create_default_context(cafile=str(pki.ca_file)))


def test_a_client_with_a_certificate_of_another_ca_is_refused(proxy: FaultProxy, pki: Pki, tmp_path: Path) -> None:
    stranger = Pki(tmp_path / "other").client("admin", "testcluster-admin", ("system:masters",))
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(stranger.cert, stranger.key)
    _refused(proxy, context)


def test_a_client_of_the_stack_s_ca_with_another_name_is_refused(proxy: FaultProxy, pki: Pki) -> None:
    """The proxy calls as its identity: a weaker certificate of the same CA must not borrow it."""
    weaker = pki.client("someone", "someone", ())
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(weaker.cert, weaker.key)
    _refused(proxy, context)


def test_made_from_a_stack_s_kubeconfig_it_writes_owner_only_files(pki: Pki, tmp_path: Path) -> None:
    import base64

    import yaml

    admin = pki.client("admin", "testcluster-admin", ("system:masters",))
    source = tmp_path / "admin.kubeconfig"
    source.write_text(yaml.safe_dump({"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": pki.ca_data}}],
                                      "users": [{"name": "u", "user": {"client-certificate-data": admin.cert_data(), "client-key-data": admin.key_data()}}]}))  # fmt: skip
    made = FaultProxy.in_front_of(source, pki.directory, tmp_path / "proxy")
    try:
        written = made.write_kubeconfig(source, tmp_path / "through")
        assert yaml.safe_load(written.read_text())["clusters"][0]["cluster"]["server"] == made.url
        assert made.upstream == ("127.0.0.1", 6443) and made.identity_name == "testcluster-admin"
        assert (tmp_path / "proxy").stat().st_mode & 0o777 == 0o700
        for path in (written, tmp_path / "proxy" / "identity.key"):
            assert path.stat().st_mode & 0o777 == 0o600
        assert (tmp_path / "proxy" / "identity.crt").read_bytes() == base64.b64decode(admin.cert_data())
        with pytest.raises(FileExistsError):
            made.write_kubeconfig(source, tmp_path / "through")
    finally:
        made._server.server_close()


#: What a second user of the machine tries: the proxy's port, over TLS, with no certificate (the stack's keys are the
#: owner's alone); it prints what came back. Imported first, then the user dropped (root's interpreter install may
#: be unreadable to that user).
_SECOND_USER = """
import encodings.idna, http.client, json, os, ssl, sys
port, uid = int(sys.argv[1]), int(sys.argv[2])
os.setgroups([]); os.setgid(uid); os.setuid(uid)
context = ssl.create_default_context(); context.check_hostname = False; context.verify_mode = ssl.CERT_NONE
try:
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    connection.request("GET", "/api/v1/pods")
    print(json.dumps({"status": connection.getresponse().status}))
except (OSError, http.client.HTTPException) as exc:
    print(json.dumps({"refused": type(exc).__name__}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run the attempt as a second user")
def test_a_second_local_user_gets_nothing_through_it(proxy: FaultProxy) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _SECOND_USER, str(proxy.port), "65534"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "refused" in json.loads(out.stdout), out.stdout
    assert proxy.upstream_seen == []  # type: ignore[attr-defined]
