"""Which port the private head's dashboard listens on, and proof that the listener, and every connection to it,
is the head's own.

Why it exists: a port chosen by raybridge and handed to `ray start` on its command line can be
read by every local user (`/proc/PID/cmdline`) and bound by one of them before the dashboard
binds it; raybridge would then send its bearer token and the working dir to that user's
listener, and believe its answers. So the head is started on port 0 (the kernel picks a free
port as the dashboard binds it: nothing to race for), the port is read from the head's own
output in raybridge's private directory, and before any request that carries the token the
listener on that port must be owned by this user (the kernel's socket table) and held open by
a process of the head's session, the one raybridge launched (`/proc/PID/fd`).

A listener proven once is not enough: the head (or only its dashboard) can die while raybridge
polls it, and another local user can then bind the freed port. So every connection that will
carry the token is checked after it is established and before a byte is sent
(`connection_problem`): the kernel's socket table holds both ends of a loopback connection, and
the accepting end must belong to this user and, once accepted, be held open by the dashboard
process found when the head started.

What it deliberately does not do: choose ports, or talk to the head. Where `/proc` is not
Linux's (the socket table is absent), the ownership check cannot be made and says so: the
kernel-chosen port is then the only protection.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

#: `ray start` prints the Job API address once the head is up (ray@2.60 scripts.py, "To submit a Ray job ...").
_JOB_API_ADDRESS = re.compile(r"RAY_API_SERVER_ADDRESS='https?://127\.0\.0\.1:(\d{1,5})'")
#: The kernel's TCP socket tables, below /proc.
_TCP_TABLES = ("net/tcp", "net/tcp6")
_LISTEN = "0A"
#: The states of an accepting end worth reading: established, or closed by the client already (a short request).
_CONNECTED = frozenset({"01", "08"})
#: How often, and at most how long, an accepting end is looked at again until the dashboard has accepted it.
ACCEPT_POLL_SECONDS = 0.005
ACCEPT_WAIT_SECONDS = 5.0


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


#: 127.0.0.1, ::1 and ::ffff:127.0.0.1 as the kernel's socket tables write them.
_LOOPBACK = frozenset({"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"})


def _listening(proc: Path) -> Iterator[tuple[str, int, int, str]]:
    """(address, port, uid, socket inode) of every listening TCP socket, from the kernel's tables."""
    for table in _TCP_TABLES:
        try:
            lines = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) >= 10 and fields[3] == _LISTEN:
                address, _, port = fields[1].partition(":")
                yield address, int(port, 16), int(fields[7]), fields[9]


def _session_of(pid: str, proc: Path) -> Optional[int]:
    try:
        fields = (proc / pid / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[3]) if len(fields) > 3 else None


def _socket_holders(session: int, proc: Path) -> dict[str, int]:
    """Socket inode -> a process of `session` that holds it open."""
    holders: dict[str, int] = {}
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
                holders.setdefault(target[len("socket:[") : -1], int(entry.name))
    return holders


def listener_problem(port: int, session: int, proc: Path = Path("/proc")) -> Optional[str]:
    """Why the listener on 127.0.0.1:`port` is not the head's own (None when it is, or cannot be checked here).

    Its own: the socket belongs to this user and a process of `session` (the head's, which raybridge
    started) holds it open."""
    return listener_holder(port, session, proc)[1]


def listener_holder(port: int, session: int, proc: Path = Path("/proc")) -> tuple[Optional[int], Optional[str]]:
    """(the process of `session` that holds the listener on 127.0.0.1:`port`, None) when the listener is the head's
    own; (None, why not) when it is not; (None, None) where the socket table cannot be read."""
    if not socket_table_readable(proc):
        return None, None  # no Linux socket table: the kernel-chosen port is the protection
    found = next(((uid, inode) for address, bound, uid, inode in _listening(proc) if bound == port and address in _LOOPBACK), None)
    if found is None:
        return None, f"nothing listens on 127.0.0.1:{port}"
    uid, inode = found
    if uid != os.getuid():
        return None, f"the listener on 127.0.0.1:{port} belongs to user id {uid}, not to this user ({os.getuid()})"
    holder = _socket_holders(session, proc).get(inode)
    if holder is None:
        return None, f"the listener on 127.0.0.1:{port} is held by no process of the head raybridge started"
    return holder, None


