"""One connection to a vla-eval model server per rollout; a dropped one is redialled with bounded
backoff and the episode restarted on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, TypedDict, Unpack

from pytest_hud.errors import ConnectError, ConnectTimeout, RemoteModelError, TransportClosed
from pytest_hud.interop.vla_eval.codec import (
    Message,
    VlaEvalWireError,
    hello_payload,
    pack_message,
    unpack_message,
)
from pytest_hud.robot.wire.deadline import Watchdog
from pytest_hud.robot.wire.transport import Transport, connect, received

__all__ = ["SessionOptions", "VlaEvalError", "VlaEvalSession", "normalize_url"]

log = logging.getLogger("pytest_hud.vla_eval")


class VlaEvalError(RemoteModelError):
    """The vla-eval model server refused, failed, went silent or went away (names it)."""


def normalize_url(spec: str) -> str:
    """``ws://host:port``, ``host:port`` -> ``ws://host:port``; anything else raises."""
    url = spec.strip()
    if not url.startswith(("ws://", "wss://")):
        url = f"ws://{url}"
    rest = url.split("://", 1)[1]
    host, _, port = rest.partition("/")[0].rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected ws://HOST:PORT or HOST:PORT, got {spec!r}")
    return url


class SessionOptions(TypedDict, total=False):
    """A connection's bounds: ``timeout`` for each reply (60 s), ``connect_timeout`` (10 s),
    ``retries`` of a dropped connection (3) with ``backoff`` doubling from 0.5 s."""

    timeout: float
    connect_timeout: float
    retries: int
    backoff: float


class VlaEvalSession:
    """Speak vla-eval protocol 1 to the server at ``url`` on one connection."""

    def __init__(self, url: str, **options: Unpack[SessionOptions]) -> None:
        self.url = url
        self.timeout = options.get("timeout", 60.0)
        self.connect_timeout = options.get("connect_timeout", 10.0)
        self.retries = options.get("retries", 3)
        self.backoff = options.get("backoff", 0.5)
        self.server_info: dict[str, Any] = {}
        self.reconnects = 0
        self._ws: Transport | None = None
        self._watchdog = Watchdog()  # one timer per connection, not one per reply
        self._seq = 0
        self._episode: dict[str, object] | None = None
        self._pending = False  # an observation sent, its reply not read (a cancelled act)

    # -- connection --------------------------------------------------------------
    async def open(self) -> dict[str, Any]:
        """Connect and exchange HELLO; returns the server's HELLO payload."""
        try:
            ws = await connect(self.url, open_timeout=self.connect_timeout)
        except (ConnectError, ConnectTimeout) as exc:
            raise VlaEvalError(
                f"cannot reach the vla-eval model server at {self.url}: {exc}; is it serving "
                "(vla_eval.model_servers.serve.serve(server, host='127.0.0.1', port=...))?"
            ) from None
        self._ws = ws
        try:
            reply = await self._request("hello", hello_payload())
        except BaseException:
            self._drop()
            raise
        if reply.type != "hello":
            self._drop()
            raise VlaEvalError(
                f"{self.url} answered HELLO with {reply.type!r}: not a vla-eval server"
            )
        version = reply.payload.get("protocol_version")
        if version != 1:
            self._drop()
            raise VlaEvalError(
                f"the vla-eval server at {self.url} speaks protocol {version!r}; pytest-hud "
                "speaks protocol 1 (vla-eval 0.8): use a matching vla-eval version"
            )
        self.server_info = dict(reply.payload)
        return self.server_info

    @property
    def reusable(self) -> bool:
        """Whether the next episode may run on this connection: open, its episode ended,
        no reply outstanding."""
        return self._ws is not None and self._episode is None and not self._pending

    async def _reopen(self, why: str, *, at_once: bool = False) -> None:
        """Redial with backoff (``at_once``: the first attempt without); restart the current
        episode on the new connection."""
        self._drop()
        for attempt in range(1, self.retries + 1):
            wait = 0.0 if at_once and attempt == 1 else self.backoff * 2 ** (attempt - 1)
            log.warning(
                "vla-eval server %s: %s; reconnect %d/%d in %.1f s",
                self.url,
                why,
                attempt,
                self.retries,
                wait,
            )
            await asyncio.sleep(wait)
            try:
                await self.open()
            except VlaEvalError as exc:
                why = str(exc).split(";")[0]
                continue
            self.reconnects += 1
            if self._episode is not None:
                await self._send("episode_start", self._episode)
            return
        raise VlaEvalError(
            f"the vla-eval model server at {self.url} went away mid-episode and did not come "
            f"back after {self.retries} reconnect attempts ({why})"
        )

    def _drop(self) -> None:
        self._watchdog.close()
        ws, self._ws = self._ws, None
        if ws is not None:
            ws.abort()

    async def close(self) -> None:
        self._watchdog.close()
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                await ws.close()

    # -- messages ----------------------------------------------------------------
    async def _send(self, kind: str, payload: dict[str, Any]) -> int:
        if self._ws is None:
            raise TransportClosed(None, "not connected")
        self._seq += 1
        await self._ws.send(pack_message(kind, payload, self._seq))
        return self._seq

    async def _recv(self) -> Message:
        assert self._ws is not None
        return await received(
            self._watchdog.wait(self._ws.recv(), self.timeout),
            unpack_message,
            VlaEvalWireError,
            self._failed,
            silent=f"sent nothing within {self.timeout} s",
            text=lambda frame: f"sent text: {frame[:200]}",
        )

    def _failed(self, what: str) -> VlaEvalError:
        """The server's failure to answer; the connection, out of step now, is dropped."""
        self._drop()
        return VlaEvalError(f"the vla-eval model server at {self.url} {what}")

    async def _request(self, kind: str, payload: dict[str, Any]) -> Message:
        await self._send(kind, payload)
        return await self._recv()

    async def start_episode(self, task: dict[str, Any]) -> None:
        """Begin an episode; a kept connection the server closed since the last episode is
        replaced at once (nothing of an episode was lost with it)."""
        self._episode = {"task": task}
        self.reconnects = 0
        try:
            await self._send("episode_start", self._episode)
        except TransportClosed as exc:
            await self._reopen(f"connection lost ({exc})", at_once=True)

    async def act(self, observation: dict[str, Any]) -> Any:
        """Send one observation; the server's ``actions`` (one action or a chunk)."""
        frame_payload = observation
        while True:
            self._pending = True
            try:
                reply = await self._request("observation", frame_payload)
                break
            except TransportClosed as exc:
                await self._reopen(f"connection lost ({exc})")
        self._pending = False
        if reply.type == "error":
            raise VlaEvalError(f"the vla-eval server at {self.url} failed: {reply.payload}")
        if reply.type != "action" or "actions" not in reply.payload:
            raise VlaEvalError(
                f"the vla-eval server at {self.url} answered an observation with "
                f"{reply.type!r} {sorted(reply.payload)}; expected an action {{'actions': ...}}"
            )
        return reply.payload["actions"]

    async def end_episode(self, result: dict[str, Any]) -> None:
        self._episode = None
        try:
            await self._send("episode_end", result)
        except TransportClosed:
            self._drop()  # nothing to keep for the next episode
