"""The test cluster serves its owner alone: a second user of the machine reaches none of its doors.

The attacks a second local user made on the test cluster, made again here as user nobody (uid 65534, a child that
setuid()s: tests/e2e/second_user.py) against a stack as `python -m testcluster up --with kuberay,kueue,karpenter,kai`
starts it (its own Ray head) and against the session's real cluster (the tests' shared head behind its front):
- a port-forward to a head pod's dashboard through the nodes' kubelet port and kwok's own, without the API server's
  kubelet client certificate, and a job submitted through it;
- a job POSTed to every port the stack listens on (the head's dashboard among them);
- the head's GCS read with no token;
- etcd read with no client certificate;
- KAI's `/get-snapshot` (nodes, queues, ConfigMaps), on loopback and on the machine's own addresses;
- `up --kubeconfig` given a path that nobody made first in the shared temp directory (a file, or a symbolic link).
Each must fail, and no job may run: each job would write `id` into a directory of the test's. And every listening
socket of every process of the stack (Ray's GCS, raylet, agents and workers included) is on loopback, or in a
network namespace of the stack's whose only interface is its loopback.

What it does not do: attack as this user (a process of the stack's own user can read its keys anyway), or kubesim
(it listens on nothing: its simulations are clients of a stack's API server).
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

NOBODY = 65534
ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="acting as a second user needs root to switch users"),
    pytest.mark.xdist_group("testcluster-attacks"),
]
#: 127.0.0.1, ::1 and ::ffff:127.0.0.1 as /proc/net/tcp{,6} write them.
_LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


# -- what the stack runs, as root sees it ------------------------------------------------------------------------
def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    return children


def _family(roots: list[int]) -> set[int]:
    """`roots` and every descendant (Ray's workers, the programs the network-namespace wrapper starts)."""
    children, found, pending = _children(), set(roots), list(roots)
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def _stack_pids(stack: Any) -> set[int]:
    """Every process of the stack (its Ray head's among them) and this one, which holds its doors and relays."""
    return _family([p.popen.pid for p in stack.processes if p.popen is not None]) | {os.getpid()}


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _flag(stack: Any, program: str, flag: str) -> str:
    """The value of `--flag=VALUE` on the command line of the stack's `program`, as any local user reads it."""
    for process in stack.processes:
        if process.name == program and process.popen is not None:
            for pid in _family([process.popen.pid]):
                for arg in _cmdline(pid):
                    if arg.startswith(f"{flag}="):
                        return arg.split("=", 1)[1]
    raise AssertionError(f"no {flag} on {program}'s command line")


def _listeners(pids: set[int]) -> list[dict[str, Any]]:
    """Every listening TCP socket held by `pids`: its process, network namespace, address and port."""
    found = []
    for pid in pids:
        try:
            inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")}
            namespace = os.readlink(f"/proc/{pid}/ns/net")
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            tables = [Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:] for table in ("tcp", "tcp6")]
            interfaces = sorted(line.split(":")[0].strip() for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:])
        except OSError:
            continue  # gone meanwhile (a Ray worker)
        for line in (line for table in tables for line in table):
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.append({"pid": pid, "name": name, "namespace": namespace, "interfaces": interfaces, "address": address, "port": int(port, 16)})
    return found


def _machine_addresses() -> list[str]:
    """Each interface's IPv4 address but loopback's (SIOCGIFADDR, linux/sockios.h)."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        for _, name in socket.if_nameindex():
            try:
                answer = fcntl.ioctl(control, 0x8915, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address
            address = socket.inet_ntoa(answer[20:24])
            if not ipaddress.ip_address(address).is_loopback:
                found.append(address)
    return found


# -- the attacks --------------------------------------------------------------------------------------------------
def _as_nobody(plan: dict[str, Any]) -> list[dict[str, str]]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/", "PYTHONPATH": str(ROOT)}  # no token, no kubeconfig
    out = subprocess.run(
        [sys.executable, "-m", "tests.e2e.second_user", str(NOBODY)], input=json.dumps(plan), cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _succeeded(result: dict[str, str]) -> bool:
    outcome = result["outcome"]
    return {
        "portforward": outcome.startswith("upgraded"),
        "job": outcome.startswith(("HTTP/1.1 200", "HTTP/1.0 200")),
        "gcs": outcome.startswith("read "),
    }.get(result["attack"], outcome.startswith("HTTP 200"))


def _code_that_ran(proof: Path, results: list[dict[str, str]]) -> dict[str, str]:
    """What the attackers' jobs wrote (`id`), waited for while any attack got an answer that could start one."""
    deadline = time.monotonic() + (60 if any(_succeeded(r) for r in results) else 3)
    while time.monotonic() < deadline and not any(proof.iterdir()):
        time.sleep(0.5)
    return {path.name: path.read_text().strip() for path in proof.iterdir()}