def socket_table_readable(proc: Path = Path("/proc")) -> bool:
    """True where the kernel's TCP socket tables can be read (Linux)."""
    return any((proc / table).exists() for table in _TCP_TABLES)


def _hex_endpoint(address: str, port: int) -> tuple[frozenset[str], int]:
    """The ways the kernel's tables may write `address` (an IPv4 or IPv6 text address), with `port`."""
    import ipaddress

    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if ip.version == 4:
        packed = ip.packed
        as_v4 = packed[::-1].hex().upper()
        mapped = bytes(10) + b"\xff\xff" + packed
        return frozenset({as_v4, _v6_hex(mapped)}), port
    return frozenset({_v6_hex(ip.packed)}), port


def _v6_hex(packed: bytes) -> str:
    """An IPv6 address as /proc/net/tcp6 writes it: four 32-bit words, each in the host's (little-endian) order."""
    return "".join(packed[i : i + 4][::-1].hex().upper() for i in range(0, 16, 4))


def _accepting_end(local: tuple[str, int], peer: tuple[str, int], proc: Path) -> Optional[tuple[int, str]]:
    """(uid, inode) of the socket at the other end of our connection `local` -> `peer`: the table row whose own
    address is `peer` and whose remote address is `local`. Its inode is "0" until the listener has accepted it."""
    peer_hex, peer_port = _hex_endpoint(*peer)
    local_hex, local_port = _hex_endpoint(*local)
    for table in _TCP_TABLES:
        try:
            lines = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] not in _CONNECTED:
                continue
            own, _, own_port = fields[1].partition(":")
            remote, _, remote_port = fields[2].partition(":")
            if own in peer_hex and remote in local_hex and int(own_port, 16) == peer_port and int(remote_port, 16) == local_port:
                return int(fields[7]), fields[9]
    return None


def _held_by(pid: int, inode: str, proc: Path) -> bool:
    try:
        descriptors = list((proc / str(pid) / "fd").iterdir())
    except OSError:
        return False
    target = f"socket:[{inode}]"
    for descriptor in descriptors:
        try:
            if os.readlink(descriptor) == target:
                return True
        except OSError:
            continue
    return False


def connection_problem(
    local: tuple[str, int],
    peer: tuple[str, int],
    holder: int,
    proc: Path = Path("/proc"),
    accept_wait: float = ACCEPT_WAIT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Optional[str]:
    """Why our established connection `local` -> `peer` does not reach the head (None when it does, or where the
    socket table cannot be read): its accepting end must belong to this user, and once the listener has accepted it
    (waited for up to `accept_wait`), be held open by `holder`, the dashboard process the head started with.

    Checked before anything is sent: a listener of another user on a port the head freed is found by its owner at
    once, without waiting for it to accept."""
    if not socket_table_readable(proc):
        return None
    where = f"{peer[0]}:{peer[1]}"
    deadline = clock() + accept_wait
    while True:
        found = _accepting_end(local, peer, proc)
        if found is None:
            return f"no socket of this machine accepted the connection to {where}"
        uid, inode = found
        if uid != os.getuid():
            return f"the connection to {where} was accepted by user id {uid}, not by this user ({os.getuid()})"
        if inode != "0":
            if _held_by(holder, inode, proc):
                return None
            return f"the connection to {where} was accepted by a process other than the head's dashboard (pid {holder})"
        if clock() >= deadline:
            return f"the listener on {where} did not accept the connection within {accept_wait:g}s"
        sleep(ACCEPT_POLL_SECONDS)


def _shown_address(hex_address: str, port: int) -> str:
    if len(hex_address) == 8:
        octets = [str(int(hex_address[i : i + 2], 16)) for i in (6, 4, 2, 0)]
        return f"{'.'.join(octets)}:{port}"
    return f"[{hex_address}]:{port}"


def exposed_listeners(session: int, proc: Path = Path("/proc")) -> list[str]:
    """Listening sockets of the head's session bound to anything but loopback ("0.0.0.0:8265"); [] where the socket
    table cannot be read. The head relies on a Ray setting (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0) that a Ray release
    may drop: this checks what it was for, not the setting."""
    beyond = [(address, port, inode) for address, port, _, inode in _listening(proc) if address not in _LOOPBACK]
    if not beyond:
        return []
    holders = _socket_holders(session, proc)
    return [_shown_address(address, port) for address, port, inode in beyond if inode in holders]
