"""A tiny JSON-lines RPC used by every control channel. Requests run concurrently; a connection
cancels its tasks when it closes, and every client wait is bounded.

A server with a secret greets each connection with a nonce, and serves nothing until the
peer proves it holds the secret (:mod:`.auth`): until then a peer may send one short
line within a few seconds, a bounded number of such peers are held (the oldest is let go
for a new one), and a wrong proof is one line without a traceback, then the hang-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import urlparse

from pytest_hud.errors import HudError
from pytest_hud.plumbing.auth import prove, verify
from pytest_hud.plumbing.tracebacks import format_exc

__all__ = [
    "AuthError",
    "Connection",
    "Limits",
    "RemoteError",
    "RpcClient",
    "RpcClosed",
    "serve_rpc",
]

#: The greeting's protocol name; a client that reads anything else is not talking to us.
GREETING = "pytest-hud/1"

_LIMIT = 64 * 1024 * 1024  # the client's line limit: it trusts the server it dialled
_CHUNK = 64 * 1024  # the server's socket reads; its StreamReader holds at most twice this


@dataclass(frozen=True)
class Limits:
    """What one control server lets its peers make it hold.

    Without them, connections sending endless lines without a newline grow an env
    server's memory without bound, and connections that never send a byte hold their
    fds for as long as the peer likes. Each limit reads ``$PYTEST_HUD_RPC_<NAME>``.
    """

    #: Bytes in one request line; a longer line is answered with a ProtocolError and closed.
    max_line: int = 1 << 20
    #: Bytes of unfinished lines held across all connections (beyond: that peer is closed).
    max_buffered: int = 32 << 20
    #: Open connections; one more lets go of the connection idle longest, if one holds
    #: nothing and has been idle ``idle_s``, else it is answered with a ProtocolError.
    max_connections: int = 256
    #: Requests running at once on one connection; past it the server stops reading it.
    max_pending: int = 64
    #: Seconds a connection may stay open before its first valid request; and, once the
    #: server is full, how long one that holds nothing may idle before a newcomer takes
    #: its place (under ``--no-auth`` strangers' one-request peers filled it for good).
    idle_s: float = 60.0
    #: With a secret: peers connected but not yet proven; one more lets the oldest go.
    max_unproven: int = 64
    #: With a secret: seconds a peer has to prove it holds the secret.
    prove_s: float = 10.0
    #: With a secret: bytes of the one line a peer may send before it is proven.
    max_unproven_line: int = 4096

    @classmethod
    def from_env(cls) -> Limits:
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = os.environ.get(f"PYTEST_HUD_RPC_{f.name.upper()}")
            if raw:
                values[f.name] = float(raw) if f.name.endswith("_s") else int(raw)
        return cls(**values)


class _Refused(Exception):
    """A peer broke a :class:`Limits` bound; the message is its ProtocolError."""


class _LineReader:
    """Request lines from one peer, under the line cap and the server-wide byte budget."""

    def __init__(self, reader: asyncio.StreamReader, limits: Limits, held: list[int]) -> None:
        self._reader = reader
        self._limits = limits
        self._held = held  # one-element list shared by every connection of a server
        self._buf = bytearray()
        self._scanned = 0
        #: the longest line taken now (an unproven peer's is short)
        self.max_line = limits.max_line

    async def readline(self) -> bytes:
        """The next line with its newline; b"" at end of stream (a partial line is dropped)."""
        while True:
            nl = self._buf.find(b"\n", self._scanned)
            if nl >= 0:
                line = bytes(self._buf[: nl + 1])
                del self._buf[: nl + 1]
                self._scanned = 0
                self._held[0] -= nl + 1
                return line
            self._scanned = len(self._buf)
            if len(self._buf) > self.max_line:
                raise _Refused(
                    f"request line longer than {self.max_line} bytes without a "
                    "newline; send one JSON request per line"
                )
            chunk = await self._reader.read(_CHUNK)
            if not chunk:
                return b""
            if self._held[0] + len(chunk) > self._limits.max_buffered:
                raise _Refused(
                    f"the server already holds {self._held[0]} bytes of unfinished requests "
                    f"(limit {self._limits.max_buffered}); finish a line, then send more"
                )
            self._buf += chunk
            self._held[0] += len(chunk)

    def release(self) -> None:
        self._held[0] -= len(self._buf)
        self._buf = bytearray()


def tcp_address(url: str, schemes: tuple[str, ...] = ("tcp",)) -> tuple[str, int] | None:
    """``(host, port)`` of a ``tcp://HOST:PORT`` url (or another of ``schemes``); None when
    the url is not one, so each caller raises its own error naming the expected form."""
    parsed = urlparse(url)
    if parsed.scheme not in schemes or not parsed.hostname or not parsed.port:
        return None
    return parsed.hostname, parsed.port


class RemoteError(HudError, RuntimeError):
    """The remote handler raised; carries its exception type name and traceback."""

    def __init__(self, type_name: str, message: str, remote_traceback: str = "") -> None:
        super().__init__(message)
        self.type_name = type_name
        self.remote_traceback = remote_traceback


class RpcClosed(HudError, ConnectionError):
    """The control connection closed before the reply came back."""


class AuthError(HudError, PermissionError):
    """The server wants the session's secret and this client has none, or the wrong one."""


