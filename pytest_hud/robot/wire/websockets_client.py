"""The ``websockets`` library as a :class:`~pytest_hud.robot.wire.transport.Transport`:
used for ``wss://`` urls and when asked (``impl="websockets"``)."""

from __future__ import annotations

from collections.abc import Mapping

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect

from pytest_hud.errors import ConnectError, ConnectTimeout, TransportClosed
from pytest_hud.robot.wire.codec import ws_options

__all__ = ["WebsocketsTransport"]


class WebsocketsTransport:
    """:class:`Transport` over a ``websockets`` client connection."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        open_timeout: float | None,
        close_timeout: float,
        headers: Mapping[str, str] | None,
    ) -> WebsocketsTransport:
        """Open ``url`` without compression; raises ConnectError or ConnectTimeout."""
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
        return cls(ws)

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
