"""What a second user of the machine tries against a running test cluster, run as that user.

`python -m tests.e2e.second_user UID < plan.json` imports everything it will need, becomes user UID (the tests run as
root; a Python that has dropped root can no longer read root's interpreter install, so nothing is imported after),
then tries each attack of the plan and prints one JSON line: for each, what it tried and what came back. The attacks
are the ones a second user of a shared machine made on the test cluster:
- `portforward`: a port-forward to a head pod's dashboard port through a kubelet port (kwok's: `/portForward/<any
  namespace>/<any pod>?port=8265`, WebSocket `v4.channel.k8s.io`, over plain HTTP and over TLS without a client
  certificate), and through it a job submitted to the Ray head;
- `job`: a job POSTed to Ray's Job API (`/api/jobs/`) on a port, over HTTP and HTTPS;
- `gcs`: the Ray head's GCS read (its key-value store) with no token;
- `etcd`: etcd's keys counted through its JSON gateway (`/v3/kv/range`), over HTTP and HTTPS without a certificate;
- `http_get`: a GET (KAI's `/get-snapshot`), over HTTP.
A job's entrypoint writes `id` into the plan's proof directory, in a file named after the attack: the caller sees
there whether anyone's code ran.

What it does not do: judge (the test does), or try anything beyond the plan.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import struct
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

try:  # the Ray head's GCS client; imported now, while the interpreter's files can still be read
    import ray._private.gcs_utils  # noqa: F401 - what the client imports as it connects
    from ray._raylet import GcsClient
except Exception:  # noqa: BLE001 - without Ray, the GCS attack reports it could not be made
    GcsClient = None  # type: ignore[assignment,misc]

TIMEOUT = 4.0
#: What kwok's port-forward speaks over WebSocket (k8s.io/apimachinery wsstream `v4.channel.k8s.io`).
PORT_FORWARD_PROTOCOL = "v4.channel.k8s.io"


def _tls() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


_NO_VERIFY = _tls()


def _job_request(entrypoint: str) -> bytes:
    body = json.dumps({"entrypoint": entrypoint}).encode()
    head = f"POST /api/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


def _connect(port: int, tls: bool, host: str = "127.0.0.1") -> socket.socket:
    raw = socket.create_connection((host, port), timeout=TIMEOUT)
    return _NO_VERIFY.wrap_socket(raw, server_hostname=host) if tls else raw


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _ws_send(sock: socket.socket, payload: bytes) -> None:
    """One masked binary frame (a client's)."""
    mask = os.urandom(4)
    length = len(payload)
    if length < 126:
        header = struct.pack("!BB", 0x82, 0x80 | length)
    elif length < 65536:
        header = struct.pack("!BBH", 0x82, 0x80 | 126, length)
    else:
        header = struct.pack("!BBQ", 0x82, 0x80 | 127, length)
    sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def _ws_recv(sock: socket.socket) -> tuple[int, bytes]:
    first, second = _recv_exact(sock, 2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", _recv_exact(sock, 2))[0]
    elif length == 127:
        length = struct.unpack("!Q", _recv_exact(sock, 8))[0]
    return first & 0x0F, _recv_exact(sock, length)


def port_forward(port: int, tls: bool, namespace: str, pod: str, entrypoint: str) -> str:
    """A port-forward to `pod`'s port 8265 through the kubelet port `port`, and a job POSTed through it."""
    try:
        sock = _connect(port, tls)
    except (OSError, ssl.SSLError) as exc:
        return f"no connection: {type(exc).__name__}"
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            (f"GET /portForward/{namespace}/{pod}?port=8265 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
             f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
             f"Sec-WebSocket-Protocol: {PORT_FORWARD_PROTOCOL}\r\n\r\n").encode()
        )  # fmt: skip
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                return f"closed: {answer[:80]!r}"
            answer += chunk
        status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
        if " 101 " not in status + " ":
            return f"refused: {status}"
        _ws_send(sock, b"\x00" + _job_request(entrypoint))
        received = b""
        while b"\r\n\r\n" not in received:
            opcode, payload = _ws_recv(sock)
            if opcode == 0x8:
                break
            if payload[:1] == b"\x00" and len(payload) > 3:  # data channel (its first frame is the port number)
                received += payload[1:]
        status_line = received.split(b"\r\n", 1)[0].decode(errors="replace")
        return f"upgraded; through it: {status_line or 'nothing'}"
    except (OSError, ssl.SSLError, ValueError) as exc:
        return f"failed: {type(exc).__name__}"
    finally:
        sock.close()


def post_job(port: int, tls: bool, entrypoint: str, host: str = "127.0.0.1") -> str:
    """A job POSTed to `/api/jobs/` at host:port."""
    try:
        sock = _connect(port, tls, host)
    except (OSError, ssl.SSLError) as exc:
        return f"no connection: {type(exc).__name__}"
    try:
        sock.sendall(_job_request(entrypoint))
        answer = sock.recv(4096)
        return answer.split(b"\r\n", 1)[0].decode(errors="replace") or "closed unanswered"
    except (OSError, ssl.SSLError) as exc:
        return f"failed: {type(exc).__name__}"
    finally:
        sock.close()


def http_get(url_host: str, port: int, path: str, tls: bool = False, body: Optional[bytes] = None) -> str:
    """A GET (or with `body`, a POST) at host:port; its status line and the start of its body."""
    connection = http.client.HTTPSConnection(url_host, port, timeout=TIMEOUT, context=_NO_VERIFY) if tls else http.client.HTTPConnection(url_host, port, timeout=TIMEOUT)
    try:
        connection.request("POST" if body is not None else "GET", path, body=body)
        answer = connection.getresponse()
        return f"HTTP {answer.status} {answer.read(200).decode(errors='replace')}"
    except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
        return f"failed: {type(exc).__name__}"
    finally:
        connection.close()


def read_gcs(address: str) -> str:
    """The GCS's key-value store's keys, asked with no token."""
    if GcsClient is None:
        return "failed: no Ray here"
    try:
        keys = GcsClient(address=address).internal_kv_keys(b"", None, timeout=TIMEOUT)
        return f"read {len(keys)} keys"
    except Exception as exc:  # noqa: BLE001 - whatever Ray raises is the answer
        return f"failed: {type(exc).__name__}: {str(exc)[:120]}"


def read_etcd(port: int, tls: bool) -> str:
    body = json.dumps({"key": base64.b64encode(b"/").decode(), "range_end": base64.b64encode(b"0").decode(), "count_only": True}).encode()
    return http_get("127.0.0.1", port, "/v3/kv/range", tls=tls, body=body)


def run(plan: dict[str, Any]) -> list[dict[str, str]]:
    """Every attack of `plan`, side by side (each bounded by TIMEOUT a step)."""
    proof = plan["proof"]
    tried: list[tuple[str, str, Any]] = []
    for port in plan.get("kubelet_ports", []):
        for tls in (False, True):
            label = f"portforward-{port}-{'tls' if tls else 'plain'}"
            tried.append(("portforward", label, lambda port=port, tls=tls, label=label: port_forward(port, tls, "default", "any-pod", f"id > {proof}/{label}")))
    for port in plan.get("job_ports", []):
        for tls in (False, True):
            label = f"job-{port}-{'tls' if tls else 'plain'}"
            tried.append(("job", label, lambda port=port, tls=tls, label=label: post_job(port, tls, f"id > {proof}/{label}")))
    if plan.get("gcs"):
        tried.append(("gcs", plan["gcs"], lambda: read_gcs(plan["gcs"])))
    for port in plan.get("etcd_ports", []):
        for tls in (False, True):
            tried.append(("etcd", f"{port}-{'tls' if tls else 'plain'}", lambda port=port, tls=tls: read_etcd(port, tls)))
    for host, port, path in plan.get("http_get", []):
        tried.append(("http_get", f"{host}:{port}{path}", lambda host=host, port=port, path=path: http_get(host, port, path)))
    with ThreadPoolExecutor(16) as pool:
        futures = [(kind, target, pool.submit(attack)) for kind, target, attack in tried]
        return [{"attack": kind, "target": target, "outcome": future.result()} for kind, target, future in futures]


def main() -> None:
    plan = json.loads(sys.stdin.read())
    uid = int(sys.argv[1])
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    print(json.dumps(run(plan)), flush=True)


if __name__ == "__main__":
    main()
