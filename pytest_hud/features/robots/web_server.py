"""The web console's server: ``websockets`` (already a dependency) answering plain HTTP for the
page and its two static files, and a WebSocket (``/ws``) that pushes the console's state and
camera frames to the page and takes the operator's answers. It runs its own event loop on a
daemon thread; the console (web.py) owns the state and says when it changed.

Bounds: every request, the WebSocket's included, needs the console's token in its url (403
and one line without it; no cookie carries it, so another local server the browser visits
never gets it). A connection whose request has not shown the token is kept
``OPEN_TIMEOUT`` seconds at most, and at most ``MAX_UNPROVEN`` of them: one more lets the
oldest go, so strangers' idle connections never keep the page out. At most
``MAX_CONNECTIONS`` pages are connected at once (503 past that), a message is at most
``MAX_BODY`` bytes (the connection is closed with 1009 past that), and an answer that is not
a JSON object (nested at most the JSON depth bound) gets one error line back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from http import HTTPStatus
from importlib import resources
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from pytest_hud.plumbing.auth import same
from pytest_hud.plumbing.jsonread import loads

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

__all__ = [
    "MAX_BODY",
    "MAX_CONNECTIONS",
    "MAX_UNPROVEN",
    "OPEN_TIMEOUT",
    "ConsoleServer",
]

#: The largest message or request admitted (an answer is a few hundred bytes).
MAX_BODY = 64 * 1024
#: Pages connected at once (a page holds one); more are refused with 503.
MAX_CONNECTIONS = 16
#: Connections kept before their request showed the token; one more lets the oldest go.
MAX_UNPROVEN = 32
#: Seconds a connection has to send its whole request (a stranger's idle one is let go).
OPEN_TIMEOUT = 10.0
#: Seconds between two camera frames pushed to a page (about five a second).
FRAME_INTERVAL = 0.2

#: The page's files: static, in the package (web_page/); the html names the others with the
#: token put in at serve time, since every request needs it
PAGE_FILES = {"/": "index.html", "/index.html": "index.html", "/console.js": "console.js",
              "/console.css": "console.css"}  # fmt: skip
KINDS = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8"}  # fmt: skip


class _Refused(Exception):
    """An answer the console does not take: its status and the line the page shows."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class Console(Protocol):
    """What the server asks of the console (web.py's WebOperator)."""

    token: str
    version: int  # grows with every change of the state the page shows

    def state(self) -> dict[str, object]: ...
    def take(self, body: Mapping[str, object]) -> str: ...
    def frames(self) -> tuple[int, dict[str, bytes]]: ...
    def reference_jpeg(self) -> bytes | None: ...


