"""RobotEndpoint: the env server's handle on a sim process (spawned with a stdin lifeline, or
attached), driving episodes over its control side channel; or on a sim served inline, in this
process on this loop, reached without sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from pytest_hud.errors import SimError
from pytest_hud.plumbing.auth import session_secret, url_token
from pytest_hud.plumbing.jsonvalue import JSONValue
from pytest_hud.plumbing.process import Child, ChildError, child_env
from pytest_hud.plumbing.rpc import RemoteError, RpcClient, RpcClosed, tcp_address
from pytest_hud.plumbing.tracebacks import format_exc
from pytest_hud.robot.contract import Contract
from pytest_hud.robot.sim.bridge import ANNOUNCE, RobotBridge
from pytest_hud.robot.sim.program import build_bridge, encode_spec
from pytest_hud.robot.wire import inproc
from pytest_hud.robot.wire.codec import PROTOCOL

__all__ = [
    "SIM_PROCESS_ENV",
    "Episode",
    "RobotEndpoint",
    "SimError",
    "serve_inline",
    "track_claims",
]


class Episode(TypedDict):
    """An episode a sim started (:meth:`RobotEndpoint.reset`): its prompt, and the slot's token
    a template binds its robot to (``{"robot": {"token": ep["token"]}}``)."""

    prompt: str
    token: str


#: Set to ``1`` (``--hud-sim-process``): every sim whose placement was left to the session
#: gets a process of its own again (isolation from the env server's process).
SIM_PROCESS_ENV = "PYTEST_HUD_SIM_PROCESS"


def serve_inline(inline: bool | None) -> bool:
    """Where a capability's sim runs when its env module left it open (``inline=None``): in
    the env server's process, unless ``$PYTEST_HUD_SIM_PROCESS`` asks for a process of its
    own. The runtimes that put the env server in a process of its own (subprocess, docker,
    the clouds) isolate it from pytest either way; in the local runtime an inline sim shares
    the pytest process (a segfault or a stuck step is the session's)."""
    if inline is not None:
        return inline
    return os.environ.get(SIM_PROCESS_ENV, "") not in ("1", "true", "yes")


#: Slots claimed in the current session: (endpoint, token) pairs not yet graded. The env
#: server sets this around a template's steps so a dropped session can free its slots.
_claims: contextvars.ContextVar[list[tuple[RobotEndpoint, str]] | None] = contextvars.ContextVar(
    "pytest_hud_claims", default=None
)


def track_claims(
    claims: list[tuple[RobotEndpoint, str]] | None,
) -> contextvars.Token[list[tuple[RobotEndpoint, str]] | None]:
    """Record claims made in this context into ``claims``; reset with the returned token."""
    return _claims.set(claims)


async def release_claims(claims: list[tuple[RobotEndpoint, str]]) -> None:
    """Grade-and-free every slot still claimed (a dropped session's cleanup)."""
    while claims:
        endpoint, token = claims.pop()
        with contextlib.suppress(Exception):
            await endpoint.result(token)


class RobotEndpoint:
    """Drive a bridge in another process. Build from a bridge, an argv, or ``attach(url)``.

    ``inline=True`` (with a bridge) builds and serves the bridge in this process, on the
    env server's loop, instead: no sim process, and an agent on the same loop reaches it
    without a socket. For cheap sims: a step blocks that loop, and a crash is this process's.
    """

    def __init__(
        self,
        bridge: type[RobotBridge] | RobotBridge | object = None,
        *,
        kwargs: Mapping[str, object] | None = None,
        argv: Sequence[str] | None = None,
        control: str | None = None,
        start_timeout: float = 120.0,
        call_timeout: float = 600.0,
        inline: bool = False,
    ) -> None:
        if sum(x is not None for x in (bridge, argv, control)) != 1:
            raise TypeError("RobotEndpoint needs exactly one of: a bridge, argv=, or control=")
        if inline and bridge is None:
            raise TypeError(
                "RobotEndpoint(inline=True) serves a bridge: pass one, not argv/control"
            )
        self._target: tuple[object, dict[str, object]] | None = (
            (bridge, dict(kwargs or {})) if inline else None
        )
        self._bridge: RobotBridge | None = None
        self._spec: bytes | None = (
            encode_spec(bridge, kwargs) if bridge is not None and not inline else None
        )
        self._argv = list(argv) if argv is not None else None
        self._control = control
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self._child: Child | None = None
        self._rpc: RpcClient | None = None
        self._info: dict[str, object] | None = None
        self._start_lock: asyncio.Lock | None = None
        self.sim_host = "127.0.0.1"
        self.sim_port = 0

    def listen(self, host: str, port: int = 0) -> None:
        """Where a spawned sim binds its agent WebSocket (before start; e.g. a container port)."""
        self.sim_host, self.sim_port = host, port

    @classmethod
    def attach(cls, control: str, **kwargs: Any) -> RobotEndpoint:
        """An endpoint on a sim someone else runs (``tcp://host:port``); stop() only hangs up."""
        return cls(control=control, **kwargs)

    # -- lifecycle ---------------------------------------------------------------
    @property
    def inline(self) -> bool:
        """Whether the bridge is served in this process (``inline=True``)."""
        return self._target is not None

    @property
    def pid(self) -> int | None:
        """The spawned sim's process id (None when attached or not started)."""
        return self._child.pid if self._child is not None else None

    @property
    def started(self) -> bool:
        return self._info is not None

    async def start(self) -> None:
        """Spawn (or dial) the sim and read its url and contract. Idempotent."""
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._info is not None:
                return
            if self._target is not None:
                await self._start_inline(*self._target)
                return
            try:
                control = self._control or await self._spawn()
                address = tcp_address(control)
                if address is None:
                    raise SimError(
                        f"control address must look like tcp://HOST:PORT, got {control!r}"
                    )
                secret = url_token(control) or session_secret()
                self._rpc = await RpcClient.connect(
                    *address, timeout=self.start_timeout, secret=secret
                )
                self._info = await self._call("info", {}, self.start_timeout)
            except BaseException:
                await self.stop()
                raise

    async def _start_inline(self, target: object, kwargs: Mapping[str, object]) -> None:
        try:
            self._bridge = build_bridge(target, kwargs)
            url = await self._bridge.start(self.sim_host, self.sim_port)
            inproc.register(url, self._bridge._serve_connection)
            self._info = await self._call("info", {}, self.start_timeout)
        except BaseException:
            await self.stop()
            raise

    async def _spawn(self) -> str:
        argv = self._argv or [
            sys.executable,
            "-m",
            "pytest_hud.robot.sim.program",
            "--stdin",
            "--lifeline",
        ]
        env = child_env(PYTEST_HUD_SIM_HOST=self.sim_host, PYTEST_HUD_SIM_PORT=str(self.sim_port))
        try:
            self._child = await Child.spawn(
                argv,
                announce=ANNOUNCE,
                timeout=self.start_timeout,
                what="sim process",
                env=env,
                stdin=self._spec or b"",
                fork=self._argv is None,
            )
        except ChildError as exc:
            raise SimError(str(exc)) from None
        return str(self._child.info["control"])

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the spawned sim printed (stdout and stderr)."""
        return self._child.log_tail(lines) if self._child is not None else "(no output)"

    async def stop(self) -> None:
        """Hang up; a spawned sim is stopped and reaped (stdin EOF, SIGTERM, then SIGKILL), an
        inline one stopped and closed."""
        bridge, self._bridge = self._bridge, None
        if bridge is not None:
            with contextlib.suppress(Exception):
                await inproc.unregister(bridge.url)
            await bridge.stop()
        if self._rpc is not None:
            await self._rpc.close()
            self._rpc = None
        child, self._child = self._child, None
        if child is not None:
            await child.terminate()
        self._info = None

    async def __aenter__(self) -> RobotEndpoint:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- control -----------------------------------------------------------------
    async def _call(
        self, method: str, params: Mapping[str, object], timeout: float | None = None
    ) -> Any:
        if self._bridge is not None:
            return await self._call_inline(method, timeout or self.call_timeout, dict(params))
        if self._rpc is None:
            raise SimError(f"endpoint is not started; await start() before {method}()")
        try:
            return await self._rpc.call(method, timeout=timeout or self.call_timeout, **params)
        except RemoteError as exc:
            raise SimError(f"sim {method}() failed: {exc}\n{exc.remote_traceback}") from None
        except RpcClosed as exc:
            raise SimError(await self._crash_message(method, exc)) from None
        except TimeoutError as exc:
            raise SimError(f"sim {method}() timed out: {exc}") from None

    async def _call_inline(self, method: str, timeout: float, params: dict[str, object]) -> object:
        assert self._bridge is not None
        try:
            async with asyncio.timeout(timeout):
                return await self._bridge.control(None, method, params)
        except TimeoutError:
            raise SimError(f"inline sim {method}() timed out after {timeout} s") from None
        except Exception as exc:
            raise SimError(f"sim {method}() failed: {exc}\n{format_exc()}") from None

    async def _crash_message(self, method: str, exc: BaseException) -> str:
        child = self._child
        # a lost channel usually means the sim died: reap it to say how
        if child is not None and await child.exited(2.0) is not None:
            return (
                f"sim process exited with code {child.returncode} during {method}(); "
                f"its output:\n{self.log_tail()}"
            )
        return f"lost the sim's control channel during {method}(): {exc}"

    @property
    def url(self) -> str:
        """The bridge's ``ws://`` address agents connect to."""
        return str(self._require_info()["url"])

    @property
    def contract(self) -> Contract:
        return Contract.from_dict(self._require_info()["contract"])

    @property
    def num_envs(self) -> int:
        return int(self._require_info()["num_envs"])

    def _require_info(self) -> dict[str, Any]:
        if self._info is None:
            raise SimError("endpoint is not started; await start() first")
        return self._info

    async def reset(self, **task_args: object) -> Episode:
        """Start an episode on the next slot: ``{"prompt", "token"}``."""
        await self.start()
        out = await self._call("reset", task_args)
        claims = _claims.get()
        if claims is not None:
            claims.append((self, out["token"]))
        return Episode(prompt=out["prompt"], token=out["token"])

    async def result(self, token: str | None = None) -> dict[str, JSONValue]:
        """Grade the slot's episode and free the slot: ``{"score", "success", "total_reward"}``."""
        claims = _claims.get()
        if claims is not None:
            claims[:] = [c for c in claims if not (c[0] is self and c[1] == token)]
        return dict(await self._call("result", {"token": token}))

    async def cameras(self, timeout: float | None = None) -> dict[str, JSONValue]:
        """The sim's cameras now, read while no episode holds it (RobotBridge.read_cameras):
        ``{"cameras": {name: {"jpeg", "width", "height"}}}``, or ``{"cameras": None, "why"}``."""
        await self.start()
        return dict(await self._call("cameras", {}, timeout))

    async def capability(self, name: str = "robot") -> dict[str, JSONValue]:
        """The robot capability's manifest entry: protocol, url and contract."""
        await self.start()
        info = self._require_info()
        return {
            "name": name,
            "protocol": PROTOCOL,
            "url": info["url"],
            "params": {"contract": info["contract"]},
        }
