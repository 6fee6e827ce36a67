"""A WebSocket client (RFC 6455, no extensions) that receives a large binary message straight into
its own buffer, so a camera frame is copied once, by the kernel.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

import numpy as np

from pytest_hud.errors import ConnectError, ConnectTimeout, TransportClosed
from pytest_hud.robot.wire.frames import (
    _DATA_OPS,
    OP_BINARY,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    _check_response,
    _client_frame,
    _close_payload,
    _ProtocolViolation,
    mask,
)
from pytest_hud.robot.wire.mailbox import Mailbox

__all__ = ["FrameTransport", "mask"]

#: Frames up to this size (with their header) are parsed in the staging buffer.
STAGE_BYTES = 64 * 1024
#: The opening handshake's response headers may not exceed this.
MAX_HANDSHAKE_BYTES = 16 * 1024
#: A single message may not exceed this (a bound on what a peer can make us allocate).
MAX_MESSAGE_BYTES = 1 << 30
#: Queued messages beyond this pause reading until the caller catches up.
_QUEUE_HIGH = 16


class _Protocol(asyncio.BufferedProtocol):
    """Parses frames out of the socket; owned by one :class:`FrameTransport`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._stage = bytearray(STAGE_BYTES)
        self._view = memoryview(self._stage)
        self._fill = 0
        self._big: memoryview | None = None  # the frame being received into its own buffer
        self._big_fill = 0
        self._big_head = 0
        self._upgraded = False
        self.response: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._mail: Mailbox[bytes | memoryview | str] = Mailbox()
        self._frag_op: int | None = None
        self._frag_parts: list[bytes | memoryview] = []
        self.closed: TransportClosed | None = None
        self.close_sent = False
        self.lost = asyncio.get_running_loop().create_future()
        self._paused_writing = False
        self._drain: asyncio.Future[None] | None = None
        self._reading_paused = False

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return self._big[self._big_fill :]
        return self._view[self._fill :]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._big is not None:
                self._big_fill += nbytes
                if self._big_fill == self._big.nbytes:
                    payload, self._big = self._big, None
                    self._frame(self._big_head, payload)
                return
            self._fill += nbytes
            self._parse()
        except _ProtocolViolation as exc:
            self._fail(exc.code, exc.reason)

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed is None:
            self.closed = TransportClosed(
                None, f"connection lost: {exc}" if exc else "connection lost"
            )
        if not self.response.done():
            self.response.set_exception(
                ConnectError(f"the server closed the connection during the handshake ({exc})")
            )
        if not self.lost.done():
            self.lost.set_result(None)
        self._mail.wake()
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def pause_writing(self) -> None:
        self._paused_writing = True

    def resume_writing(self) -> None:
        self._paused_writing = False
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    # -- parsing --------------------------------------------------------------------------
    def _parse(self) -> None:
        buf, end, pos = self._stage, self._fill, 0
        if not self._upgraded:
            i = buf.find(b"\r\n\r\n", 0, end)
            if i < 0:
                if end >= MAX_HANDSHAKE_BYTES:
                    raise _ProtocolViolation(1002, "handshake response headers too long")
                return
            self._upgraded = True
            self.response.set_result(bytes(buf[:i]))
            pos = i + 4
        while end - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            if b1 & 0x80:
                raise _ProtocolViolation(1002, "the server sent a masked frame")
            if b0 & 0x70:
                raise _ProtocolViolation(1002, "reserved bits set, but no extension is in use")
            size, head = b1 & 0x7F, 2
            if size == 126:
                if end - pos < 4:
                    break
                size, head = int.from_bytes(buf[pos + 2 : pos + 4], "big"), 4
            elif size == 127:
                if end - pos < 10:
                    break
                size, head = int.from_bytes(buf[pos + 2 : pos + 10], "big"), 10
            if size > MAX_MESSAGE_BYTES:
                raise _ProtocolViolation(1009, f"frame of {size} bytes is too big")
            start = pos + head
            if end - start >= size:
                self._frame(b0, bytes(self._view[start : start + size]))
                pos = start + size
                continue
            if head + size > STAGE_BYTES:  # receive the rest straight into its own buffer
                big = np.empty(size, np.uint8).data  # no zero-fill: the kernel fills it
                big[: end - start] = self._view[start:end]
                self._big, self._big_fill, self._big_head = big, end - start, b0
                pos = end
            break
        if pos:
            rest = end - pos
            self._view[:rest] = bytes(self._view[pos:end])
            self._fill = rest

    def _frame(self, b0: int, payload: bytes | memoryview) -> None:
        fin, op = b0 & 0x80, b0 & 0x0F
        if op >= 0x8:
            if not fin or len(payload) > 125:
                raise _ProtocolViolation(1002, "fragmented or oversized control frame")
            if op == OP_PING:
                self._write(_client_frame(OP_PONG, payload))
            elif op == OP_CLOSE:
                self._on_close(payload)
            elif op != OP_PONG:
                raise _ProtocolViolation(1002, f"unknown control opcode {op:#x}")
            return
        if op not in _DATA_OPS:
            raise _ProtocolViolation(1002, f"unknown opcode {op:#x}")
        if op == OP_CONT:
            if self._frag_op is None:
                raise _ProtocolViolation(1002, "continuation frame without a message")
            self._frag_parts.append(payload)
            if sum(len(p) for p in self._frag_parts) > MAX_MESSAGE_BYTES:
                raise _ProtocolViolation(1009, "fragmented message is too big")
            if not fin:
                return
            op, payload = self._frag_op, b"".join(self._frag_parts)
            self._frag_op, self._frag_parts = None, []
        elif self._frag_op is not None:
            raise _ProtocolViolation(1002, "new message before the last one's final fragment")
        elif not fin:
            self._frag_op, self._frag_parts = op, [payload]
            return
        if op == OP_TEXT:
            try:
                self._deliver(bytes(payload).decode())
            except UnicodeDecodeError:
                raise _ProtocolViolation(1007, "text message is not valid UTF-8") from None
        else:
            self._deliver(payload)

    def _on_close(self, payload: bytes | memoryview) -> None:
        code, reason = 1005, ""
        if len(payload) >= 2:
            code = int.from_bytes(payload[:2], "big")
            reason = bytes(payload[2:]).decode(errors="replace")
        if self.closed is None:
            self.closed = TransportClosed(code, reason)
        if not self.close_sent:  # echo it, then the server closes the TCP connection
            self.close_sent = True
            self._write(_client_frame(OP_CLOSE, payload[:2]))
        self._mail.wake()

    def _fail(self, code: int, reason: str) -> None:
        if self.closed is None:
            self.closed = TransportClosed(code, f"protocol error: {reason}")
        if not self.response.done():
            self.response.set_exception(ConnectError(f"bad handshake response: {reason}"))
        if not self.close_sent and self._upgraded:
            self.close_sent = True
            self._write(_client_frame(OP_CLOSE, _close_payload(code, reason)))
        if self.transport is not None:
            self.transport.close()
        self._mail.wake()

    # -- delivery ---------------------------------------------------------------------
    def _deliver(self, message: bytes | memoryview | str) -> None:
        self._mail.put(message)
        if len(self._mail.items) > _QUEUE_HIGH and self.transport is not None:
            self.transport.pause_reading()
            self._reading_paused = True

    async def next_message(self) -> bytes | memoryview | str:
        messages = self._mail.items
        while not messages:
            if self.closed is not None:
                raise self.closed
            await self._mail.wait()
        message = messages.popleft()
        if self._reading_paused and len(messages) < _QUEUE_HIGH // 2:
            self._reading_paused = False
            if self.transport is not None:
                self.transport.resume_reading()
        return message

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def drain(self) -> None:
        if self._paused_writing and self.closed is None:
            self._drain = asyncio.get_running_loop().create_future()
            await self._drain


