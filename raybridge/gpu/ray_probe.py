"""Every node's GPUs in a running Ray cluster, asked on the node itself.

Ray's own resource view says how many "GPU"s a node offers, not which vendor,
model or memory they are, and not what the machine has beyond what Ray was
told. So this runs one small task pinned to each alive node (hard node
affinity, zero CPUs and GPUs so it runs even on a busy node) that scans the
vendor libraries there, and turns the answers into one `Inventory` (source
"ray").

The task ships `raybridge.gpu.scan` by value, so the nodes need neither
raybridge nor anything beyond the Python standard library and whatever vendor
library they already have. A node that does not answer in time, or whose task
fails, is reported with a reason (not eligible, no GPUs counted), never as an
error.

Deliberately not here: starting a Ray cluster (with no address and no
connection it connects to an existing one, "auto", or fails), shutting down a
connection it did not open, counting GPUs in use, and importing ray before it
is called.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import warnings
from collections import defaultdict
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

from raybridge.core.inventory import Inventory, NodeGpus
from raybridge.core.runtime_env import is_uri
from raybridge.errors import InfraError
from raybridge.gpu.local import records_from_scan
from raybridge.noise import native_stderr_quiet

#: Bound on connecting to the Ray cluster (ray.init retries for minutes on its own).
CONNECT_TIMEOUT = 30.0
#: How many node names a grouped note spells out before it just counts.
_NAMES_IN_NOTE = 3


# --- connecting -------------------------------------------------------------------------


#: What a gRPC client sends first on a cleartext connection (RFC 9113 section 3.4): the HTTP/2
#: preface and an empty SETTINGS frame. A GCS (a gRPC server) answers with its own SETTINGS frame.
_HTTP2_CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def check_reachable(address: str, timeout: float) -> None:
    """InfraError within `timeout` when a `host:port` GCS address refuses or never answers.

    Ray itself retries such an address for about 40 s, printing its C++ warnings. Something must
    listen there and answer the HTTP/2 preface a gRPC client opens with: a socket that accepts and
    stays silent (a hung process, a firewall that swallows the traffic) is refused here.
    Whether what answers is a GCS is left to Ray.
    """
    import time

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or is_uri(address):
        return
    where = f"cannot connect to the Ray cluster at {address!r}"
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout)
    except socket.timeout:
        raise InfraError(f"{where}: no connection within {timeout:g}s") from None
    except OSError as exc:
        raise InfraError(f"{where}: nothing answers there ({exc.strerror or type(exc).__name__})") from None
    try:
        with sock:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock.sendall(_HTTP2_CLIENT_PREFACE)
            answered = sock.recv(1)
    except socket.timeout:
        raise InfraError(f"{where}: it accepts connections but does not answer within {timeout:g}s") from None
    except OSError as exc:
        raise InfraError(f"{where}: the connection failed before an answer ({exc.strerror or type(exc).__name__})") from None
    if not answered:
        raise InfraError(f"{where}: it closes the connection without answering") from None


def _init_bounded(ray: Any, target: str, timeout: float) -> None:
    """`ray.init`, given up on after `timeout` seconds (a GCS that accepts but never answers would hang it)."""
    outcome: dict[str, BaseException] = {}

    def connect() -> None:
        try:
            with warnings.catch_warnings():
                # Ray 2.x warns on every connect about a future CUDA_VISIBLE_DEVICES change.
                warnings.simplefilter("ignore", FutureWarning)
                ray.init(address=target, logging_level="ERROR", log_to_driver=False)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=connect, name="raybridge-ray-connect", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise InfraError(f"cannot connect to the Ray cluster at {target!r}: no answer within {timeout:g}s")
    if "error" in outcome:
        raise InfraError(f"cannot connect to the Ray cluster at {target!r}: {_first_line(outcome['error'])}") from None


@contextmanager
def _ray_connection(ray: Any, address: Optional[str], timeout: float = CONNECT_TIMEOUT) -> Iterator[None]:
    """Reuse the process's Ray connection, or open one (bounded) for the duration and close it after."""
    if ray.is_initialized():
        yield
        return
    target = address or "auto"
    check_reachable(target, timeout)
    with _node_address_on_loopback(target):
        with native_stderr_quiet():  # Ray's C++ core prints its connection retries there
            _init_bounded(ray, target, timeout)
        try:
            yield
        finally:
            ray.shutdown()


@contextmanager
def _node_address_on_loopback(target: str) -> Iterator[None]:
    """While connecting to a GCS at a loopback address, this driver's node address is 127.0.0.1 too.

    ray@2.60 python/ray/_private/services.py (get_node_ip_address): a driver takes the machine's
    network address as its node address unless `ray_constants.ENABLE_RAY_CLUSTER` is off, and then
    waits for a raylet registered at that address. A head kept to loopback (raybridge's private
    head) registers its raylet at 127.0.0.1, so the driver would wait for ever; with the flag off
    it connects, and it connects as well to a head that registered its network address.
    """
    host = target.rpartition(":")[0].strip("[]")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        yield
        return
    from ray._private import ray_constants

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