class _Connection(ServerConnection):
    """A connection as it is counted: unproven until its request shows the token."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        cast("ConsoleServer", self.console_server).arrived(self, transport)

    console_server: object = None


class ConsoleServer:
    """The console's HTTP and WebSocket server on ``host``:``port`` (0: any free one), on a
    loop of its own; ``port`` is the bound one once constructed."""

    def __init__(self, console: Console, host: str, port: int) -> None:
        self.console = console
        self.unproven: OrderedDict[_Connection, asyncio.BaseTransport] = OrderedDict()
        self.pages: set[ServerConnection] = set()
        self.changed: asyncio.Event | None = None
        self.loop: AbstractEventLoop = asyncio.new_event_loop()
        self._server: Server | None = None
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="pytest-hud-web-console", daemon=True
        )
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._start(host, port), self.loop)
        self.port: int = started.result(timeout=30)

    async def _start(self, host: str, port: int) -> int:
        self.changed = asyncio.Event()

        made = type("_Counted", (_Connection,), {"console_server": self})
        self._server = await serve(
            self._page,
            host,
            port,
            process_request=self._route,
            create_connection=made,
            open_timeout=OPEN_TIMEOUT,
            max_size=MAX_BODY,
            max_queue=4,
            server_header="pytest-hud-console",
            compression=None,
        )
        return int(next(iter(self._server.sockets)).getsockname()[1])

    # -- counting connections ------------------------------------------------------------
    def arrived(self, connection: _Connection, transport: asyncio.BaseTransport) -> None:
        while len(self.unproven) >= MAX_UNPROVEN:
            _, oldest = self.unproven.popitem(last=False)
            cast(asyncio.Transport, oldest).abort()  # an idle stranger: let go
        self.unproven[connection] = transport

    # -- plain HTTP ----------------------------------------------------------------------
    def _route(self, connection: ServerConnection, request: Request) -> Response | None:
        """Answer a request, or None to open the page's WebSocket."""
        self.unproven.pop(cast(_Connection, connection), None)
        forbidden = _text(403, "forbidden: open the url with its token, as pytest printed it")
        try:
            parts = urlsplit(request.path)
        except ValueError:  # a path urlsplit refuses ("//["): it shows no token (was a 500)
            return forbidden
        if not same(self.console.token, dict(parse_qsl(parts.query)).get("token")):
            return forbidden
        if parts.path == "/ws":
            if len(self.pages) >= MAX_CONNECTIONS:
                return _text(503, f"busy: {MAX_CONNECTIONS} pages at once; the page retries")
            return None
        if "Upgrade" in request.headers:  # a WebSocket anywhere else (get() raises on two)
            return _text(404, "not found")
        if parts.path in PAGE_FILES:
            return self._file(PAGE_FILES[parts.path])
        if parts.path == "/state":
            return _send(200, json.dumps(self.console.state()).encode(), "application/json")
        if parts.path == "/reference.jpg":
            jpeg = self.console.reference_jpeg()
            if jpeg is None:
                return _text(404, "this row has no reference image")
            return _send(200, jpeg, "image/jpeg")
        if parts.path.startswith("/frame/") and parts.path.endswith(".jpg"):
            _, frames = self.console.frames()
            found = frames.get(unquote(parts.path[len("/frame/") : -len(".jpg")]))
            if found is None:
                return _text(404, "no frame from that camera yet")
            return _send(200, found, "image/jpeg")
        return _text(404, "not found")

    def _file(self, name: str) -> Response:
        body = resources.files("pytest_hud.features.robots").joinpath("web_page", name).read_bytes()
        extra: dict[str, str] = {}
        if name.endswith(".html"):
            body = body.replace(b"__TOKEN__", self.console.token.encode())
            extra["Content-Security-Policy"] = CSP
        return _send(200, body, KINDS[name[name.rindex(".") :]], extra)

    # -- the page's WebSocket ------------------------------------------------------------
    async def _page(self, ws: ServerConnection) -> None:
        self.pages.add(ws)
        sender = asyncio.create_task(self._push(ws))
        try:
            async for message in ws:
                reply = self._answer(message)
                await ws.send(json.dumps({"reply": reply}))
        except ConnectionClosed:
            pass
        finally:
            self.pages.discard(ws)
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                await sender

    def _answer(self, message: str | bytes) -> dict[str, object]:
        try:
            body = loads(message)
        except (ValueError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict):
            return {"error": "an answer is a JSON object", "status": 400}
        try:
            return {"ok": True, "said": self.console.take(body), "seq": body.get("seq")}
        except _Refused as refused:
            return {"error": refused.message, "status": refused.status, "seq": body.get("seq")}

    async def _push(self, ws: ServerConnection) -> None:
        """The state whenever it changes, and each camera's newest frame at most every
        FRAME_INTERVAL, until the page goes."""
        assert self.changed is not None
        sent_state, sent_frames = -1, -1
        while True:
            number, frames = await asyncio.to_thread(self.console.frames)
            version = self.console.version
            if version != sent_state or number != sent_frames:  # a frame moves the timer too
                sent_state = version
                await ws.send(json.dumps({"state": self.console.state()}))
            if number != sent_frames and frames:
                for name, jpeg in sorted(frames.items()):
                    label = name.encode()
                    await ws.send(bytes([len(label)]) + label + jpeg)
            sent_frames = number
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FRAME_INTERVAL):
                    await self.changed.wait()
            self.changed.clear()

    def poke(self) -> None:
        """The state or the frames changed: wake every page's pusher (from any thread)."""
        with contextlib.suppress(RuntimeError):  # the loop already stopped
            self.loop.call_soon_threadsafe(self._set)

    def _set(self) -> None:
        if self.changed is not None:
            self.changed.set()

    def close(self) -> None:
        """Close every page's connection and stop the server and its loop."""

        async def stop() -> None:
            if self._server is not None:
                self._server.close(close_connections=True)
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(5):
                        await self._server.wait_closed()

        if self.loop.is_closed() or not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


def _send(status: int, body: bytes, kind: str, extra: Mapping[str, str] | None = None) -> Response:
    headers = Headers(
        [
            ("Content-Type", kind),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),  # the url carries the token
            ("Connection", "close"),
            *(extra or {}).items(),
        ]
    )
    return Response(status, HTTPStatus(status).phrase, headers, body)


def _text(status: int, line: str) -> Response:
    return _send(
        status, (line.splitlines() or [""])[0].encode() + b"\n", "text/plain; charset=utf-8"
    )


#: The page loads its own two files and nothing else; its WebSocket and images are the
#: console's own (blob: for the camera frames pushed over it).
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
    "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
