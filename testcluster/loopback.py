"""Who is on the other end of a loopback TCP connection: the user id the kernel's socket table gives the peer.

Why: the stack's doors to the Ray head (the dashboard proxy KubeRay dials, the front the tests use) add
or need no token, so they must serve the user who runs the stack and no other local user. A loopback
connection's peer is a socket of this machine, listed with its owner in `/proc/net/tcp` (and `tcp6`).

What it deliberately does not do: anything where that table is absent (not Linux): the answer is then None,
which the doors take as a refusal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

__all__ = ["peer_uid"]

#: 127.0.0.1, and 127.0.0.1 mapped into IPv6, as the tables write them; the state of an established connection.
_LOOPBACK = frozenset({"0100007F", "0000000000000000FFFF00000100007F"})
_ESTABLISHED = "01"


def peer_uid(listen_port: int, peer_port: int, proc: Path = Path("/proc")) -> Optional[int]:
    """The user id owning the socket at 127.0.0.1:`peer_port` that is connected to 127.0.0.1:`listen_port`, or None."""
    for table in ("net/tcp", "net/tcp6"):
        try:
            lines = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 8 or fields[3] != _ESTABLISHED:
                continue
            local, _, local_port = fields[1].partition(":")
            remote, _, remote_port = fields[2].partition(":")
            if (local in _LOOPBACK and remote in _LOOPBACK and int(local_port, 16) == peer_port
                    and int(remote_port, 16) == listen_port):
                return int(fields[7])
    return None