@contextmanager
def _scan_module_by_value() -> Iterator[None]:
    """While inside, Ray pickles `raybridge.gpu.scan` functions by value, not by import."""
    from ray import cloudpickle

    from raybridge.gpu import scan

    already = scan.__name__ in cloudpickle.list_registry_pickle_by_value()
    if not already:
        cloudpickle.register_pickle_by_value(scan)
    try:
        yield
    finally:
        if not already:
            cloudpickle.unregister_pickle_by_value(scan)


# --- naming -----------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def node_names(nodes: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Ray node id -> display name: the hostname (the pod name under KubeRay), else the IP,
    else the id; with the id's first 8 digits added where several nodes share a name."""
    base = {
        n["NodeID"]: n.get("NodeManagerHostname") or n.get("NodeManagerAddress") or n["NodeID"] for n in nodes
    }
    taken: dict[str, int] = defaultdict(int)
    for name in base.values():
        taken[name] += 1
    return {nid: (f"{name} ({nid[:8]})" if taken[name] > 1 else name) for nid, name in base.items()}


def _group_notes(notes_by_node: dict[str, list[str]], total: int) -> list[str]:
    """One line per distinct note, saying which nodes it applies to."""
    nodes_by_note: dict[str, list[str]] = defaultdict(list)
    for node, notes in notes_by_node.items():
        for note in dict.fromkeys(notes):
            nodes_by_note[note].append(node)
    lines = []
    for note, nodes in nodes_by_note.items():
        if len(nodes) == 1:
            lines.append(f"{nodes[0]}: {note}")
        elif len(nodes) == total:
            lines.append(f"{note} (all {total} nodes)")
        else:
            shown = ", ".join(nodes[:_NAMES_IN_NOTE]) + (", ..." if len(nodes) > _NAMES_IN_NOTE else "")
            lines.append(f"{note} ({len(nodes)} nodes: {shown})")
    return lines


# --- probing ----------------------------------------------------------------------------


def _unanswered(name: str, reason: str, ray_gpus: float) -> NodeGpus:
    if ray_gpus:
        reason += f"; Ray reports {ray_gpus:g} GPU(s) there"
    return NodeGpus(name=name, vendor=None, gpus=0, eligible=False, reasons=(reason,))


def _submit(ray: Any, node_ids: Sequence[str]) -> dict[Any, str]:
    """One scan task per node, pinned there; ObjectRef -> node id."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from raybridge.gpu.scan import scan_node

    task = ray.remote(num_cpus=0, num_gpus=0, max_retries=0)(scan_node)
    with _scan_module_by_value():
        return {
            task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nid, soft=False),
                name="raybridge-gpu-scan",
            ).remote(): nid
            for nid in node_ids
        }


def _cancel(ray: Any, refs: Sequence[Any]) -> None:
    for ref in refs:
        try:
            ray.cancel(ref, force=True)
        except Exception:
            pass


def _collect(ray: Any, refs: dict[Any, str], timeout: float) -> tuple[dict[str, Any], dict[str, str]]:
    """Scans by node id, and failure reasons by node id for the rest."""
    ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=max(timeout, 0))
    scans: dict[str, Any] = {}
    failures: dict[str, str] = {}
    for ref in ready:
        try:
            scans[refs[ref]] = ray.get(ref)
        except Exception as exc:
            failures[refs[ref]] = f"GPU probe failed: {_first_line(exc)}"
    _cancel(ray, pending)
    for ref in pending:
        failures[refs[ref]] = f"did not answer the GPU probe within {timeout:g}s"
    return scans, failures


def _probe_nodes(ray: Any, timeout: float) -> Inventory:
    everything = ray.nodes()
    alive = [n for n in everything if n.get("Alive")]
    dead = len(everything) - len(alive)
    extra = [f"{dead} dead Ray node(s) not probed"] if dead else []
    if not alive:
        return Inventory(nodes=(), source="ray", notes=("no alive Ray nodes",) + tuple(extra))
    names = node_names(alive)
    scans, failures = _collect(ray, _submit(ray, [n["NodeID"] for n in alive]), timeout)
    records: list[NodeGpus] = []
    notes_by_node: dict[str, list[str]] = {}
    for node in alive:
        nid, name = node["NodeID"], names[node["NodeID"]]
        if nid in scans:
            found = records_from_scan(scans[nid], name)
            records.extend(found.records)
            notes_by_node[name] = list(found.notes)
        else:
            ray_gpus = float((node.get("Resources") or {}).get("GPU") or 0)
            records.append(_unanswered(name, failures[nid], ray_gpus))
            notes_by_node[name] = [failures[nid]]
    notes = _group_notes(notes_by_node, len(alive)) + extra
    return Inventory(nodes=tuple(records), source="ray", notes=tuple(notes))


def probe_ray_cluster(address: Optional[str] = None, timeout: float = 60, connect_timeout: float = CONNECT_TIMEOUT) -> Inventory:
    """GPUs of every alive node of the Ray cluster this process is connected to, or at `address`.

    With no connection yet, connects to `address` (None means "auto": the
    cluster in RAY_ADDRESS or one running on this machine; none is started)
    and disconnects afterwards; an existing connection is reused and left
    open. Raises `InfraError` only when it cannot connect.
    """
    from raybridge.gpu.ray_start import ensure_ray_can_start
    from raybridge.noise import after_ray_import

    ensure_ray_can_start()
    import ray

    after_ray_import()

    with _ray_connection(ray, address, connect_timeout):
        return _probe_nodes(ray, timeout)
