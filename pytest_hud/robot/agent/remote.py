"""RemoteModel: a Model that is a client of an openpi policy server.

The protocol has no request ids, so each rollout (asyncio task) gets its own connection,
as openpi's client does; a batching server then sees concurrent rollouts as one batch. A
lost connection errors its rollout; later rollouts reconnect with bounded backoff, and
follow the server to a new address when ``resolve`` says where it serves now."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

import numpy as np

from pytest_hud.errors import (
    ConnectError,
    ConnectTimeout,
    RemoteModelError,
    TransportClosed,
    WireError,
)
from pytest_hud.robot.agent.model import Batch, Model, Row, check_chunk, episode_task
from pytest_hud.robot.wire.codec import pack, unpack
from pytest_hud.robot.wire.transport import Transport, connect, received

__all__ = ["RemoteModel", "RemoteModelError"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class RemoteModel(Model):
    """Infer through an openpi policy server at ``url`` (``ws://host:port``).

    ``connect_timeout`` bounds the handshake plus the metadata frame; ``reply_timeout``
    bounds each wait for an action chunk (a connection that timed out is dropped, so a
    late reply can never be taken for the next request's). ``api_key`` is sent as
    ``Authorization: Api-Key <key>``, like openpi-client. ``reconnect`` bounds how long
    a refused connect to a server that answered before is retried (0: never).
    ``resolve``: where the server serves now (an awaitable url, None while unknown),
    asked on every refused connect, so a server that moves is followed.
    """

    #: One request per connection: openpi has no batched request, so BatchedAgent
    #: cannot wrap it (run one agent per rollout, batching happens server-side).
    batchable = False

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 30.0,
        reply_timeout: float = 120.0,
        api_key: str | None = None,
        reconnect: float = 30.0,
        resolve: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        if not url.startswith(("ws://", "wss://")):
            url = f"ws://{url}"
        self.url = url
        self.connect_timeout = connect_timeout
        self.reply_timeout = reply_timeout
        self.api_key = api_key
        self.reconnect = reconnect
        self.resolve = resolve
        self._reached = False  # a connection succeeded once: refusals are an outage
        self._outage_since: float | None = None
        self._metadata: dict[str, object] | None = None
        self._conns: weakref.WeakKeyDictionary[asyncio.Task[object], Transport] = (
            weakref.WeakKeyDictionary()
        )
        self._closing: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"<RemoteModel {self.url}>"

    @property
    def metadata(self) -> dict[str, object] | None:
        """The server's metadata frame (from the latest connection); None before any."""
        return self._metadata

    # -- connections -------------------------------------------------------------
    async def connect(self) -> dict[str, object]:
        """Open the calling task's connection now (normally lazy); returns the metadata."""
        await self._connection()
        assert self._metadata is not None
        return self._metadata

    async def _connection(self) -> Transport:
        task = episode_task()
        if task is None:
            raise RemoteModelError("RemoteModel.ainfer must be called from an asyncio task")
        ws = self._conns.get(task)
        if ws is not None:
            return ws
        ws = await self._open()
        try:
            meta = await self._recv(ws, self.connect_timeout, "metadata frame")
            if not isinstance(meta, dict):
                raise RemoteModelError(
                    f"the policy server at {self.url} sent a {type(meta).__name__} as its "
                    "metadata frame; an openpi server sends a map first"
                )
        except BaseException:
            await _close(ws)
            raise
        self._metadata = meta
        self._reached, self._outage_since = True, None
        self._conns[task] = ws
        task.add_done_callback(self._task_done)
        return ws

    async def _open(self) -> Transport:
        """Connect, retrying refusals (with backoff, logged) during an outage's window."""
        headers = {"Authorization": f"Api-Key {self.api_key}"} if self.api_key else None
        attempt = 0
        while True:
            try:
                return await connect(self.url, open_timeout=self.connect_timeout, headers=headers)
            except ConnectTimeout:
                raise RemoteModelError(
                    f"timed out after {self.connect_timeout} s connecting to the policy server "
                    f"at {self.url} (connect_timeout)"
                ) from None
            except ConnectError as exc:
                if await self._moved():
                    attempt = 0
                    continue
                delay = self._retry_delay(attempt)
                if delay is None:
                    raise RemoteModelError(self._refused(exc)) from None
                log.warning(
                    "policy server %s refused a connection (%s); reconnecting in %.2f s "
                    "(attempt %d, gives up %.0f s into the outage)",
                    self.url,
                    exc,
                    delay,
                    attempt + 1,
                    self.reconnect,
                )
                await asyncio.sleep(delay)
                attempt += 1

    async def _moved(self) -> bool:
        """Whether ``resolve`` names another address than the refused one (then taken).
        Bounded by the reconnect window: past it, the refusal stands."""
        if self.resolve is None or self.reconnect <= 0:
            return False
        if self._outage_since is None:  # the window counts from the first refusal
            self._outage_since = time.monotonic()
        if self._window_closed():
            return False
        try:
            async with asyncio.timeout(max(self.connect_timeout, 1.0)):
                url = await self.resolve()
        except Exception as exc:  # the replica is restarting: not known yet
            log.info("policy server %s: where it serves now is not known yet (%s)", self.url, exc)
            return False
        if not url or url == self.url:
            return False
        log.warning("policy server moved: %s -> %s; reconnecting there", self.url, url)
        self.url = url
        return True

    def _window_closed(self) -> bool:
        if self._outage_since is None:
            return False
        return time.monotonic() - self._outage_since >= self.reconnect

    def _retry_delay(self, attempt: int) -> float | None:
        """The wait before the next connect attempt, or None to give up now."""
        if not (self._reached or self.resolve is not None) or self.reconnect <= 0:
            return None
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
        left = self.reconnect - (now - self._outage_since)
        return None if left <= 0 else min(0.05 * 2**attempt, 2.0, left)

    def _refused(self, exc: Exception) -> str:
        if self._reached and self.reconnect > 0:
            return (
                f"the policy server at {self.url} went away and did not come back within "
                f"reconnect={self.reconnect} s ({exc}); restart it, or raise reconnect"
            )
        return (
            f"cannot connect to the policy server at {self.url}: {exc}; is it running "
            "(python -m pytest_hud policy-server, or openpi's serve_policy.py)?"
        )

    def _task_done(self, task: asyncio.Task[object]) -> None:
        ws = self._conns.pop(task, None)
        if ws is not None:
            self._spawn_close(ws)

    def _spawn_close(self, ws: Transport) -> None:
        try:
            closer = asyncio.get_running_loop().create_task(_close(ws))
        except RuntimeError:  # no running loop: drop the socket
            ws.abort()
            return
        self._closing.add(closer)
        closer.add_done_callback(self._closing.discard)

    def _drop(self, ws: Transport) -> None:
        """Forget a connection that is broken or out of step, and close it."""
        for task, conn in list(self._conns.items()):
            if conn is ws:
                self._conns.pop(task, None)
                task.remove_done_callback(self._task_done)
        self._spawn_close(ws)

    async def aclose(self) -> None:
        """Close every connection this model holds (they also close as their tasks end)."""
        conns = list(self._conns.items())
        self._conns.clear()
        for task, _ in conns:
            task.remove_done_callback(self._task_done)
        await asyncio.gather(*(_close(ws) for _, ws in conns), *list(self._closing))

    async def __aenter__(self) -> RemoteModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- inference -----------------------------------------------------------------
    def infer(self, batch: Batch) -> np.ndarray:
        raise NotImplementedError(
            "RemoteModel is per-row: the openpi protocol has no batched request, so it "
            "cannot back a BatchedModel/BatchedAgent. Use RemoteModel in a plain RobotAgent; "
            "to batch concurrent rollouts, batch on the server (PolicyServer coalesces "
            "requests from all its connections into one forward)"
        )

    async def ainfer(self, row: Row) -> np.ndarray:
        """Send one observation row, return the server's ``[T, A]`` action chunk."""
        frame = pack(row)  # a bad row fails here, before the connection is touched
        ws = await self._connection()
        try:
            await ws.send(frame)
        except TransportClosed as exc:
            self._drop(ws)
            raise RemoteModelError(
                f"the policy server connection was lost ({self.url}, {_closed(exc)}) before "
                "the observation could be sent; the server stopped or crashed"
            ) from None
        try:
            reply = await self._recv(ws, self.reply_timeout, "action chunk")
        except BaseException:  # an error, a timeout or a cancel: the connection is out of step
            self._drop(ws)
            raise
        if not isinstance(reply, dict) or "actions" not in reply:
            got = f"keys {sorted(map(str, reply))}" if isinstance(reply, dict) else type(reply)
            self._drop(ws)
            raise RemoteModelError(
                f"the policy server at {self.url} replied without 'actions' ({got}); an "
                'openpi server answers {"actions": [T, A], ...}'
            )
        actions = np.array(reply["actions"], dtype=np.float32)  # a writable copy
        return check_chunk(actions, 1, None, "RemoteModel")[0]

    async def _recv(self, ws: Transport, timeout: float | None, what: str) -> object:
        option = "connect_timeout" if what == "metadata frame" else "reply_timeout"
        try:
            return await received(
                _within(ws.recv(), timeout),
                unpack,
                WireError,
                lambda failure: RemoteModelError(f"the policy server at {self.url} {failure}"),
                silent=f"sent no {what} within {timeout} s ({option})",
                text=lambda frame: f"failed:\n{frame}",  # an openpi server's traceback
            )
        except TransportClosed as exc:
            raise RemoteModelError(
                f"the policy server connection was lost ({self.url}, {_closed(exc)}) while "
                f"waiting for {what}; the server stopped or crashed"
            ) from None


async def _within(waiting: Awaitable[T], timeout: float | None) -> T:
    async with asyncio.timeout(timeout):
        return await waiting


def _closed(exc: TransportClosed) -> str:
    return f"close {exc.describe()}"


async def _close(ws: Transport) -> None:
    with contextlib.suppress(Exception):
        await ws.close()