class FrameTransport:
    """:class:`~pytest_hud.robot.wire.transport.Transport` over :class:`_Protocol`."""

    def __init__(self, protocol: _Protocol, close_timeout: float) -> None:
        self._p = protocol
        self.close_timeout = close_timeout

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        open_timeout: float | None = 30.0,
        close_timeout: float = 5.0,
        headers: Mapping[str, str] | None = None,
    ) -> FrameTransport:
        """Open ``url`` (``ws://host:port/path``) and complete the opening handshake."""
        parts = urlsplit(url)
        if parts.scheme != "ws" or not parts.hostname:
            raise ConnectError(f"{url!r} is not a ws://host:port url")
        try:
            port = parts.port or 80
        except ValueError:
            raise ConnectError(f"{url!r} has an invalid port") from None
        host = parts.hostname
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        loop = asyncio.get_running_loop()
        transport: asyncio.BaseTransport | None = None
        protocol: _Protocol | None = None
        try:
            async with asyncio.timeout(open_timeout):
                transport, protocol = await loop.create_connection(_Protocol, host, port)
                key = base64.b64encode(os.urandom(16))
                hostport = f"[{host}]" if ":" in host else host
                lines = [
                    f"GET {path} HTTP/1.1",
                    f"Host: {hostport}:{port}",
                    "Upgrade: websocket",
                    "Connection: Upgrade",
                    f"Sec-WebSocket-Key: {key.decode()}",
                    "Sec-WebSocket-Version: 13",
                    *(f"{k}: {v}" for k, v in (headers or {}).items()),
                ]
                protocol._write(("\r\n".join(lines) + "\r\n\r\n").encode())
                response = await protocol.response
            _check_response(response, key)
        except BaseException as exc:  # a failure or a cancel: the socket goes with it
            if protocol is not None:
                protocol.response.cancel()  # nobody will read it any more
            _abort(transport)
            if isinstance(exc, TimeoutError):
                raise ConnectTimeout(f"timed out after {open_timeout} s opening {url}") from None
            if isinstance(exc, OSError) and not isinstance(exc, ConnectError):
                raise ConnectError(f"cannot open {url}: {exc}") from None  # refused, reset
            raise
        return cls(protocol, close_timeout)

    async def send(self, data: bytes | str) -> None:
        p = self._p
        if p.closed is not None or p.close_sent:
            raise p.closed or TransportClosed(1000, "closed by us")
        if isinstance(data, str):
            p._write(_client_frame(OP_TEXT, data.encode()))
        else:
            p._write(_client_frame(OP_BINARY, data))
        await p.drain()

    async def recv(self) -> bytes | memoryview | str:
        return await self._p.next_message()

    async def close(self) -> None:
        p = self._p
        if not p.close_sent and p.closed is None:
            p.close_sent = True
            p._write(_client_frame(OP_CLOSE, _close_payload(1000)))
        if p.closed is None:
            p.closed = TransportClosed(1000, "closed by us")
        p._mail.wake()
        if p.transport is None:
            return
        try:  # the server answers with its close frame and closes the TCP connection
            async with asyncio.timeout(self.close_timeout):
                await asyncio.shield(p.lost)
        except TimeoutError:
            p.transport.abort()
        finally:
            p.transport.close()

    def abort(self) -> None:
        if self._p.transport is not None:
            self._p.transport.abort()


def _abort(transport: asyncio.BaseTransport | None) -> None:
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.abort()  # type: ignore[attr-defined]
