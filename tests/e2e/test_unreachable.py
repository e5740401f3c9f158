"""A broken or silent Kubernetes API server: exit 3 and one line naming it, within the bound, never a hang.

The servers here are deliberately not Kubernetes: one accepts connections and never
answers, one answers an HTML error page (a proxy in the way), one sends a truncated
JSON body, one JSON nested deeper than the parser's recursion limit, one closes every
connection at once. An exec credential plugin that never answers is killed past the
request timeout and named.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml

from tests.helpers import run_cli

#: One worker runs the module, with test_seams.py (one group): its tests mostly wait out a client's timeout on a
#: server that does not answer, and dealt out to every worker at once they left the two cores half idle.
pytestmark = pytest.mark.xdist_group("client-timeouts")

Behaviour = Callable[[socket.socket], None]


def _silent(conn: socket.socket) -> None:
    time.sleep(30)  # read the request, answer nothing


def _html(conn: socket.socket) -> None:
    conn.recv(65536)
    body = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def _truncated(conn: socket.socket) -> None:
    conn.recv(65536)
    body = b'{"kind": "RayJobList", "items": [{"metadata": '
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def _nested(conn: socket.socket) -> None:
    conn.recv(65536)
    body = b"[" * 100_000 + b"]" * 100_000  # the client's json.loads raised RecursionError: "internal error"
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def _hang_up(conn: socket.socket) -> None:
    conn.recv(65536)


class _Server:
    def __init__(self, behaviour: Behaviour) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.behaviour = behaviour
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            self.behaviour(conn)
        except OSError:
            pass
        finally:
            conn.close()


class _Refusing:
    """A port nothing listens on (bound, never listened, closed): the kernel refuses every connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.close()


@pytest.fixture(
    params=[("silent", _silent), ("html", _html), ("truncated", _truncated), ("nested", _nested), ("hangs up", _hang_up), ("refuses", None)],
    ids=lambda p: p[0],
)
def broken_api(request, tmp_path: Path) -> Iterator[tuple[str, Path, int]]:
    if request.param[1] is None:
        server = _Refusing()  # nothing listens there: every connection is refused
    else:
        server = _Server(request.param[1])
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }))  # fmt: skip
    yield request.param[0], kubeconfig, server.port
    server.sock.close()


COMMANDS = [
    ["list"],
    ["status", "some-job"],
    ["delete", "some-job"],
    ["discover"],
    ["check"],
    # The job's --timeout (default 1800 s) bounds the wait for admission, not a dead API server.
    ["submit", "--entrypoint", "python x.py", "--backend", "kubernetes"],
    ["submit", "examples/hello.yaml"],
]


@pytest.mark.realtime
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_broken_api_server_is_exit_3_and_one_line(broken_api, command):
    kind, kubeconfig, port = broken_api
    started = time.monotonic()
    out = run_cli(*command, "--kubeconfig", str(kubeconfig), "--request-timeout", "2", timeout=90)
    elapsed = time.monotonic() - started
    assert out.returncode == 3, (kind, out.stdout, out.stderr)
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr
    assert f"127.0.0.1:{port}" in errors[0] or "not JSON" in errors[0], errors[0]
    assert elapsed < 60, f"took {elapsed:.0f}s"


@pytest.mark.realtime
@pytest.mark.parametrize("behaviour", [None, _silent], ids=["nothing listens", "accepts and never answers"])
def test_discover_gives_up_on_a_ray_address_that_does_not_answer(behaviour):
    if behaviour is None:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
        probe.close()
    else:
        address = f"127.0.0.1:{_Server(behaviour).port}"
    started = time.monotonic()
    out = run_cli("discover", "--ray-address", address, "--request-timeout", "5", timeout=90)
    assert out.returncode == 3, out.stderr
    assert f"cannot connect to the Ray cluster at '{address}'" in out.stderr and "Traceback" not in out.stderr
    assert time.monotonic() - started < 45


def _kubeconfig_with_plugin(path: Path, port: int, plugin: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                                                  "interactiveMode": "Never"}}}],
    }))  # fmt: skip
    return path


def _plugin(tmp_path: Path, body: str) -> Path:
    plugin = tmp_path / "get-token"
    plugin.write_text("#!/bin/sh\n" + body)
    plugin.chmod(0o755)
    return plugin


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.realtime
@pytest.mark.parametrize("command", [["check"], ["list"]], ids=lambda c: c[0])
def test_an_exec_credential_plugin_that_hangs_is_killed_and_named_exit_3(tmp_path: Path, command: list[str]) -> None:
    """The client waited for the plugin for ever (kubernetes' ExecProvider has no timeout)."""
    server = _Server(_html)
    plugin = _plugin(tmp_path, f"sleep 300 &\necho $! > {tmp_path}/child\nsleep 300\n")
    kubeconfig = _kubeconfig_with_plugin(tmp_path / "config", server.port, plugin)
    started = time.monotonic()
    out = run_cli(*command, "--kubeconfig", str(kubeconfig), "--request-timeout", "2", timeout=120)
    assert out.returncode == 3, out.stderr
    assert time.monotonic() - started < 30
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: kubeconfig {str(kubeconfig)!r}: getting credentials: exec: plugin {str(plugin)!r} did not answer "
                      "within 2s (killed; --request-timeout sets the bound)"], out.stderr  # fmt: skip
    assert "Traceback" not in out.stderr
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "what the plugin started must be killed with it"
    server.sock.close()


def _answers_empty_lists(seen: list[bytes]) -> Behaviour:
    def behaviour(conn: socket.socket) -> None:
        seen.append(conn.recv(65536))
        body = b'{"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    return behaviour


@pytest.mark.realtime
def test_a_plugin_that_answers_in_time_gives_its_token(tmp_path: Path) -> None:
    """The bounded plugin run speaks the ExecCredential protocol as the client's own did."""
    seen: list[bytes] = []
    server = _Server(_answers_empty_lists(seen))
    plugin = _plugin(tmp_path, """test -n "$KUBERNETES_EXEC_INFO" || exit 7
echo '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "from-the-plugin"}}'
""")
    kubeconfig = _kubeconfig_with_plugin(tmp_path / "config", server.port, plugin)
    out = run_cli("list", "--kubeconfig", str(kubeconfig), "--request-timeout", "5", timeout=120)
    assert out.returncode == 0, out.stderr
    assert seen and all(b"authorization: bearer from-the-plugin" in request.lower() for request in seen), seen
    server.sock.close()
