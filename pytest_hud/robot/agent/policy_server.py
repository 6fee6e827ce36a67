"""PolicyServer: serve any in-process Model on the openpi policy-server protocol, batched.

Wire-compatible with openpi's ``WebsocketPolicyServer``; each connection is one live
rollout of a :class:`~pytest_hud.robot.agent.batching.BatchedModel`, so requests from many
connections run as one forward (``python -m pytest_hud policy-server``)."""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlparse

import websockets
from websockets.asyncio.server import Request, Response, Server, ServerConnection, serve
from websockets.frames import CloseCode

from pytest_hud.plumbing.auth import same
from pytest_hud.plumbing.tracebacks import format_exc
from pytest_hud.robot.agent.batching import BatchedModel
from pytest_hud.robot.agent.model import Model
from pytest_hud.robot.contract import Contract
from pytest_hud.robot.wire.codec import frame_limit, pack, release_memory, unpack, ws_options

__all__ = ["ANNOUNCE", "TOKEN_ENV", "PolicyServer"]

#: Prefix of the line the CLI prints once it serves: ``PYTEST_HUD_POLICY_SERVER {"url": ...}``.
ANNOUNCE = "PYTEST_HUD_POLICY_SERVER"
#: The policy server's token, for its CLI (``--token``) and for ``--hud-agent=openpi:...``.
TOKEN_ENV = "PYTEST_HUD_POLICY_TOKEN"
INTERNAL_ERROR_REASON = "Internal server error. Traceback included in previous frame."

log = logging.getLogger(__name__)