def _assert_all_failed(results: list[dict[str, str]], proof: Path) -> None:
    assert results, "no attack was made"
    ran = _code_that_ran(proof, results)
    succeeded = [r for r in results if _succeeded(r)]
    assert succeeded == [] and ran == {}, json.dumps({"succeeded": succeeded, "ran": ran, "all": results}, indent=1)


@pytest.fixture(scope="module")
def own_stack() -> Iterator[Any]:
    """A stack with every operator and a Ray head of its own, as `python -m testcluster up --with ...` starts it."""
    from tests.builders import h100_node
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import OPERATORS, StackOptions

    with own_cluster(StackOptions(operators=OPERATORS, start_ray_head=True, nodes=[h100_node("attacked-0")])) as stack:
        yield stack
    # every operator and the Ray head ended on SIGTERM: the API server, stopped with the operators and relays, and
    # the Ray head's raylet, stopped with its GCS, had waited on them out the whole grace and been killed. Under load,
    # a request in flight can still hold the API server's own shutdown past the grace: that kill alone is allowed.
    assert set(stack.killed_at_stop) <= {"kube-apiserver", "etcd"}, stack.killed_at_stop


@pytest.fixture
def proof(tmp_path: Path) -> Path:
    """Where an attacker's job, run as the head's user, would write `id`."""
    folder = tmp_path / "proof"
    folder.mkdir()
    return folder


def _kubelet_ports(kubeconfig: Path) -> list[int]:
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig))
    try:
        nodes = json.loads(client.CoreV1Api(api).list_node(_preload_content=False).data)["items"]
    finally:
        api.close()
    return sorted({n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] for n in nodes})


def test_every_listener_of_the_stack_is_on_loopback_or_in_a_namespace_of_its_own(own_stack: Any) -> None:
    from testcluster.kai import start_node_scale_adjuster

    adjuster = start_node_scale_adjuster(own_stack)  # controller-runtime's default metrics server, `:8080`
    try:
        listeners = _listeners(_stack_pids(own_stack))
    finally:
        adjuster.stop()
    here = os.readlink("/proc/self/ns/net")
    names = sorted({entry["name"] for entry in listeners})  # a binary's name is its program's and release's, cut to 15
    for program in ("etcd", "kube-apiserver", "kwok", "karpenter", "kai-scheduler", "kai-admission", "kai-nodescalea",
                    "gcs_server", "raylet", "ray::Dashboard", "ray::RuntimeEnv"):
        assert any(name.startswith(program) for name in names), (program, names)
    beyond = [entry for entry in listeners if entry["namespace"] == here and entry["address"] not in _LOOPBACK]
    assert beyond == [], json.dumps(beyond, indent=1)
    elsewhere = [entry for entry in listeners if entry["namespace"] != here]
    assert {entry["name"][:5] for entry in elsewhere} >= {"kwok-", "karpe", "kai-s", "kai-a", "kai-n"}, elsewhere
    open_namespaces = {entry["name"]: entry["interfaces"] for entry in elsewhere if entry["interfaces"] != ["lo"]}
    assert open_namespaces == {}, open_namespaces


