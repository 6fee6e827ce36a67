"""The agent side's WebSocket seam: one small interface, two implementations.

:class:`Transport` is all a client of the robot wire needs: send a message, receive
one, close. :func:`connect` picks the implementation: our own RFC 6455 client
(:mod:`pytest_hud.robot.wsclient`, ``"frames"``) for ``ws://`` urls, because it receives
a camera frame with no copy in user space, and the ``websockets`` library
(``"websockets"``) for ``wss://`` or when asked (``impl=``, or
``$PYTEST_HUD_WEBSOCKET=websockets``). Both raise the same errors.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Protocol

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect

from pytest_hud.robot.wire import ws_options

__all__ = [
    "IMPLEMENTATIONS",
    "ConnectError",
    "ConnectTimeout",
    "Transport",
    "TransportClosed",
    "WebsocketsTransport",
    "connect",
]

#: Names :func:`connect` accepts for ``impl``.
IMPLEMENTATIONS = ("frames", "websockets")


class ConnectError(ConnectionError):
    """The connection or its opening handshake failed; the message says why."""


class ConnectTimeout(ConnectError):
    """The connection or its opening handshake did not finish within ``open_timeout``."""


class TransportClosed(ConnectionError):
    """The connection is closed; ``code`` and ``reason`` come from the close frame."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        self.code = code
        self.reason = reason
        super().__init__(self.describe())

    def describe(self) -> str:
        what = "no close frame" if self.code is None else f"code {self.code}"
        return what + (f" ({self.reason})" if self.reason else "")


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


class WebsocketsTransport:
    """:class:`Transport` over a ``websockets`` client connection."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, data: bytes | str) -> None:
        try:
            await self.ws.send(data)
        except websockets.ConnectionClosed as exc:
            raise _closed(exc) from None

    async def recv(self) -> bytes | memoryview | str:
        try:
            return await self.ws.recv()
        except websockets.ConnectionClosed as exc:
            raise _closed(exc) from None

    async def close(self) -> None:
        await self.ws.close()

    def abort(self) -> None:
        self.ws.transport.abort()


def _closed(exc: websockets.ConnectionClosed) -> TransportClosed:
    rcvd = exc.rcvd
    return TransportClosed(None) if rcvd is None else TransportClosed(rcvd.code, rcvd.reason)


async def connect(
    url: str,
    *,
    open_timeout: float | None = 30.0,
    close_timeout: float = 5.0,
    headers: Mapping[str, str] | None = None,
    impl: str | None = None,
) -> Transport:
    """Open a WebSocket to ``url`` without compression; raises ConnectError.

    ``open_timeout`` bounds the TCP connect plus the opening handshake.
    """
    impl = impl or os.environ.get("PYTEST_HUD_WEBSOCKET") or None
    if impl is None:
        impl = "websockets" if url.startswith("wss://") else "frames"
    if impl not in IMPLEMENTATIONS:
        raise ValueError(
            f"unknown WebSocket implementation {impl!r} (from impl= or "
            f"$PYTEST_HUD_WEBSOCKET); use one of {', '.join(IMPLEMENTATIONS)}"
        )
    if impl == "frames":
        from pytest_hud.robot.wsclient import FrameTransport

        return await FrameTransport.connect(
            url, open_timeout=open_timeout, close_timeout=close_timeout, headers=headers
        )
    try:
        ws = await ws_connect(
            url,
            open_timeout=open_timeout,
            close_timeout=close_timeout,
            ping_interval=None,  # a peer may block its loop in a long step or forward
            additional_headers=dict(headers) if headers else None,
            **ws_options(),
        )
    except TimeoutError:
        raise ConnectTimeout(f"timed out after {open_timeout} s opening {url}") from None
    except (OSError, websockets.InvalidURI, websockets.InvalidHandshake) as exc:
        raise ConnectError(str(exc) or type(exc).__name__) from None
    return WebsocketsTransport(ws)
