"""A program in a network namespace of its own, reached through Unix sockets; and the relays that join them.

Why: a program of the test cluster that listens on every interface with no flag to say otherwise (KAI's plugin
server and webhook server, Karpenter's metrics and health servers: `:PORT` in their code), or that serves whoever
connects (kwok's server: no client authentication, plain HTTP beside TLS), must not be reachable by another user of
the machine. In a network namespace of its own, whose one interface is its loopback, no process outside can connect
to it at all. What the stack must reach of it, and what it must reach of the stack, goes through Unix sockets in the
stack's private directory (mode 0700: no other user may connect to them):
- `--dial PORT=PATH`: inside, 127.0.0.1:PORT leads to the Unix socket PATH outside (the stack's relay to the API
  server, or the door to the Ray head);
- `--serve PATH=PORT`: the Unix socket PATH, made here (mode 0600), leads to 127.0.0.1:PORT inside (a health port,
  a webhook, kwok's server).
Run as `python -I netjail.py ... -- PROGRAM ARGS` under `unshare --net` (`jail_argv` writes the line: root makes the
namespace itself, another user inside a user namespace of its own mapped to itself, Linux's unprivileged user
namespaces). It brings the loopback up, starts the relays, runs the program, passes SIGTERM and SIGINT on to it and
exits with its status. It imports the standard library alone (it runs with `-I`, no site packages).

`Relay` is also what the stack's own doors are made of: a listener whose every admitted connection is joined byte for
byte to a new connection elsewhere.

What this does not do: no firewall, no address translation, no UDP; nothing of the program is changed but where its
sockets live. A process of the same user can still enter the namespace (/proc/PID/ns/net): it is meant to keep out
other users, not the owner.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Optional, Sequence

__all__ = ["Relay", "jail_argv", "main", "peer_pid", "pipe", "splice", "unix_connect", "unix_listener"]

#: linux/sockios.h and linux/if.h: get and set an interface's flags; the flag that brings it up.
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_PR_SET_PDEATHSIG = 1
#: How long a relay waits for the other end of a new connection to answer.
CONNECT_TIMEOUT_SECONDS = 10.0


def pipe(source: socket.socket, target: socket.socket) -> None:
    """Bytes from `source` to `target` until `source` ends; then `target` is told no more will come."""
    try:
        while True:
            chunk = source.recv(65536)
            if not chunk:
                break
            target.sendall(chunk)
    except OSError:
        pass
    try:
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def splice(one: socket.socket, other: socket.socket, onward: Optional[Callable[[socket.socket, socket.socket], None]] = None) -> None:
    """Both directions between two connected sockets until both have ended; then both are closed. `onward`, when
    given, carries `one`'s bytes to `other` in place of a plain pipe (it tells `other` when no more come)."""
    one.settimeout(None)
    other.settimeout(None)
    back = threading.Thread(target=pipe, args=(other, one), daemon=True)
    back.start()
    (onward or pipe)(one, other)
    back.join()
    one.close()
    other.close()


def unix_listener(path: Path) -> socket.socket:
    """A listening Unix socket at `path`, made with mode 0600 (never a moment more open)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    listener.listen(128)
    return listener


def unix_connect(path: Path, timeout: float = CONNECT_TIMEOUT_SECONDS) -> socket.socket:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(timeout)
    try:
        connection.connect(str(path))
    except OSError:
        connection.close()
        raise
    return connection


def peer_pid(connection: socket.socket) -> Optional[int]:
    """The process id the kernel recorded for the peer of a Unix socket when it connected (SO_PEERCRED)."""
    try:
        pid, _, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        return None
    return pid


class Relay:
    """Accepts on `listener`; each connection `admit` lets in is joined to a fresh `connect()`, the rest are closed.

    `onward(client, upstream)`, when given, carries the client's bytes on in place of a plain pipe (`splice`)."""

    def __init__(
        self, listener: socket.socket, connect: Callable[[], socket.socket],
        admit: Callable[[socket.socket], bool] = lambda connection: True, name: str = "relay",
        onward: Optional[Callable[[socket.socket, socket.socket], None]] = None,
    ) -> None:  # fmt: skip
        self.listener = listener
        self.connect = connect
        self.admit = admit
        self.onward = onward
        self.refused = 0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes accept() (Linux)
        except OSError:
            pass
        self._thread.join(5)
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), name=f"{self._thread.name}-conn", daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        """The admission check runs here, so a slow one holds up no other connection."""
        upstream: Optional[socket.socket] = None
        try:
            if not self.admit(connection):
                self.refused += 1
                connection.close()
                return
            upstream = self.connect()
        except OSError:
            connection.close()
            if upstream is not None:
                upstream.close()
            return
        splice(connection, upstream, self.onward)


def jail_argv(program: Sequence[str], dials: dict[int, Path], serves: dict[Path, int]) -> list[str]:
    """The command line that runs `program` in a network namespace of its own, joined to the outside as `dials`
    (inside port -> outside Unix socket) and `serves` (Unix socket made here -> inside port) say."""
    namespace = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--net"]
    options = [f"--dial={port}={path}" for port, path in dials.items()] + [f"--serve={path}={port}" for path, port in serves.items()]
    return [*namespace, "--", sys.executable, "-I", str(Path(__file__).resolve()), *options, "--", *program]


def _loopback_up() -> None:
    """`ip link set lo up`, by the ioctls it makes (a new network namespace's loopback starts down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(control, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(control, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _pair(text: str, port_first: bool) -> tuple[int, Path]:
    left, _, right = text.partition("=")
    port, path = (left, right) if port_first else (right, left)
    if not port.isdigit() or not path:
        raise argparse.ArgumentTypeError(f"not {'PORT=PATH' if port_first else 'PATH=PORT'}: {text!r}")
    return int(port), Path(path)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="netjail", description="run a program in this network namespace, joined to the outside by Unix sockets")
    parser.add_argument("--dial", action="append", default=[], type=lambda t: _pair(t, True), metavar="PORT=PATH")
    parser.add_argument("--serve", action="append", default=[], type=lambda t: _pair(t, False), metavar="PATH=PORT")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no program given")
    try:
        _loopback_up()
    except OSError as exc:
        print(f"netjail: cannot bring up the namespace's loopback: {exc}", file=sys.stderr, flush=True)
        return 3
    relays = []
    for port, path in args.dial:
        relays.append(Relay(socket.create_server(("127.0.0.1", port)), lambda path=path: unix_connect(path), name=f"dial-{port}"))
    for port, path in args.serve:
        connect: Callable[[], socket.socket] = lambda port=port: socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_SECONDS)
        relays.append(Relay(unix_listener(path), connect, name=f"serve-{port}"))
    child = subprocess.Popen(program, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, frame: child.send_signal(number))
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