class PolicyServer:
    """Serve ``model`` to openpi clients, batching requests across connections.

    ``model`` may already be a BatchedModel (then ``max_wait_s``/``batch_size`` are its
    own). ``metadata`` is the map sent on connect (default ``{}``, like openpi).
    ``contract`` (a Contract, its dict, or a contract.json path) binds the model to the
    env's spaces once, as an agent does per episode.
    ``batched.batches`` lists the width of every forward run so far.

    ``token``: admit only clients that send it (openpi-client's ``api_key``, an
    ``Authorization: Api-Key`` header, or ``?token=`` in the url); without one the server
    is openpi's (any client that can reach it), and its errors carry no traceback.
    ``max_connections`` / ``max_per_peer``: connections held at once, in all and per peer
    address. One more takes the place of the connection idle longest under the full cap,
    when one has sent nothing for ``idle_s`` seconds (no request running), else it is
    refused (503) before the WebSocket opens: idle connections (a stranger's 64 of them on
    loopback, where every client is the same peer) never lock out a client that works.
    """

    def __init__(
        self,
        model: Model,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_wait_s: float = 0.005,
        batch_size: int | None = None,
        metadata: dict[str, Any] | None = None,
        contract: Contract | dict[str, Any] | str | Path | None = None,
        max_frame_bytes: int | None = None,
        token: str | None = None,
        max_connections: int = 256,
        max_per_peer: int = 64,
        idle_s: float = 10.0,
    ) -> None:
        observation_bytes = None
        if contract is not None:
            if isinstance(contract, str | Path):
                contract = Contract.load(contract)
            contract = Contract.from_dict(contract)  # from_dict passes a Contract
            model.bind(contract.spaces())
            observation_bytes = contract.payload_bytes("observation")
            if observation_bytes is not None:  # a history policy gets n_obs_steps of them
                observation_bytes *= max(1, int(getattr(model, "n_obs_steps", 1) or 1))
        #: The largest request frame accepted: what the contract's observation needs
        #: (times 2, plus headers), else ``max_frame_bytes`` or ``$PYTEST_HUD_MAX_FRAME_BYTES``
        #: (64 MiB); a bigger one closes its connection with 1009.
        self.max_frame_bytes = frame_limit(observation_bytes, ceiling=max_frame_bytes)
        if not isinstance(model, BatchedModel):
            model = BatchedModel(model, max_wait_s=max_wait_s, batch_size=batch_size)
        self.batched: BatchedModel = model
        self.model = model.model
        self.host = host
        self.port = port
        self.metadata = dict(metadata or {})
        self._metadata_frame = pack(self.metadata)  # fails here, not at the first connect
        self._server: Server | None = None
        self._handlers: set[asyncio.Task[object]] = set()
        self.token = token
        self.max_connections = max_connections
        self.max_per_peer = max_per_peer
        self.idle_s = idle_s
        #: admitted connections: their peer address, and since when idle (None: running a
        #: request); one leaves when it closes, or when let go for a newcomer
        self._open: dict[ServerConnection, _Held] = {}

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "not serving"
        return f"<PolicyServer {type(self.model).__name__} {where}>"

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the policy server is not serving yet; await start() first")
        return f"ws://{self.host}:{self.port}"

    async def start(self) -> str:
        """Bind and serve; returns the ``ws://`` url (the bound port if ``port=0``)."""
        if self._server is not None:
            return self.url
        self._server = await serve(
            self._handler,
            self.host,
            self.port,
            process_request=self._admit,
            **ws_options(self.max_frame_bytes),
        )
        self.port = next(iter(self._server.sockets)).getsockname()[1]
        return self.url

    async def stop(self, timeout: float = 10.0) -> None:
        """Close every connection (1001 going away) and stop serving."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        try:
            async with asyncio.timeout(timeout):
                await server.wait_closed()
        except TimeoutError:  # a handler stuck behind a long forward
            for task in list(self._handlers):
                task.cancel()

    async def __aenter__(self) -> PolicyServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        """Serve until cancelled."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    # -- one connection ------------------------------------------------------------
    def held(self, peer: str | None = None) -> int:
        """Connections held now (from ``peer``, when given)."""
        return sum(1 for h in self._open.values() if peer is None or h.peer == peer)

    def _admit(self, connection: ServerConnection, request: Request) -> Response | None:
        """Before the WebSocket opens: ``GET /healthz`` answers 200 (like openpi's server);
        a client without the token, or past a connection cap with nobody idle to let go,
        gets one line and no socket."""
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        if self.token is not None:
            given = dict(parse_qsl(urlparse(request.path).query)).get("token")
            header = request.headers.get("Authorization", "")
            if header.startswith("Api-Key "):
                given = header[len("Api-Key ") :]
            if not same(self.token, given):
                return connection.respond(
                    http.HTTPStatus.FORBIDDEN,
                    "this policy server wants its token: openpi_client's "
                    "WebsocketClientPolicy(..., api_key=TOKEN), or $PYTEST_HUD_POLICY_TOKEN "
                    "for --hud-agent=openpi:HOST:PORT\n",
                )
        peer = _peer(connection)
        for full, among in (
            (self.held(peer) >= self.max_per_peer, peer),
            (self.held() >= self.max_connections, None),
        ):
            if full and not self._let_go_idlest(among):
                total, mine = self.held(), self.held(peer)
                return connection.respond(
                    http.HTTPStatus.SERVICE_UNAVAILABLE,
                    f"this policy server already holds {total} connections ({mine} from "
                    f"{peer}; limits {self.max_connections} and {self.max_per_peer} per peer), "
                    f"none idle {self.idle_s:g} s\n",
                )
        self._open[connection] = _Held(peer, time.monotonic())
        # held until it closes: after its handler, or a handshake that never completes
        task = asyncio.create_task(self._forget(connection))
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)
        return None

    def _let_go_idlest(self, peer: str | None) -> bool:
        """Close the connection (of ``peer``, if given) idle longest, if one has been idle
        ``idle_s``; whether one was."""
        now = time.monotonic()
        idle = [
            (h.since, c)
            for c, h in self._open.items()
            if h.since is not None and now - h.since >= self.idle_s and peer in (None, h.peer)
        ]
        if not idle:
            return False
        _, victim = min(idle, key=lambda pair: pair[0])
        del self._open[victim]  # no longer counted, whether or not its peer answers the close
        # closed behind: an idle stranger need not answer its close for the newcomer to start
        closing = asyncio.create_task(
            victim.close(CloseCode.TRY_AGAIN_LATER, "idle while the server is full")
        )
        self._handlers.add(closing)
        closing.add_done_callback(self._handlers.discard)
        return True

    async def _forget(self, connection: ServerConnection) -> None:
        await connection.wait_closed()
        self._open.pop(connection, None)

    async def _handler(self, ws: ServerConnection) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            with self.batched.session():
                await self._serve(ws)
        except websockets.ConnectionClosed:
            pass
        finally:
            self._handlers.discard(task)
            self._open.pop(ws, None)
            release_memory()  # a big request's buffers go back to the kernel, not the heap

    def _busy(self, ws: ServerConnection, busy: bool) -> None:
        held = self._open.get(ws)
        if held is not None:
            held.since = None if busy else time.monotonic()

    async def _serve(self, ws: ServerConnection) -> None:
        await ws.send(self._metadata_frame)
        prev_total: float | None = None
        while True:
            frame = await ws.recv()  # ConnectionClosed ends the connection quietly
            self._busy(ws, True)
            start = time.monotonic()
            try:
                if isinstance(frame, str):
                    raise ValueError(
                        f"got a text frame ({frame[:80]!r}); send the observation as a "
                        "msgpack-numpy binary frame"
                    )
                obs = unpack(frame)
                if not isinstance(obs, dict):
                    raise ValueError(f"the observation must be a map, got {type(obs).__name__}")
                t0 = time.monotonic()
                chunk = await self.batched.ainfer(obs)
                timing = {"infer_ms": (time.monotonic() - t0) * 1000}
                if prev_total is not None:
                    timing["prev_total_ms"] = prev_total * 1000
                reply = pack({"actions": chunk, "server_timing": timing})
            except Exception as exc:
                log.exception("policy server: request from %s failed", ws.remote_address)
                # the traceback to a client that proved the token; a stranger gets one line
                text = format_exc() if self.token is not None else _one_line(exc)
                with contextlib.suppress(websockets.ConnectionClosed):
                    await ws.send(text)
                    await ws.close(CloseCode.INTERNAL_ERROR, INTERNAL_ERROR_REASON)
                return
            await ws.send(reply)
            self._busy(ws, False)
            prev_total = time.monotonic() - start


@dataclass
class _Held:
    """An admitted connection: its peer address, and since when it has been idle (None
    while a request runs)."""

    peer: str
    since: float | None


def _peer(connection: ServerConnection) -> str:
    address = connection.remote_address
    return str(address[0]) if isinstance(address, tuple) and address else str(address)


def _one_line(exc: BaseException) -> str:
    """An error as a client without the token sees it: what failed, not where (the
    server's log has the traceback)."""
    message = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"policy server error: {type(exc).__name__}: {message} (traceback in its log)"
