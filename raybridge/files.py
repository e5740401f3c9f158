"""Reading the files a user names on the command line, with errors a user can act on.

One place so that a missing or unreadable spec, node list or pod list is
reported the same way: `BadInput` naming the flag and the path. It reads and
parses; what the objects mean is the pure core's business (`jobs/spec_file.py` `load_spec` reads
the spec file and leaves every rule about its fields to `core.spec.parse_spec`).

Only a regular file is read (a FIFO would block for ever, `/dev/zero` never
ends), opened without blocking, and at most `MAX_FILE_BYTES` of it; parsing is
bounded in depth and size by `core.documents`.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from raybridge.core.documents import load_json_or_yaml, load_yaml_documents
from raybridge.core.dra import CLAIM_KIND, DEVICE_CLASS_KIND, SLICE_KIND
from raybridge.core.inventory import DeviceSources, items_of_kinds
from raybridge.errors import BadInput


#: The largest file raybridge reads: node and pod lists of large clusters fit many times over.
#: Generous for `kubectl get pods -A -o json` of a large cluster (10,000 pods is about 130 MB indented),
#: a bound for what is not a file of objects (`/dev/zero` given by mistake).
MAX_FILE_BYTES = 512 * 1024 * 1024
_CHUNK = 4 * 1024 * 1024


def _read_bounded(f: Any, expected: int) -> bytes:
    """At most MAX_FILE_BYTES + 1 bytes: the size the file says it has in one read (memory follows what the
    file holds, not the bound: one `read(bound)` would ask for the whole bound at once), then, should it have
    grown, the rest in chunks."""
    first = f.read(min(expected, MAX_FILE_BYTES) + 1)
    if len(first) <= expected:
        return first
    chunks: list[bytes] = [first]
    total = len(first)
    while total <= MAX_FILE_BYTES:
        chunk = f.read(min(_CHUNK, MAX_FILE_BYTES + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


#: The name that stands for standard input, as kubectl's `-f -` (one file of a command can be it).
STDIN = "-"
_stdin_read = False


def _read_stdin(what: str) -> str:
    """Standard input as text, bounded as a file is; refused when it is a terminal (nothing was piped in, and the
    command would wait for typing) or was read already by another flag of the command."""
    global _stdin_read
    if _stdin_read:
        raise BadInput(f"{what}: standard input (-) was read already by another flag; only one file can come from it")
    _stdin_read = True
    stream = sys.stdin.buffer if sys.stdin is not None else None
    if stream is None or stream.isatty():
        raise BadInput(f"{what}: - reads standard input, which is a terminal here: pipe the objects in (e.g. `kubectl get pods -A -o json | ...`)")
    try:
        data = _read_bounded(stream, MAX_FILE_BYTES)
    except OSError as exc:
        raise BadInput(f"{what}: standard input cannot be read: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise BadInput(f"{what}: standard input holds more than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{what}: standard input is not text (UTF-8)") from None


def read_user_file(path: str | Path, what: str) -> str:
    """The text of a file the user named (`-`: standard input), bounded, or BadInput naming the flag and the path."""
    if str(path) == STDIN:
        return _read_stdin(what)
    shown = repr(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise BadInput(f"{what} file {shown} does not exist") from None
    except IsADirectoryError:
        raise BadInput(f"{what} file {shown} is a directory") from None
    except OSError as exc:
        raise BadInput(f"{what} file {shown} cannot be read: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise BadInput(f"{what} file {shown} is a directory")
        raise BadInput(f"{what} file {shown} is not a regular file (a pipe, device or socket)")
    too_large = f"{what} file {shown} is larger than {MAX_FILE_BYTES // 2**20} MiB"
    with os.fdopen(fd, "rb") as f:
        expected = os.fstat(f.fileno()).st_size
        if expected > MAX_FILE_BYTES:
            raise BadInput(too_large)
        try:
            data = _read_bounded(f, expected)
        except OSError as exc:
            raise BadInput(f"{what} file {shown} cannot be read: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise BadInput(too_large)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{what} file {shown} is not text (UTF-8)") from None


def read_json_or_yaml(path: str, what: str) -> Any:
    return load_json_or_yaml(read_user_file(path, what), f"{what} file {path!r}")


def load_objects(path: str, kind: str) -> list[dict[str, Any]]:
    return load_objects_of_kinds(path, kind)[kind]


def load_objects_of_kinds(path: str, kind: str, also: Sequence[str] = ()) -> dict[str, list[dict[str, Any]]]:
    """The `--<kind>s` file's objects by kind: `kind`'s, and those of the kinds `also` it may hold beside them."""
    document = read_json_or_yaml(path, f"--{kind.lower()}s")
    try:
        return items_of_kinds(document, kind, also)
    except ValueError as exc:
        raise BadInput(f"--{kind.lower()}s {path!r}: {exc}") from None


#: What a `--nodes` file may hold beside Nodes: the DRA objects that say which GPUs the nodes publish as devices.
NODE_FILE_KINDS = (SLICE_KIND, DEVICE_CLASS_KIND)
#: What a `--pods` file may hold beside Pods: the ResourceClaims that hold DRA devices.
POD_FILE_KINDS = (CLAIM_KIND,)


@dataclass(frozen=True)
class NodeFile:
    """A `--nodes` file read (with its `--pods` file where given): the objects the inventory is built from."""

    nodes: list[dict[str, Any]]
    pods: Optional[list[dict[str, Any]]]
    devices: DeviceSources


def load_node_file(nodes_path: str, pods_path: Optional[str] = None) -> NodeFile:
    """Nodes (with ResourceSlices and DeviceClasses) and, where a pod file is given, Pods (with ResourceClaims):
    DRA devices allocated to claims are known only when a pod file is given."""
    nodes = load_objects_of_kinds(nodes_path, "Node", NODE_FILE_KINDS)
    pods = load_objects_of_kinds(pods_path, "Pod", POD_FILE_KINDS) if pods_path else None
    devices = DeviceSources.read(nodes[SLICE_KIND], nodes[DEVICE_CLASS_KIND], pods[CLAIM_KIND] if pods is not None else None)
    return NodeFile(nodes=nodes["Node"], pods=pods["Pod"] if pods is not None else None, devices=devices)


def read_yaml_documents(path: str, what: str) -> list[Any]:
    """Every document of a YAML (or JSON) file, for multi-document manifests."""
    return load_yaml_documents(read_user_file(path, what), f"{what} file {path!r}")
