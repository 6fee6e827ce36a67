"""Vectored sends: a binary frame's header and the codec's chunks in one ``os.writev`` when
nothing else is queued, else ``ws.send``. The wire bytes are the same.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from websockets.protocol import SERVER, State

__all__ = ["frame_header", "send_chunks"]


def frame_header(size: int) -> bytes:
    """The header of one unmasked, final, binary frame carrying ``size`` bytes."""
    if size < 126:
        return bytes((0x82, size))
    if size < 1 << 16:
        return b"\x82\x7e" + size.to_bytes(2, "big")
    return b"\x82\x7f" + size.to_bytes(8, "big")


def _direct_fd(ws: Any) -> int | None:
    """The socket to write to directly, or None when websockets must send this frame."""
    try:
        proto = ws.protocol
        transport = ws.transport
        if (
            proto.state is not State.OPEN
            or proto.side is not SERVER
            or proto.extensions
            or proto.writes
            or proto.expect_continuation_frame
            or getattr(ws, "send_in_progress", None) is not None
            or getattr(ws, "fragmented_send_waiter", None) is not None
            or transport.is_closing()
            or transport.get_write_buffer_size()
            or transport.get_extra_info("ssl_object") is not None
        ):
            return None
        sock = transport.get_extra_info("socket")
        return None if sock is None else int(sock.fileno())
    except AttributeError:  # another websockets layout: take the portable path
        return None


async def send_chunks(ws: Any, chunks: Sequence[Any]) -> bool:
    """Send ``b"".join(chunks)`` as one binary message; True if no copy was made.

    Raises what ``ws.send`` raises (``ConnectionClosed``) when the connection is gone.
    """
    fd = _direct_fd(ws)
    if fd is None:
        await ws.send(b"".join(chunks))
        return False
    views = [memoryview(c).cast("B") for c in chunks]
    size = sum(v.nbytes for v in views)
    head = frame_header(size)
    views[0] = memoryview(head + bytes(views[0]))
    try:
        sent = os.writev(fd, views)
    except BlockingIOError:
        sent = 0
    except OSError:  # nothing was written; let websockets report the broken connection
        await ws.send(b"".join(chunks))
        return False
    if sent == len(head) + size:
        return True
    # The socket took part of it: queue the rest (a copy of the rest only) behind it on
    # the transport, which flushes it in order, and respect its flow control.
    rest = []
    for v in views:
        if sent >= v.nbytes:
            sent -= v.nbytes
            continue
        rest.append(v[sent:])
        sent = 0
    ws.transport.write(b"".join(rest))
    drain = getattr(ws, "drain", None)  # websockets' flow control (pauses past its high mark)
    if drain is not None:
        await drain()
    return False
