"""The agent side's WebSocket seam: :class:`Transport`, our zero-copy client for ``ws://`` or
``websockets`` (``wss://``, or asked for), raising the same errors; and :func:`received`, a
peer's next message decoded, each way it can fail said once.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

from pytest_hud.errors import ConnectError, ConnectTimeout, TransportClosed
from pytest_hud.robot.wire import inproc
from pytest_hud.robot.wire.websockets_client import WebsocketsTransport
from pytest_hud.robot.wire.wsclient import FrameTransport

__all__ = [
    "IMPLEMENTATIONS",
    "ConnectError",
    "ConnectTimeout",
    "Transport",
    "TransportClosed",
    "WebsocketsTransport",
    "connect",
    "received",
]

T = TypeVar("T")

#: Names :func:`connect` accepts for ``impl``.
IMPLEMENTATIONS = ("frames", "websockets")


class Transport(Protocol):
    """One open WebSocket connection as the robot wire uses it."""

    async def send(self, data: bytes | str) -> None:
        """Send one message (binary for bytes, text for str); raises TransportClosed."""

    async def recv(self) -> bytes | memoryview | str:
        """The next message: text as str, binary as a bytes-like (bytes, or a memoryview
        on a buffer of its own for large messages); raises TransportClosed once closed."""

    async def close(self) -> None:
        """Close with code 1000 (bounded wait for the peer's close frame)."""

    def abort(self) -> None:
        """Drop the connection at once, without a closing handshake."""


async def connect(
    url: str,
    *,
    open_timeout: float | None = 30.0,
    close_timeout: float = 5.0,
    headers: Mapping[str, str] | None = None,
    impl: str | None = None,
) -> Transport:
    """Open a WebSocket to ``url`` without compression; raises ConnectError.

    ``open_timeout`` bounds the TCP connect plus the opening handshake. A ``url`` an inline
    sim serves on this event loop is reached in-process (:mod:`.inproc`), with no socket.
    """
    local = inproc.dial(url)
    if local is not None:
        return local
    impl = impl or os.environ.get("PYTEST_HUD_WEBSOCKET") or None
    if impl is None:
        impl = "websockets" if url.startswith("wss://") else "frames"
    if impl not in IMPLEMENTATIONS:
        raise ValueError(
            f"unknown WebSocket implementation {impl!r} (from impl= or "
            f"$PYTEST_HUD_WEBSOCKET); use one of {', '.join(IMPLEMENTATIONS)}"
        )
    if impl == "frames":
        return await FrameTransport.connect(
            url, open_timeout=open_timeout, close_timeout=close_timeout, headers=headers
        )
    return await WebsocketsTransport.connect(
        url, open_timeout=open_timeout, close_timeout=close_timeout, headers=headers
    )


async def received(
    waiting: Awaitable[bytes | memoryview | str],
    decode: Callable[[bytes | memoryview], T],
    invalid: type[Exception],
    fail: Callable[[str], Exception],
    *,
    silent: str,
    text: Callable[[str], str],
) -> T:
    """A peer's next message, decoded; else ``fail(what the peer did)`` raised: ``silent``
    when ``waiting`` (a receive the caller bounds) times out, ``text(frame)`` for a text
    frame, and ``sent a bad frame: ...`` when ``decode`` raises ``invalid``. What else the
    receive raises (TransportClosed) passes through."""
    try:
        frame = await waiting
    except TimeoutError:
        raise fail(silent) from None
    if isinstance(frame, str):
        raise fail(text(frame))
    try:
        return decode(frame)
    except invalid as exc:
        raise fail(f"sent a bad frame: {exc}") from None
