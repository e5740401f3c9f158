"""`adjuster run --metrics-bind-address`: the metrics and health server listens where it is told.

127.0.0.1 and 127.0.0.2 are both this machine's loopback (Linux routes all of 127/8 to `lo`), so a
server bound to 127.0.0.1 alone refuses 127.0.0.2, while one bound to every interface answers both:
the check needs no second machine and no routable address.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator, Optional

import pytest

from raybridge.adjuster import consts
from kubesim.fixtures import free_port, wait_for
from kubesim.server import KubeApiServer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    with KubeApiServer() as server:
        server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": consts.DEFAULT_NAMESPACE}})
        server.create_object({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                              "metadata": {"name": consts.DEFAULT_PRIORITY_CLASS}, "value": -1, "preemptionPolicy": "Never"})
        path = tmp_path / "kubeconfig"
        server.write_kubeconfig(path)
        yield path


def _status(host: str, port: int, path: str = "/healthz") -> Optional[int]:
    """The HTTP status, or None when the connection is refused."""
    try:
        return urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return None


def _adjuster(kubeconfig: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "raybridge", "adjuster", "run", "--kubeconfig", str(kubeconfig),
                             "--leader-election", "false", "--resync", "0.2", *args],
                            cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


@pytest.mark.parametrize("bind,answers_on_127_0_0_2", [
    ("127.0.0.1:{port}", False),
    (":{port}", True),
])
def test_the_metrics_server_listens_only_where_the_flag_says(kubeconfig: Path, bind: str, answers_on_127_0_0_2: bool) -> None:
    port = free_port()
    proc = _adjuster(kubeconfig, "--metrics-bind-address", bind.format(port=port))
    try:
        wait_for(lambda: _status("127.0.0.1", port) == 200 or proc.poll() is not None, timeout=60, what="/healthz on 127.0.0.1")
        assert proc.poll() is None, proc.communicate()[1]
        assert (_status("127.0.0.2", port) == 200) is answers_on_127_0_0_2
    finally:
        _stop(proc)

