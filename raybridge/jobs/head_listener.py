"""Which port the private head's dashboard listens on, and proof that the listener is the head's own.

Why it exists: a port chosen by raybridge and handed to `ray start` on its command line can be
read by every local user (`/proc/PID/cmdline`) and bound by one of them before the dashboard
binds it; raybridge would then send its bearer token and the working dir to that user's
listener, and believe its answers. So the head is started on port 0 (the kernel picks a free
port as the dashboard binds it: nothing to race for), the port is read from the head's own
output in raybridge's private directory, and before any request that carries the token the
listener on that port must be owned by this user (the kernel's socket table) and held open by
a process of the head's session, the one raybridge launched (`/proc/PID/fd`).

What it deliberately does not do: choose ports, or talk to the head. Where `/proc` is not
Linux's (the socket table is absent), the ownership check cannot be made and says so: the
kernel-chosen port is then the only protection.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

#: `ray start` prints the Job API address once the head is up (ray@2.60 scripts.py, "To submit a Ray job ...").
_JOB_API_ADDRESS = re.compile(r"RAY_API_SERVER_ADDRESS='https?://127\.0\.0\.1:(\d{1,5})'")
_TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
_LISTEN = "0A"


def dashboard_port_in(log_text: str) -> Optional[int]:
    """The dashboard port `ray start` printed into the head's log, or None before it has."""
    found = _JOB_API_ADDRESS.search(log_text)
    if found is None:
        return None
    port = int(found.group(1))
    return port if 0 < port < 65536 else None


def gcs_address_in(temp_dir: Path) -> Optional[str]:
    """The GCS address `ray start` recorded in the head's own temp dir (`ray_current_cluster`), or None."""
    try:
        text = (temp_dir / "ray_current_cluster").read_text().strip()
    except OSError:
        return None
    return text if re.fullmatch(r"127\.0\.0\.1:\d{1,5}", text) else None


def _loopback_listener(port: int, proc: Path) -> Optional[tuple[int, str]]:
    """(uid, socket inode) of the socket listening on 127.0.0.1:`port` (or ::1 / ::ffff:127.0.0.1), from the kernel's table."""
    wanted = f"{port:04X}"
    loopback = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    for table in _TCP_TABLES:
        try:
            lines = (proc / Path(table).relative_to("/proc")).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            address, _, local_port = fields[1].partition(":")
            if local_port == wanted and address in loopback:
                return int(fields[7]), fields[9]
    return None


def _session_of(pid: str, proc: Path) -> Optional[int]:
    try:
        fields = (proc / pid / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[3]) if len(fields) > 3 else None


def _holder_in_session(inode: str, session: int, proc: Path) -> Optional[int]:
    """A process of `session` that holds socket `inode` open, or None."""
    target = f"socket:[{inode}]"
    for entry in proc.iterdir():
        if not entry.name.isdigit() or _session_of(entry.name, proc) != session:
            continue
        try:
            descriptors = list((entry / "fd").iterdir())
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(descriptor) == target:
                    return int(entry.name)
            except OSError:
                continue
    return None


def listener_problem(port: int, session: int, proc: Path = Path("/proc")) -> Optional[str]:
    """Why the listener on 127.0.0.1:`port` is not the head's own (None when it is, or cannot be checked here).

    Its own: the socket belongs to this user and a process of `session` (the head's, which raybridge
    started) holds it open."""
    if not any((proc / Path(table).relative_to("/proc")).exists() for table in _TCP_TABLES):
        return None  # no Linux socket table: the kernel-chosen port is the protection
    found = _loopback_listener(port, proc)
    if found is None:
        return f"nothing listens on 127.0.0.1:{port}"
    uid, inode = found
    if uid != os.getuid():
        return f"the listener on 127.0.0.1:{port} belongs to user id {uid}, not to this user ({os.getuid()})"
    if _holder_in_session(inode, session, proc) is None:
        return f"the listener on 127.0.0.1:{port} is held by no process of the head raybridge started"
    return None


def _inodes_in_session(session: int, proc: Path) -> set[str]:
    """Socket inodes held open by the processes of `session`."""
    found: set[str] = set()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or _session_of(entry.name, proc) != session:
            continue
        try:
            descriptors = list((entry / "fd").iterdir())
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                target = os.readlink(descriptor)
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[len("socket:[") : -1])
    return found


def _shown_address(hex_address: str, hex_port: str) -> str:
    if len(hex_address) == 8:
        octets = [str(int(hex_address[i : i + 2], 16)) for i in (6, 4, 2, 0)]
        return f"{'.'.join(octets)}:{int(hex_port, 16)}"
    return f"[{hex_address}]:{int(hex_port, 16)}"


def exposed_listeners(session: int, proc: Path = Path("/proc")) -> list[str]:
    """Listening sockets of the head's session bound to anything but loopback ("0.0.0.0:8265"); [] where the socket
    table cannot be read. The head relies on a Ray setting (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0) that a Ray release
    may drop: this checks what it was for, not the setting."""
    loopback_v4 = "0100007F"
    loopback_v6 = {"00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    inodes: Optional[set[str]] = None
    exposed = []
    for table in _TCP_TABLES:
        try:
            lines = (proc / Path(table).relative_to("/proc")).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            address, _, port = fields[1].partition(":")
            if address == loopback_v4 or address in loopback_v6:
                continue
            if inodes is None:
                inodes = _inodes_in_session(session, proc)
            if fields[9] in inodes:
                exposed.append(_shown_address(address, port))
    return exposed