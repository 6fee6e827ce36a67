"""An in-process connection: two queues in place of a socket, for an agent that dials a bridge
served on its own event loop (an inline sim). Frames pass as over a WebSocket, without the
syscalls, the framing and the second process's wake-up on every step; a message sent with
``send_message`` passes as the decoded value itself (:func:`~.codec.carry`), without the codec,
and to a handler the receiving side registered (``direct``) it is handed in the sender's task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.exceptions import ConnectionClosedOK

from pytest_hud.errors import TransportClosed
from pytest_hud.robot.wire.codec import carry
from pytest_hud.robot.wire.mailbox import Mailbox

__all__ = ["InprocServerEnd", "InprocTransport", "dial", "register", "unregister"]

Handler = Callable[["InprocServerEnd"], Awaitable[None]]

#: url -> (the loop that serves it, its connection handler, its connections' tasks)
_served: dict[str, tuple[asyncio.AbstractEventLoop, Handler, set[asyncio.Task[None]]]] = {}

_CLOSED = object()  # queued by close(): the peer's recv() ends


class _End:
    """One side: it receives from ``inbox`` and sends into the peer's."""

    def __init__(self) -> None:
        self.inbox: Mailbox[Any] = Mailbox()
        self.peer: _End | None = None
        self.closed = False
        #: Set by the peer's handler: a message sent here is handled by that call in the
        #: sender's task instead of queued for the handler's own (one loop turn less).
        self.direct: Callable[[object], Awaitable[None]] | None = None

    def _gone(self) -> Exception:
        """What this end raises once the connection is closed (as its real counterpart does)."""
        raise NotImplementedError

    def _post(self, frame: object) -> None:
        peer = self.peer
        if peer is not None and not peer.closed:
            peer.inbox.put(frame)

    def _shut(self) -> None:
        if not self.closed:
            self.closed = True
            self._post(_CLOSED)
            self.inbox.put(_CLOSED)

    async def send(self, data: bytes | str) -> None:
        if self.closed:
            raise self._gone()
        self._post(data)

    async def send_message(self, message: dict[str, object]) -> None:
        """Pass ``message`` as the peer would decode it from ``pack(message)``: to the
        peer's ``direct`` handler if it set one, else into its inbox."""
        peer = self.peer
        if not self.closed and peer is not None and peer.direct is not None and not peer.closed:
            await peer.direct(carry(message))
        else:
            self.post_message(message)

    def post_message(self, message: dict[str, object]) -> None:
        """Queue ``message`` (carried) for the peer's next receive, without a coroutine and
        past any ``direct`` handler (which is only a shortcut for the same message)."""
        if self.closed:
            raise self._gone()
        self._post(carry(message))

    def take(self) -> object:
        """The next queued frame or message without waiting; None when nothing is queued
        or the connection is closing (then :meth:`recv` says so)."""
        items = self.inbox.items
        if not items or items[0] is _CLOSED:  # the close marker stays for recv() to raise
            return None
        return items.popleft()

    async def recv(self) -> Any:  # Any, so this end also fits the Transport protocol
        """The next frame (bytes or str) or message (the dict a peer passed with
        ``send_message``); raises once either side closed (the close marker stays queued,
        so later calls raise at once too)."""
        inbox = self.inbox
        while not inbox.items:
            await inbox.wait()
        if inbox.items[0] is _CLOSED:  # left queued: every later call raises at once too
            self.closed = True
            raise self._gone()
        return inbox.items.popleft()


class InprocTransport(_End):
    """The agent's end, a :class:`~pytest_hud.robot.wire.transport.Transport`."""

    def _gone(self) -> Exception:
        return TransportClosed(1000, "in-process connection closed")

    async def close(self) -> None:
        self._shut()

    def abort(self) -> None:
        self._shut()


class InprocServerEnd(_End):
    """The bridge's end: what its handler reads as a websockets ``ServerConnection``."""

    def _gone(self) -> Exception:
        return ConnectionClosedOK(None, None)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self._shut()


def register(url: str, handler: Handler) -> None:
    """Serve ``url`` in this process too: :func:`dial` on this loop reaches ``handler``."""
    _served[url] = (asyncio.get_running_loop(), handler, set())


async def unregister(url: str) -> None:
    """Stop serving ``url`` in-process: open connections are closed, their handlers awaited."""
    entry = _served.pop(url, None)
    if entry is None:
        return
    tasks = entry[2]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=10)


def dial(url: str) -> InprocTransport | None:
    """An in-process connection to ``url`` if it is served on the running loop, else None."""
    entry = _served.get(url)
    if entry is None or entry[0] is not asyncio.get_running_loop():
        return None
    loop, handler, tasks = entry
    client, server = InprocTransport(), InprocServerEnd()
    client.peer, server.peer = server, client
    task = loop.create_task(_serve(handler, server), name=f"pytest-hud inproc {url}")
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return client


async def _serve(handler: Handler, end: InprocServerEnd) -> None:
    try:
        await handler(end)
    finally:
        end._shut()