class Connection:
    """Server-side view of one client connection; handlers may keep per-connection state."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.state: dict[str, Any] = {}
        self._writer = writer
        self._lock = asyncio.Lock()

    @property
    def peer(self) -> object:
        return self._writer.get_extra_info("peername")

    async def send(self, obj: dict[str, object]) -> None:
        data = json.dumps(obj, default=_json_default).encode() + b"\n"
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()


def _json_default(obj: object) -> object:
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


Handler = Callable[[Connection, str, dict[str, object]], Awaitable[Any]]


def _parse_request(line: bytes) -> dict[str, object]:
    """One request line as a JSON object; anything else is a ValueError to answer.

    A line nested deeper than the interpreter's recursion limit (``[[[[...`` by
    the hundred thousand) makes ``json.loads`` raise RecursionError, not
    ValueError: uncaught, it ended the connection and its pending requests.
    """
    try:
        msg = json.loads(line)
    except RecursionError:
        raise ValueError(
            "request is nested too deeply to parse; send a flat JSON object "
            '{"id", "method", "params"}'
        ) from None
    if not isinstance(msg, dict):
        raise ValueError("request is not a JSON object")
    return msg


async def serve_rpc(
    handler: Handler,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    on_close: Callable[[Connection], Awaitable[None]] | None = None,
    limits: Limits | None = None,
    secret: str | None = None,
) -> asyncio.Server:
    """Serve ``handler(conn, method, params)``; ``on_close(conn)`` runs when a client leaves.

    ``limits`` (default :meth:`Limits.from_env`) bound what peers can make it hold;
    ``secret``: serve only peers that prove they hold it (None: anyone, ``--no-auth``).
    """
    limits = limits or Limits.from_env()
    held = [0]  # bytes of unfinished lines, all connections
    live: dict[asyncio.StreamWriter, _Live] = {}
    unproven: OrderedDict[asyncio.StreamWriter, None] = OrderedDict()  # oldest first

    async def make_room() -> bool:
        """Whether there is room for one more connection: under the cap, or once the one
        idle longest (no request running, nothing held in its state, idle ``idle_s``) is
        let go."""
        if len(live) < limits.max_connections:
            return True
        now = asyncio.get_running_loop().time()
        idle = [(peer.since, w) for w, peer in live.items() if peer.idle(now, limits.idle_s)]
        if not idle:
            return False
        _, writer = min(idle, key=lambda pair: pair[0])
        live.pop(writer, None)
        await _refuse(
            writer,
            f"idle for {limits.idle_s:g} s or more while the server is full "
            f"({limits.max_connections} connections): let go for a new peer; reconnect",
        )
        return True

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if secret is not None:
            while len(unproven) >= limits.max_unproven:  # a stranger's flood: drop its oldest
                oldest, _ = unproven.popitem(last=False)
                oldest.close()
            unproven[writer] = None
            try:
                proven = await _admit(reader, writer, secret, limits)
            finally:
                unproven.pop(writer, None)
            if not proven:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
                return
        else:  # --no-auth: the greeting says no proof is wanted
            writer.write(json.dumps({"hello": GREETING, "nonce": None}).encode() + b"\n")
        if not await make_room():
            await _refuse(
                writer,
                f"this server already has {len(live)} connections (limit "
                f"{limits.max_connections}), none idle {limits.idle_s:g} s; close idle ones "
                "or raise $PYTEST_HUD_RPC_MAX_CONNECTIONS",
            )
            return
        peer = live[writer] = _Live(Connection(writer), asyncio.get_running_loop().time())
        try:
            await serve_connection(reader, writer, peer)
        finally:
            live.pop(writer, None)

    async def serve_connection(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: _Live
    ) -> None:
        conn = peer.conn
        tasks = peer.tasks
        lines = _LineReader(reader, limits, held)
        # a connection that never sends a valid request is closed (a proven one has)
        greeted = secret is not None

        async def run(msg: dict[str, object]) -> None:
            rid = msg.get("id")
            try:
                params = msg.get("params") or {}
                if not isinstance(params, dict):
                    raise TypeError("params must be a JSON object")
                result = await handler(conn, str(msg.get("method")), params)
                reply: dict[str, object] = {"id": rid, "result": result}
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                reply = {
                    "id": rid,
                    "error": {
                        "type": type(exc).__name__,
                        "message": str(exc),
                        "traceback": format_exc(),
                    },
                }
            with contextlib.suppress(ConnectionError, RuntimeError):
                await conn.send(reply)
            peer.since = asyncio.get_running_loop().time()

        try:
            while True:
                if len(tasks) >= limits.max_pending:  # a peer that pipelines without reading
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    async with asyncio.timeout(None if greeted else limits.idle_s):
                        line = await lines.readline()
                except (ConnectionError, ValueError):
                    break
                except TimeoutError:
                    await _refuse(writer, f"no request within {limits.idle_s} s of connecting")
                    break
                except _Refused as exc:
                    await _refuse(writer, str(exc))
                    break
                if not line:
                    break
                try:
                    msg = _parse_request(line)
                except ValueError as exc:
                    with contextlib.suppress(ConnectionError):
                        await conn.send(
                            {"id": None, "error": {"type": "ProtocolError", "message": str(exc)}}
                        )
                    continue
                greeted = True
                peer.since = asyncio.get_running_loop().time()
                task = asyncio.create_task(run(msg))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            lines.release()
            for task in list(tasks):
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            if on_close is not None:
                with contextlib.suppress(Exception):
                    await on_close(conn)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    return await asyncio.start_server(handle, host, port, limit=_CHUNK)


@dataclass
class _Live:
    """A connection being served: its requests running, and since when it has been idle
    (its last request or reply)."""

    conn: Connection
    since: float
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def idle(self, now: float, idle_s: float) -> bool:
        """Whether it may give way to a newcomer: nothing running, nothing held in its
        state (an env server's sessions), and idle ``idle_s``."""
        held = any(self.conn.state.values())
        return not self.tasks and not held and now - self.since >= idle_s


_UNPROVEN = (
    "authentication required: this server serves only peers that prove they hold its "
    "session's secret, in one short line within seconds of connecting"
)


async def _admit(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, secret: str, limits: Limits
) -> bool:
    """Greet with a nonce; whether the peer's first line proves it holds ``secret``, in
    time and short. A peer that does not is told so in one line (no traceback)."""
    nonce = secrets.token_hex(16)
    try:
        writer.write(json.dumps({"hello": GREETING, "nonce": nonce}).encode() + b"\n")
        async with asyncio.timeout(limits.prove_s):
            await writer.drain()
            line = await reader.readuntil(b"\n")
    except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        line = b""
    if not line or len(line) > limits.max_unproven_line:
        await _refuse(writer, _UNPROVEN, "AuthError")
        return False
    try:
        msg = _parse_request(line)
    except ValueError:
        msg = {}
    params = msg.get("params") if msg.get("method") == "auth" else None
    proof = params.get("proof") if isinstance(params, dict) else None
    if not verify(secret, nonce, proof):
        await _refuse(
            writer,
            "authentication failed: this server serves only its session, which holds its "
            "secret; give a session its token as python -m pytest_hud.serve said when it "
            "started ($PYTEST_HUD_RUNTIME_TOKEN, or its token file on this host)",
            "AuthError",
            msg.get("id"),
        )
        return False
    with contextlib.suppress(Exception):
        writer.write(json.dumps({"id": msg.get("id"), "result": {"ok": True}}).encode() + b"\n")
        await writer.drain()
    return True


async def _refuse(
    writer: asyncio.StreamWriter, message: str, kind: str = "ProtocolError", rid: object = None
) -> None:
    """Answer a peer that broke a limit (or failed to prove itself) with one error line,
    then hang up."""
    line = json.dumps({"id": rid, "error": {"type": kind, "message": message}})
    with contextlib.suppress(Exception):
        writer.write(line.encode() + b"\n")
        async with asyncio.timeout(1.0):
            await writer.drain()
    writer.close()


async def _greeting(
    reader: asyncio.StreamReader, host: str, port: int, timeout: float
) -> str | None:
    """The nonce of a server's greeting (None: it wants no proof, ``--no-auth``)."""
    try:
        async with asyncio.timeout(timeout):
            line = await reader.readline()
    except TimeoutError as exc:
        raise TimeoutError(
            f"control channel {host}:{port} sent no greeting within {timeout} s"
        ) from exc
    try:
        hello = json.loads(line) if line else None
    except ValueError:
        hello = None
    if not isinstance(hello, dict) or hello.get("hello") != GREETING:
        raise RpcClosed(
            f"{host}:{port} is not a pytest-hud control channel of this version (its first "
            f"line was {line[:80]!r}, expected a {GREETING} greeting)"
        )
    nonce = hello.get("nonce")
    return nonce if isinstance(nonce, str) else None


class RpcClient:
    """Client side: ``await RpcClient.connect(host, port)``, then ``await call(method, ...)``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[object]] = {}
        self._lock = asyncio.Lock()
        self._closed: BaseException | None = None
        self._reader_task = asyncio.create_task(self._read_loop())

    @classmethod
    async def connect(
        cls, host: str, port: int, *, timeout: float = 10.0, secret: str | None = None
    ) -> RpcClient:
        """Dial ``host:port``, answering its greeting's challenge with ``secret``."""
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, limit=_LIMIT)
        except TimeoutError as exc:
            raise TimeoutError(
                f"control channel {host}:{port} did not accept a connection within {timeout} s"
            ) from exc
        try:
            nonce = await _greeting(reader, host, port, timeout)
        except BaseException:
            writer.close()
            raise
        client = cls(reader, writer)
        if nonce is None:
            return client
        if secret is None:
            await client.close()
            raise AuthError(
                f"the server at {host}:{port} serves only peers holding its session's secret, "
                "and none was given; give its token as python -m pytest_hud.serve said "
                "($PYTEST_HUD_RUNTIME_TOKEN)"
            )
        try:
            await client.call("auth", timeout=timeout, proof=prove(secret, nonce))
        except (RemoteError, RpcClosed) as exc:
            await client.close()
            raise AuthError(f"the server at {host}:{port} refused this client: {exc}") from None
        return client

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def _read_loop(self) -> None:
        reason: BaseException = RpcClosed("control connection closed by the peer")
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                msg = json.loads(line)
                fut = self._pending.pop(msg.get("id"), None)
                if fut is None or fut.done():
                    continue
                if "error" in msg:
                    err = msg["error"] or {}
                    fut.set_exception(
                        RemoteError(
                            err.get("type", "Error"),
                            err.get("message", ""),
                            err.get("traceback", ""),
                        )
                    )
                else:
                    fut.set_result(msg.get("result"))
        except asyncio.CancelledError:
            reason = RpcClosed("control client closed")
            raise
        except Exception as exc:
            reason = RpcClosed(f"control connection failed: {exc!r}")
        finally:
            self._closed = reason
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(reason)
            self._pending.clear()

    async def call(self, method: str, timeout: float | None = 60.0, **params: object) -> object:
        """Send one request and wait (at most ``timeout`` s) for its reply."""
        if self._closed is not None:
            raise RpcClosed(f"cannot call {method!r}: {self._closed}")
        rid = next(self._ids)
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        data = (
            json.dumps(
                {"id": rid, "method": method, "params": params}, default=_json_default
            ).encode()
            + b"\n"
        )
        try:
            async with self._lock:
                self._writer.write(data)
                await self._writer.drain()
            async with asyncio.timeout(timeout):
                return await fut
        except TimeoutError as exc:
            raise TimeoutError(f"control call {method!r} got no reply within {timeout} s") from exc
        except ConnectionError as exc:
            if isinstance(exc, RpcClosed):
                raise
            raise RpcClosed(f"control connection lost during {method!r}: {exc}") from exc
        finally:
            self._pending.pop(rid, None)

    async def close(self) -> None:
        self._reader_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader_task
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
