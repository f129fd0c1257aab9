"""A minimal websocket client on a plain socket (RFC 6455), for tests against a real server.

It can do what a browser library hides and these tests need: connect from a chosen source address
(`127.0.0.2` is loopback too, but not `127.0.0.1`), send any `Origin`, and send one frame of any size.
"""

from __future__ import annotations

import base64
import os
import select
import socket
import struct
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass
class Handshake:
    status: int
    connection: socket.socket
    # Bytes the server sent that nobody has read yet (frames that arrived while we were sending).
    received: bytes = b""
    # The server ended the TCP connection.
    ended: bool = False

    def close(self) -> None:
        self.connection.close()


def websocket_open(
    base_url: str,
    path: str,
    *,
    origin: str | None,
    source: str = "127.0.0.1",
    headers: tuple[tuple[str, str], ...] = (),
    timeout: float = 10.0,
) -> Handshake:
    """Send the opening handshake; `status` is 101 when the server accepted it."""
    parts = urlsplit(base_url)
    assert parts.hostname and parts.port
    connection = socket.create_connection((parts.hostname, parts.port), timeout=timeout, source_address=(source, 0))
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: {parts.netloc}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}",
        "Sec-WebSocket-Version: 13",
        *([f"Origin: {origin}"] if origin else []),
        *(f"{name}: {value}" for name, value in headers),
    ]
    connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = connection.recv(4096)
        if not chunk:
            break
        head += chunk
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    status = int(status_line.split()[1]) if status_line.startswith("HTTP/") else 0
    return Handshake(status=status, connection=connection)


TEXT, BINARY, CLOSE = 0x1, 0x2, 0x8


def websocket_send_text(handshake: Handshake, payload: bytes) -> int:
    """Send one masked text frame carrying `payload` (a client must mask), however large.

    Returns how many bytes went out before the server ended the connection (all of them if it didn't).
    """
    return websocket_send_frame(handshake, payload, opcode=TEXT)


def websocket_close_send(handshake: Handshake, code: int = 1000) -> None:
    """Start the closing handshake; `websocket_close_code` then reads the server's answer."""
    websocket_send_frame(handshake, struct.pack("!H", code), opcode=CLOSE)


def websocket_send_frame(handshake: Handshake, payload: bytes, *, opcode: int) -> int:
    """Send one masked, final frame of `opcode` carrying `payload` — any bytes, valid UTF-8 or not."""
    mask = os.urandom(4)
    length = len(payload)
    first = 0x80 | opcode
    if length < 126:
        header = struct.pack("!BB", first, 0x80 | length)
    elif length < 1 << 16:
        header = struct.pack("!BBH", first, 0x80 | 126, length)
    else:
        header = struct.pack("!BBQ", first, 0x80 | 127, length)
    # One XOR over the whole payload as an integer: fast even for 10 MB.
    key = (mask * (length // 4 + 1))[:length]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(length, "big")
    # Sent in pieces, reading whatever the server says meanwhile: a server that refuses the frame
    # closes after reading its header, and the reset that follows unread data would otherwise
    # swallow its close frame.
    data = header + mask + masked
    sent = 0
    while sent < len(data):
        while select.select([handshake.connection], [], [], 0)[0]:
            try:
                chunk = handshake.connection.recv(65536)
            except ConnectionResetError:
                chunk = b""
            handshake.received += chunk
            if not chunk:
                handshake.ended = True
                return sent
            if _close_frame_in(handshake.received) is not None:
                return sent
        try:
            sent += handshake.connection.send(data[sent : sent + 65536])
        except (BrokenPipeError, ConnectionResetError):
            handshake.ended = True
            return sent
    return sent


def websocket_close_code(handshake: Handshake) -> int | None:
    """Wait for the server to end the socket: the code of its close frame, or None when it dropped
    the TCP connection without one. Raises `TimeoutError` when the socket stays open."""
    while True:
        code = _close_frame_in(handshake.received)
        if code is not None or handshake.ended:
            return code
        try:
            chunk = handshake.connection.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            handshake.ended = True
        handshake.received += chunk


def _close_frame_in(buffer: bytes) -> int | None:
    """The status code of the first close frame in `buffer` (server frames are not masked)."""
    while len(buffer) >= 2:
        opcode, length = buffer[0] & 0x0F, buffer[1] & 0x7F
        offset = 2
        if length == 126:
            length, offset = struct.unpack("!H", buffer[2:4])[0], 4
        elif length == 127:
            length, offset = struct.unpack("!Q", buffer[2:10])[0], 10
        if len(buffer) < offset + length:
            return None
        payload, buffer = buffer[offset : offset + length], buffer[offset + length :]
        if opcode == 0x8:
            return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
    return None
