"""`check_reachable`: a Ray GCS address that refuses, stays silent or hangs up is refused at once, in one sentence."""

from __future__ import annotations

import socket
import threading
from typing import Callable, Iterator, Optional

import pytest

from raybridge.errors import InfraError
from raybridge.gpu.ray_probe import check_reachable


def _refusing() -> Iterator[str]:
    with socket.socket() as sock:  # bound, never listening: the kernel refuses
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _serving(answer: Optional[bytes]) -> Callable[[], Iterator[str]]:
    """A listener whose every connection gets `answer` (None: nothing, kept open; b'': closed at once)."""

    def serve() -> Iterator[str]:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        kept: list[socket.socket] = []

        def accept() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                conn.recv(64)  # the client's preface
                if answer is None:
                    kept.append(conn)
                    continue
                if answer:
                    conn.sendall(answer)
                conn.close()

        threading.Thread(target=accept, daemon=True).start()
        try:
            yield f"127.0.0.1:{listener.getsockname()[1]}"
        finally:
            listener.close()
            for conn in kept:
                conn.close()

    return serve


SETTINGS_FRAME = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"

# (case, the server, the error's end, or None where the address passes)
ROWS = [
    ("refuses", _refusing, "nothing answers there (Connection refused)"),
    ("accepts and stays silent", _serving(None), "it accepts connections but does not answer within 0.5s"),
    ("accepts and hangs up", _serving(b""), "it closes the connection without answering"),
    ("answers as a gRPC server does", _serving(SETTINGS_FRAME), None),
]


@pytest.mark.parametrize("case, server, error", ROWS, ids=[row[0] for row in ROWS])
def test_an_address_is_checked_for_an_answer(case: str, server: Callable[[], Iterator[str]], error: Optional[str]) -> None:
    context = server()
    address = next(context)
    try:
        if error is None:
            check_reachable(address, 0.5)
        else:
            with pytest.raises(InfraError) as raised:
                check_reachable(address, 0.5)
            assert str(raised.value) == f"cannot connect to the Ray cluster at {address!r}: {error}"
    finally:
        context.close()


@pytest.mark.parametrize("address", ["auto", "http://127.0.0.1:1", "ray://127.0.0.1:1", "no-port"])
def test_what_is_not_a_gcs_host_port_is_left_to_ray(address: str) -> None:
    check_reachable(address, 0.5)