@pytest.mark.parametrize("which", ["own head", "the tests' head"])
def test_another_user_cannot_port_forward_to_the_head_through_a_kubelet_port(which: str, request: pytest.FixtureRequest, proof: Path) -> None:
    if which == "own head":
        stack = request.getfixturevalue("own_stack")
        kubeconfig = stack.kubeconfig
        ports = _kubelet_ports(kubeconfig) + [int(_flag(stack, "kwok", "--server-address").rsplit(":", 1)[1])]
    else:
        request.getfixturevalue("ray_head")  # the session cluster's head pods stand for it
        kubeconfig = request.getfixturevalue("real_cluster").kubeconfig
        ports = _kubelet_ports(kubeconfig)
    results = _as_nobody({"proof": str(proof), "kubelet_ports": sorted(set(ports))})
    assert {r["attack"] for r in results} == {"portforward"}
    _assert_all_failed(results, proof)


def test_another_user_cannot_submit_a_job_on_any_port_of_the_stack(own_stack: Any, proof: Path) -> None:
    here = os.readlink("/proc/self/ns/net")
    ports = sorted({e["port"] for e in _listeners(_stack_pids(own_stack)) if e["namespace"] == here and e["address"] in _LOOPBACK})
    assert len(ports) >= 10, ports
    _assert_all_failed(_as_nobody({"proof": str(proof), "job_ports": ports}), proof)


def test_another_user_cannot_read_the_heads_gcs(own_stack: Any, proof: Path) -> None:
    head = getattr(own_stack, "ray_head", None)
    address = head.gcs_address if head is not None else (own_stack.workdir / "ray" / "ray_current_cluster").read_text().strip()
    results = _as_nobody({"proof": str(proof), "gcs": address})
    assert results[0]["outcome"] != "failed: no Ray here"
    _assert_all_failed(results, proof)


def test_another_user_cannot_read_etcd(own_stack: Any, proof: Path) -> None:
    port = int(_flag(own_stack, "etcd", "--listen-client-urls").rsplit(":", 1)[1])
    _assert_all_failed(_as_nobody({"proof": str(proof), "etcd_ports": [port]}), proof)


def test_another_user_cannot_get_kais_snapshot(own_stack: Any, proof: Path) -> None:
    port = int(_flag(own_stack, "kai-scheduler", "--plugin-server-port"))
    targets = [[host, port, "/get-snapshot"] for host in ["127.0.0.1", *_machine_addresses()]]
    _assert_all_failed(_as_nobody({"proof": str(proof), "http_get": targets}), proof)


# -- the kubeconfig -----------------------------------------------------------------------------------------------
def _nobody_makes(path: Path, target: Path) -> None:
    """As nobody: `target`, an empty file of nobody's that anyone may write to, and at `path` (unless it is `target`)
    a symbolic link to it."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            os.chmod(target, 0o666)
            if path != target:
                os.symlink(target, path)
            os._exit(0)
        except BaseException:
            os._exit(1)
    assert os.waitpid(pid, 0)[1] == 0


def _read_as_nobody(path: Path) -> str:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with open(path, "rb") as f:
                os.write(write_end, f.read()[:65536] or b"(empty)")
        except OSError as exc:
            os.write(write_end, type(exc).__name__.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        text = f.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return text


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_up_will_not_write_the_admin_key_where_another_user_made_the_path_first(kind: str, tmp_path: Path) -> None:
    stem = f"/tmp/tc-{uuid.uuid4().hex[:12]}"  # the shared temp directory, as the docs' example once had it
    path = Path(f"{stem}.kubeconfig")
    target = path if kind == "file" else Path(f"{stem}.nobody")
    nodes = tmp_path / "no-nodes.json"
    nodes.write_text("[]")
    _nobody_makes(path, target)
    proc = subprocess.Popen(
        [sys.executable, "-m", "testcluster", "up", "--kubeconfig", str(path), "--no-ray", "--with", "", "--nodes", str(nodes)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        lines: list[str] = []
        deadline = time.monotonic() + 300
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("ready:") or time.monotonic() > deadline:
                break
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        code = proc.wait(60)
        seen_by_nobody = _read_as_nobody(target)
        assert "client-key-data" not in seen_by_nobody and seen_by_nobody == "(empty)"
        assert code == 2, "".join(lines)
        why = "is a symbolic link" if kind == "symlink" else "belongs to user id 65534"
        assert len(lines) == 1 and why in lines[0], lines
    finally:
        if proc.poll() is None:
            proc.kill()
        for leftover in {path, target}:
            leftover.unlink(missing_ok=True)
