"""One port-forward stream of one head pod, from kwok to the stack's door to the Ray head, naming the pod.

Why: kwok (sigs.k8s.io/kwok v0.8.0) runs a PortForward's `command` once per port-forward stream, with the stream on
its stdin and stdout (pkg/kwok/server/debugging_port_forword.go `PortForward`, pkg/utils/exec/exec.go `Command`).
The stack gives each head pod a PortForward whose command is this file (kwok.py `HeadPodWatch`): it connects to the
door's Unix socket (head_front.py), says which pod the stream is for in one line, `POD <namespace>/<name>`, and then
passes the stream's bytes both ways. The door, knowing the pod, can refuse a call without that pod's Ray cluster's
token, as the pod's own Ray head would.

Run as `python -I pod_relay.py SOCKET NAMESPACE/NAME`, a child of kwok inside its network namespace (the Unix socket
is a file, reachable from there); it imports the standard library alone. It ends when the door ends the connection,
and dies with kwok (PR_SET_PDEATHSIG); kwok kills it when the stream ends.

What this does not do: read or change the bytes it passes; check the pod name beyond passing it on (the door does).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import threading
from typing import Optional, Sequence

#: linux/prctl.h: the signal a child gets when its parent dies.
_PR_SET_PDEATHSIG = 1
#: How long the door may take to accept the connection.
CONNECT_TIMEOUT_SECONDS = 10.0
#: The first word of the line that names the pod (head_front.py `parse_preface`).
PREFACE_WORD = "POD"


def preface(pod: str) -> bytes:
    """The line that tells the door which pod (`namespace/name`) the stream is for."""
    return f"{PREFACE_WORD} {pod}\n".encode("ascii")


def _stdin_to(door: socket.socket) -> None:
    try:
        while True:
            chunk = os.read(0, 65536)
            if not chunk:
                break
            door.sendall(chunk)
    except OSError:
        pass
    try:
        door.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _door_to_stdout(door: socket.socket) -> None:
    try:
        while True:
            chunk = door.recv(65536)
            if not chunk:
                return
            view = memoryview(chunk)
            while view:
                view = view[os.write(1, view):]
    except OSError:
        return


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[1].count("/") != 1:
        print("usage: pod_relay.py SOCKET NAMESPACE/NAME", file=sys.stderr)
        return 2
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: kwok's own kill on the stream's end remains
    door = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    door.settimeout(CONNECT_TIMEOUT_SECONDS)
    try:
        door.connect(args[0])
        door.sendall(preface(args[1]))
    except OSError as exc:
        print(f"pod_relay: cannot reach the door {args[0]}: {exc}", file=sys.stderr)
        return 3
    door.settimeout(None)
    threading.Thread(target=_stdin_to, args=(door,), daemon=True).start()
    _door_to_stdout(door)
    return 0


if __name__ == "__main__":
    sys.exit(main())
