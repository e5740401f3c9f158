"""The server side of RFC 6455 WebSocket, as much as pod port-forwarding needs.

Handshake (`Sec-WebSocket-Accept`, subprotocol choice), frames in both
directions (the client's masked, ours unmasked), fragmentation, ping/pong
and the closing handshake. `kubernetes.stream.portforward` speaks
`v4.channel.k8s.io` over this: every binary frame starts with a channel byte.

What this does not do: no extensions (permessage-deflate is never
negotiated), no TLS, no text-frame UTF-8 validation, and no client side.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import struct
import threading
from typing import BinaryIO

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA

CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 1002
MAX_MESSAGE = 64 * 1024 * 1024


def accept_key(client_key: str) -> str:
    """The Sec-WebSocket-Accept value for a Sec-WebSocket-Key."""
    digest = hashlib.sha1((client_key.strip() + GUID).encode("ascii")).digest()
    return base64.b64encode(digest).decode("ascii")


def choose_protocol(offered_header: str | None, supported: list[str]) -> str | None:
    """The first protocol of ours that the client offered (None when there is no overlap)."""
    offered = [p.strip() for p in (offered_header or "").split(",") if p.strip()]
    for protocol in supported:
        if protocol in offered:
            return protocol
    return None


def encode_frame(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    """A server frame (never masked)."""
    first = (0x80 if fin else 0) | opcode
    length = len(payload)
    if length < 126:
        header = struct.pack("!BB", first, length)
    elif length < 1 << 16:
        header = struct.pack("!BBH", first, 126, length)
    else:
        header = struct.pack("!BBQ", first, 127, length)
    return header + payload


def unmask(payload: bytes, mask: bytes) -> bytes:
    if not payload:
        return b""
    key = (mask * (len(payload) // 4 + 1))[: len(payload)]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(len(payload), "big")


class WebSocketConnection:
    """One accepted WebSocket over a socket whose HTTP upgrade has been answered."""

    def __init__(self, reader: BinaryIO, sock: socket.socket) -> None:
        self._reader = reader
        self._sock = sock
        self._send_lock = threading.Lock()
        self.close_sent = False
        self.close_received = False

    def _read_exact(self, count: int) -> bytes | None:
        data = b""
        while len(data) < count:
            try:
                chunk = self._reader.read(count - len(data))
            except (OSError, ValueError):
                return None
            if not chunk:
                return None
            data += chunk
        return data

    def _send(self, opcode: int, payload: bytes) -> bool:
        with self._send_lock:
            if self.close_sent:
                return False
            if opcode == OP_CLOSE:
                self.close_sent = True
            try:
                self._sock.sendall(encode_frame(opcode, payload))
                return True
            except OSError:
                self.close_sent = True
                return False

    def send_binary(self, payload: bytes) -> bool:
        return self._send(OP_BINARY, payload)

    def send_close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        self._send(OP_CLOSE, struct.pack("!H", code) + reason.encode("utf-8"))

    def receive(self) -> tuple[int, bytes] | None:
        """The next data message (opcode, payload); None once the connection is closing or gone.

        Control frames are answered here: ping gets pong, close gets close.
        """
        message_opcode: int | None = None
        parts: list[bytes] = []
        while True:
            header = self._read_exact(2)
            if header is None:
                return None
            first, second = header
            fin, opcode = bool(first & 0x80), first & 0x0F
            if first & 0x70:
                self.send_close(CLOSE_PROTOCOL_ERROR, "reserved bits set")
                return None
            if not second & 0x80:
                self.send_close(CLOSE_PROTOCOL_ERROR, "client frames must be masked")
                return None
            length = second & 0x7F
            if length == 126:
                extended = self._read_exact(2)
                if extended is None:
                    return None
                length = struct.unpack("!H", extended)[0]
            elif length == 127:
                extended = self._read_exact(8)
                if extended is None:
                    return None
                length = struct.unpack("!Q", extended)[0]
            if length > MAX_MESSAGE:
                self.send_close(1009, "message too big")
                return None
            mask = self._read_exact(4)
            payload = self._read_exact(length) if length else b""
            if mask is None or payload is None:
                return None
            payload = unmask(payload, mask)
            if opcode >= 0x8:
                if not fin or length > 125:
                    self.send_close(CLOSE_PROTOCOL_ERROR, "bad control frame")
                    return None
                if opcode == OP_PING:
                    self._send(OP_PONG, payload)
                elif opcode == OP_CLOSE:
                    self.close_received = True
                    code = payload[:2] if len(payload) >= 2 else struct.pack("!H", CLOSE_NORMAL)
                    self._send(OP_CLOSE, code)
                    return None
                continue
            if opcode == OP_CONTINUATION:
                if message_opcode is None:
                    self.send_close(CLOSE_PROTOCOL_ERROR, "unexpected continuation frame")
                    return None
            else:
                if message_opcode is not None:
                    self.send_close(CLOSE_PROTOCOL_ERROR, "expected a continuation frame")
                    return None
                message_opcode = opcode
            parts.append(payload)
            if fin:
                return message_opcode, b"".join(parts)
