"""Who is on the other end of a loopback TCP connection: the user id the kernel's socket table gives the peer.

Why: the stack's doors to the Ray head (the dashboard proxy KubeRay dials, the front the tests use) add
or need no token, so they must serve the user who runs the stack and no other local user, or one process alone.
A loopback connection's peer is a socket of this machine, listed with its owner and inode in `/proc/net/tcp`
(and `tcp6`); the process that holds it names that inode among its `/proc/PID/fd` links.

What it deliberately does not do: anything where that table is absent (not Linux): the answer is then None,
which the doors take as a refusal.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

__all__ = ["peer_uid", "peer_is_this_user", "peer_is_held_by"]

#: The state of an established connection, as the tables write it.
_ESTABLISHED = "01"


def _peer_row(listen_port: int, peer_port: int, proc: Path) -> Optional[list[str]]:
    """The fields after the addresses of the row of the socket at 127.0.0.1:`peer_port` connected to
    127.0.0.1:`listen_port`: state, queues, timer, retransmits, uid, timeout, inode.

    Called on every accepted connection while the tables may hold thousands of sockets (closed connections wait in
    TIME_WAIT): the row is found with one substring search of each table's text, not by splitting every row."""
    for table, loopback in (("net/tcp", "0100007F"), ("net/tcp6", "0000000000000000FFFF00000100007F")):
        try:
            text = (proc / table).read_text()
        except OSError:
            continue
        wanted = f" {loopback}:{peer_port:04X} {loopback}:{listen_port:04X} {_ESTABLISHED} "
        at = text.find(wanted)
        if at < 0:
            continue
        fields = text[at : text.find("\n", at)].split()[2:]
        if len(fields) >= 7:
            return fields
    return None


def peer_uid(listen_port: int, peer_port: int, proc: Path = Path("/proc")) -> Optional[int]:
    """The user id owning the socket at 127.0.0.1:`peer_port` that is connected to 127.0.0.1:`listen_port`, or None."""
    fields = _peer_row(listen_port, peer_port, proc)
    return int(fields[4]) if fields is not None else None


def peer_is_held_by(listen_port: int, peer_port: int, pid: int, proc: Path = Path("/proc"), tries: int = 5) -> bool:
    """The peer's socket (as in `peer_uid`) is held open by process `pid` (one of its /proc/PID/fd links names it).
    Looked for again before refusing, as in `peer_is_this_user`."""
    for attempt in range(tries):
        fields = _peer_row(listen_port, peer_port, proc)
        if fields is not None:
            if int(fields[4]) != os.getuid():
                return False
            wanted = f"socket:[{fields[6]}]"
            try:
                descriptors = list((proc / str(pid) / "fd").iterdir())
            except OSError:
                return False
            for descriptor in descriptors:
                try:
                    if os.readlink(descriptor) == wanted:
                        return True
                except OSError:
                    continue
            return False
        if attempt + 1 < tries:
            time.sleep(0.01)
    return False


def peer_is_this_user(listen_port: int, peer_port: int, tries: int = 5, pause: float = 0.01) -> bool:
    """The peer's socket belongs to the user running this process. The kernel lists the tables a page at a time
    while connections come and go, so a row can be missing from one reading: looked for again before refusing."""
    for attempt in range(tries):
        uid = peer_uid(listen_port, peer_port)
        if uid is not None:
            return uid == os.getuid()
        if attempt + 1 < tries:
            time.sleep(pause)
    return False
