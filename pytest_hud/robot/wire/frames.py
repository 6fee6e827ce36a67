"""RFC 6455 framing for our client: opcodes, masking, client frames, close payloads and
the opening handshake's check. Pure functions, so the client's protocol class holds
only the receive path."""

from __future__ import annotations

import base64
import hashlib
import os

import numpy as np

from pytest_hud.errors import ConnectError

__all__ = ["mask"]

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_DATA_OPS = (OP_CONT, OP_TEXT, OP_BINARY)


class _ProtocolViolation(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def mask(data: bytes | bytearray | memoryview, key: bytes) -> bytes:
    """XOR ``data`` with the 4-byte masking ``key`` (RFC 6455 section 5.3)."""
    n = len(data)
    if n <= 1024:  # small frames (actions, control frames): one big-int XOR
        pad = (key * (n // 4 + 1))[:n]
        value = int.from_bytes(data, "little") ^ int.from_bytes(pad, "little")
        return value.to_bytes(n, "little")
    arr = np.frombuffer(data, np.uint8)
    out = np.empty(n, np.uint8)
    words = n // 4
    np.bitwise_xor(
        arr[: words * 4].view("<u4"), np.frombuffer(key, "<u4")[0], out=out[: words * 4].view("<u4")
    )
    out[words * 4 :] = arr[words * 4 :] ^ np.frombuffer(key, np.uint8)[: n - words * 4]
    return out.tobytes()


class _MaskKeys:
    """Masking keys from the OS's CSPRNG, fetched 1,024 at a time: as unpredictable as one
    ``os.urandom(4)`` a frame (RFC 6455 section 10.3), without a syscall every frame."""

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0

    def next(self) -> bytes:
        at = self._at
        if at + 4 > len(self._pool):
            self._pool, at = os.urandom(4096), 0
        self._at = at + 4
        return self._pool[at : at + 4]

    def forget(self) -> None:
        """In a forked child: draw its own keys, never the parent's."""
        self._pool, self._at = b"", 0


_keys = _MaskKeys()
os.register_at_fork(after_in_child=_keys.forget)


def _client_frame(opcode: int, payload: bytes | bytearray | memoryview) -> bytes:
    n = len(payload)
    key = _keys.next()
    if n < 126:
        head = bytes((0x80 | opcode, 0x80 | n))
    elif n < 1 << 16:
        head = bytes((0x80 | opcode, 0xFE)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 0xFF)) + n.to_bytes(8, "big")
    return head + key + mask(payload, key)


def _close_payload(code: int, reason: str = "") -> bytes:
    return code.to_bytes(2, "big") + reason.encode()[:120]


def _check_response(response: bytes, key: bytes) -> None:
    """Validate the server's answer to the opening handshake."""
    lines = response.decode("latin-1").split("\r\n")
    status = lines[0]
    fields = status.split(" ", 2)
    if len(fields) < 2 or not fields[0].startswith("HTTP/1.") or fields[1] != "101":
        raise ConnectError(
            f"the server did not switch to WebSocket: {status!r} (is this a ws:// "
            "endpoint of a robot bridge or policy server?)"
        )
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if headers.get("upgrade", "").lower() != "websocket":
        raise ConnectError(f"bad handshake: Upgrade is {headers.get('upgrade')!r}")
    if "upgrade" not in headers.get("connection", "").lower():
        raise ConnectError(f"bad handshake: Connection is {headers.get('connection')!r}")
    accept = base64.b64encode(hashlib.sha1(key + _GUID).digest()).decode()
    if headers.get("sec-websocket-accept") != accept:
        raise ConnectError("bad handshake: Sec-WebSocket-Accept does not match our key")
    if headers.get("sec-websocket-extensions"):
        raise ConnectError(
            f"bad handshake: the server imposed extensions we did not offer "
            f"({headers['sec-websocket-extensions']})"
        )
