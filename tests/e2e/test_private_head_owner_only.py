"""The private local Ray head is reachable by its owner alone.

A real head as `submit --backend local` starts it, with a job running a task (so workers are up
too): every port of every one of its processes listens on loopback only, the machine's network
address reaches none of them, and another user of the machine can neither submit a job through
the dashboard nor read the head's directory (the uploaded working dir, the logs, the token).
The owner, with the head's token, submits as usual.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from raybridge.jobapi.client import RayJobs
from raybridge.jobs.private_head import TOKEN_FILE, PrivateRayHead, head_environment
from tests.helpers import short_tmpdir

#: One head for the module's tests: dealt to several workers, each started its own.
pytestmark = pytest.mark.xdist_group("private-head-owner-only")

NOBODY = 65534
#: A job that keeps a worker busy while the probes run.
BUSY_JOB = "python -c \"import ray, time; ray.init(); ray.get(ray.remote(lambda: 1).remote()); print('task ran'); time.sleep(120)\""


@pytest.fixture(scope="module")
def running_head() -> Iterator[PrivateRayHead]:
    old_tempdir = tempfile.tempdir
    tempfile.tempdir = short_tmpdir()
    os.chmod(tempfile.tempdir, 0o1777)  # like /tmp: only the head's own dir may keep others out
    head = PrivateRayHead(num_cpus=2)
    try:
        head.start()
    finally:
        tempfile.tempdir = old_tempdir
    assert head.dashboard_url is not None
    jobs = RayJobs(head.dashboard_url, headers=head.auth_headers)
    submission = jobs.submit(BUSY_JOB, "owner-job", None, retry_for=60)
    deadline = time.monotonic() + 120
    while "task ran" not in jobs.logs(submission) and time.monotonic() < deadline:
        assert jobs.status(submission) in ("PENDING", "RUNNING"), jobs.logs(submission)
        time.sleep(0.5)
    assert "task ran" in jobs.logs(submission)
    yield head
    head.stop()


def _family(root: int) -> set[int]:
    """`root` and every descendant (the job's driver runs in a session of its own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, stack = {root}, [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _address(hex_address: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # /proc/net/tcp{,6} print each 32-bit word in host (little-endian) order.
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(raw)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, int(port, 16)


def listening_sockets(pids: set[int]) -> list[tuple[str, str, int]]:
    """(process, address, port) for every TCP socket in LISTEN state that one of `pids` holds."""
    owner: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    owner[target[8:-1]] = pid
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in owner:  # 0A: LISTEN
                    ip, port = _address(fields[1])
                    name = Path(f"/proc/{owner[fields[9]]}/comm").read_text().strip()
                    found.append((name, str(ip), port))
    return found


def _head_sockets(head: PrivateRayHead) -> list[tuple[str, str, int]]:
    assert head._supervisor is not None
    return listening_sockets(_family(head._supervisor.pid))


@pytest.mark.fresh_head
def test_every_port_of_the_private_head_listens_on_loopback_only(running_head: PrivateRayHead) -> None:
    sockets = _head_sockets(running_head)
    assert len(sockets) >= 5, sockets  # GCS, raylet, dashboard, its agents, workers
    open_beyond_loopback = [s for s in sockets if not ipaddress.ip_address(s[1]).is_loopback]
    assert open_beyond_loopback == [], open_beyond_loopback


@pytest.mark.fresh_head
def test_the_private_head_runs_no_ray_client_server(running_head: PrivateRayHead) -> None:
    """Its port cannot be left to the kernel (Ray takes no 0 for it), so it would be chosen before the head binds it."""
    assert running_head._supervisor is not None
    commands = []
    for pid in _family(running_head._supervisor.pid):
        try:
            commands.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    assert any("gcs_server" in c for c in commands), commands  # the head's processes were found
    assert not [c for c in commands if "ray.util.client.server" in c or "--ray-client-server-port" in c]


def _network_addresses() -> list[str]:
    import psutil

    return [
        a.address
        for addresses in psutil.net_if_addrs().values()
        for a in addresses
        if a.family == socket.AF_INET and not ipaddress.ip_address(a.address).is_loopback
    ]


@pytest.mark.fresh_head
def test_the_machines_network_address_reaches_no_port_of_the_head(running_head: PrivateRayHead) -> None:
    addresses = _network_addresses()
    if not addresses:
        pytest.skip("this machine has no network address besides loopback")
    reached = []
    for _, _, port in _head_sockets(running_head):
        for address in addresses:
            try:
                socket.create_connection((address, port), timeout=2).close()
                reached.append(f"{address}:{port}")
            except OSError:
                pass
    assert reached == []


def _as_nobody(head: PrivateRayHead) -> dict[str, str]:
    """What another user of the machine gets: run in a child with uid and gid `nobody`."""
    assert head.temp_dir is not None and head.dashboard_url is not None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest, no Ray, only the probes
        os.close(read_end)
        results: dict[str, str] = {}
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            body = json.dumps({"entrypoint": "echo pwned", "submission_id": "intruder"}).encode()
            request = urllib.request.Request(f"{head.dashboard_url}/api/jobs/", data=body, method="POST")
            request.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    results["submit"] = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:
                results["submit"] = f"HTTP {exc.code}"
            except OSError as exc:
                results["submit"] = type(exc).__name__
            for what, action in (
                ("list head dir", lambda: os.listdir(head.temp_dir)),
                ("read token", lambda: Path(head.temp_dir, TOKEN_FILE).read_text()),
                ("list session dir", lambda: os.listdir(Path(head.temp_dir, "ray", "session_latest"))),
            ):
                try:
                    action()
                    results[what] = "allowed"
                except OSError as exc:
                    results[what] = type(exc).__name__
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            results["error"] = repr(exc)
        os.write(write_end, json.dumps(results).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return json.loads(text)


@pytest.mark.fresh_head
@pytest.mark.skipif(os.geteuid() != 0, reason="probing as another user needs root to switch users")
def test_another_user_can_neither_submit_nor_read_the_head_dir(running_head: PrivateRayHead) -> None:
    assert _as_nobody(running_head) == {
        "submit": "HTTP 401",
        "list head dir": "PermissionError",
        "read token": "PermissionError",
        "list session dir": "PermissionError",
    }
    jobs = RayJobs(running_head.dashboard_url or "", headers=running_head.auth_headers)
    with pytest.raises(Exception, match="does not exist|not found|404"):
        jobs.client.get_job_info("intruder")


def _http_get(port: int, path: str) -> str:
    """What a local user without the token gets from GET `path` on a loopback port: the status, or the failure."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except Exception as exc:  # noqa: BLE001 - a gRPC port answers no HTTP: any failure is a refusal here
        return type(exc).__name__


@pytest.mark.fresh_head
def test_no_port_of_the_head_answers_without_the_token(running_head: PrivateRayHead) -> None:
    """Any local user reaches every loopback port: none may answer a request without the token. Ray's two metrics
    servers (the agent's exporter and the dashboard's own, on 44227) once gave out task and actor names and the
    dashboard's endpoints to anyone; a task has run, so the exporter would have something to say."""
    sockets = _head_sockets(running_head)
    dashboard = int((running_head.dashboard_url or "").rsplit(":", 1)[1])
    answered = {(port, path): _http_get(port, path) for _, _, port in sockets for path in ("/metrics", "/api/version", "/")}
    # The dashboard's web page itself is static (its data comes from the API, which wants the token)
    assert [where for where, got in answered.items() if got == "HTTP 200" and where != (dashboard, "/")] == [], answered
    assert 44227 not in {port for _, _, port in sockets}


@pytest.mark.fresh_head
def test_the_head_dir_and_token_are_the_owners_alone(running_head: PrivateRayHead) -> None:
    assert running_head.temp_dir is not None
    assert running_head.temp_dir.stat().st_mode & 0o777 == 0o700
    assert (running_head.temp_dir / TOKEN_FILE).stat().st_mode & 0o777 == 0o600


# (case, user environment, what the head's processes get)
HEAD_ENVIRONMENTS = [
    ("the user's auth mode concerns their clusters", {"RAY_AUTH_MODE": "disabled"}, {"RAY_AUTH_MODE": "token"}),
    ("the user's token is not the head's", {"RAY_AUTH_TOKEN": "theirs"}, {"RAY_AUTH_TOKEN": None}),
    ("the token file is the head's", {"RAY_AUTH_TOKEN_PATH": "/home/u/.ray/t"}, {"RAY_AUTH_TOKEN_PATH": "/h/auth_token"}),
    ("the node address stays loopback", {}, {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}),
    ("an address set for other clusters is dropped", {"RAY_ADDRESS": "10.0.0.1:6379"}, {"RAY_ADDRESS": None}),
    ("temp files go in the head's own dir, removed with it", {"TMPDIR": "/home/u/very/long/tmp"}, {"TMPDIR": "/h"}),
    ("no metrics exporter, whatever the user asks", {"RAY_enable_metrics_collection": "1"}, {"RAY_enable_metrics_collection": "0"}),
    ("the dashboard's metrics server binds nothing", {"DASHBOARD_METRIC_PORT": "44227"}, {"DASHBOARD_METRIC_PORT": "-1"}),
]


@pytest.mark.parametrize("case, user_env, expected", HEAD_ENVIRONMENTS, ids=[c[0] for c in HEAD_ENVIRONMENTS])
def test_the_head_environment_keeps_the_head_to_its_owner(case: str, user_env: dict[str, str], expected: dict[str, object]) -> None:
    env = head_environment(user_env, "/h/auth_token", "/h")
    assert {name: env.get(name) for name in expected} == expected, case
