"""`adjuster run --metrics-bind-address` and `--health-probe-bind-address`: each server listens where it is told,
by default on loopback alone outside a pod, and no client of the metrics port can starve the liveness probe.

127.0.0.1 and 127.0.0.2 are both this machine's loopback (Linux routes all of 127/8 to `lo`), so a
server bound to 127.0.0.1 alone refuses 127.0.0.2, while one bound to every interface answers both:
the check needs no second machine and no routable address. "In a pod" is KUBERNETES_SERVICE_HOST set
(the kubelet sets it in every container); the kubeconfig is still the one given.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from raybridge.adjuster.decision import consts
from raybridge.adjuster.metrics import MAX_CONNECTIONS, REQUEST_DEADLINE_SECONDS
from tests.helpers import free_port
from tests.waits import wait_for

REPO = Path(__file__).resolve().parents[2]
IN_A_POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.fixture(scope="module")
def kubeconfig(real_admin: tuple[Any, str]) -> Iterator[Path]:
    """The session's real cluster, with the adjuster's namespace and PriorityClass (left for the next module: other
    modules' adjusters find them as an admin would have applied them)."""
    admin, path = real_admin
    for obj in ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": consts.DEFAULT_NAMESPACE}},
                {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": consts.DEFAULT_PRIORITY_CLASS},
                 "value": -1, "preemptionPolicy": "Never"}):  # fmt: skip
        if admin.get_object(obj["apiVersion"], obj["kind"], obj["metadata"]["name"]) is None:
            try:
                admin.create_object(obj)
            except Exception as exc:  # made meanwhile by a module beside this one: 409
                if getattr(exc, "status", None) != 409:
                    raise
    yield Path(path)


def _status(host: str, port: int, path: str = "/healthz", timeout: float = 5) -> Optional[int]:
    """The HTTP status, or None when the connection is refused or closed unanswered."""
    try:
        return urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=timeout).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return None


def _adjuster(kubeconfig: Path, *args: str, env: Optional[dict[str, str]] = None) -> subprocess.Popen[str]:
    outside = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}  # not in a pod, unless `env` says
    return subprocess.Popen([sys.executable, "-m", "raybridge", "adjuster", "run", "--kubeconfig", str(kubeconfig),
                             "--leader-election", "false", "--resync", "0.2", *args],
                            cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**outside, **(env or {})})


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


# (case, flags with {port} and {probe} for free ports, environment, whether the metrics port answers on 127.0.0.2)
BINDS = [
    ("loopback, as told", ["--metrics-bind-address", "127.0.0.1:{port}"], {}, False),
    ("every interface, as told", ["--metrics-bind-address", ":{port}"], {}, True),
    ("the default host outside a pod: loopback", ["--metrics-port", "{port}"], {}, False),
    ("the default host in a pod: every interface", ["--metrics-port", "{port}", "--health-probe-bind-address", ":{probe}"], IN_A_POD, True),
]


@pytest.mark.parametrize("case, flags, env, answers_on_127_0_0_2", BINDS, ids=[b[0] for b in BINDS])
def test_the_metrics_server_listens_only_where_the_flag_says(kubeconfig: Path, case: str, flags: list[str], env: dict[str, str],
                                                              answers_on_127_0_0_2: bool) -> None:
    port, probe = free_port(), free_port()
    proc = _adjuster(kubeconfig, *(f.format(port=port, probe=probe) for f in flags), env=env)
    try:
        wait_for(lambda: _status("127.0.0.1", port) == 200 or proc.poll() is not None, timeout=60, what="/healthz on 127.0.0.1")
        assert proc.poll() is None, proc.communicate()[1]
        assert (_status("127.0.0.2", port) == 200) is answers_on_127_0_0_2, case
    finally:
        _stop(proc)


def test_outside_a_pod_it_listens_on_the_metrics_port_of_loopback_alone(kubeconfig: Path) -> None:
    port = free_port()
    proc = _adjuster(kubeconfig, "--metrics-port", str(port))
    try:
        wait_for(lambda: _status("127.0.0.1", port) == 200 or proc.poll() is not None, timeout=60, what="/healthz on the metrics port")
        assert proc.poll() is None, proc.communicate()[1]
        assert _listening(proc.pid) == {("127.0.0.1", port)}  # no probe server: nothing probes outside a pod
    finally:
        _stop(proc)


def _listening(pid: int) -> set[tuple[str, int]]:
    """The (address, port) of each TCP socket process `pid` listens on, from /proc (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                address, port = local.split(":")
                raw = bytes.fromhex(address)
                if width == 8:
                    shown = socket.inet_ntop(socket.AF_INET, raw[::-1])
                else:
                    shown = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
                found.add((shown, int(port, 16)))
    return found


class _Drippers:
    """`count` clients, each sending the metrics port one byte every `pace` seconds and connecting again as soon as
    theirs is closed (the server's slots stay taken); `held` records how long each closed connection lasted."""

    def __init__(self, port: int, count: int, pace: float) -> None:
        self.port, self.pace = port, pace
        self.stop = threading.Event()
        self.held: list[float] = []
        self.threads = [threading.Thread(target=self._drip, daemon=True) for _ in range(count)]
        for thread in self.threads:
            thread.start()

    def _drip(self) -> None:
        while not self.stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
                    started = time.monotonic()
                    sock.sendall(b"G")
                    while not self.stop.wait(self.pace):
                        sock.sendall(b"E")
                        sock.settimeout(0.05)
                        try:
                            if sock.recv(1) == b"":
                                self.held.append(time.monotonic() - started)
                                break
                        except socket.timeout:
                            pass
            except OSError:
                time.sleep(0.01)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)


def test_slow_clients_holding_every_metrics_slot_never_fail_a_liveness_probe(kubeconfig: Path) -> None:
    """The attack that once failed 30 of 30 probes: more clients than the server has slots, each sending one byte
    a second. The kubelet's probe (timeoutSeconds 1) is answered every time, and no dripped request lasts much
    beyond the whole-request deadline."""
    port, probe = free_port(), free_port()
    proc = _adjuster(kubeconfig, "--metrics-bind-address", f"127.0.0.1:{port}", "--health-probe-bind-address", f"127.0.0.1:{probe}")
    try:
        wait_for(lambda: _status("127.0.0.1", probe) == 200 or proc.poll() is not None, timeout=60, what="/healthz on the probe port")
        assert proc.poll() is None, proc.communicate()[1]
        drippers = _Drippers(port, MAX_CONNECTIONS + 8, pace=1.0)
        try:
            time.sleep(1)
            answers = []
            deadline = time.monotonic() + REQUEST_DEADLINE_SECONDS + 3  # past the deadline: every dripper was cut off once
            while time.monotonic() < deadline or len(answers) < 20:
                started = time.monotonic()
                answers.append((_status("127.0.0.1", probe, "/healthz", timeout=1), _status("127.0.0.1", probe, "/readyz", timeout=1),
                                round(time.monotonic() - started, 2)))
                time.sleep(0.2)
        finally:
            drippers.close()
        assert [a[:2] for a in answers] == [(200, 200)] * len(answers)
        assert max(a[2] for a in answers) < 1.0, answers
        assert drippers.held and max(drippers.held) < REQUEST_DEADLINE_SECONDS + 2 * 1.0, drippers.held
    finally:
        _stop(proc)
