"""RobotEndpoint: the env server's handle on a sim process.

It spawns the sim program (a bridge class or instance, or an explicit argv) or
attaches to one that runs elsewhere, then drives episodes over the sim's control
side channel: ``reset(**args) -> {"prompt", "token"}``, ``result(token=...) ->
{"score", "success", "total_reward"}``. Control plane only: agents talk to the
bridge's WebSocket directly. A spawned sim is tied to its endpoint by a stdin
lifeline, so it exits when the endpoint stops or the parent process dies.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse

from pytest_hud.robot.bridge import ANNOUNCE, RobotBridge
from pytest_hud.robot.contract import Contract
from pytest_hud.robot.sim import encode_spec
from pytest_hud.robot.wire import PROTOCOL
from pytest_hud.rpc import RemoteError, RpcClient, RpcClosed

__all__ = ["RobotEndpoint", "SimError", "track_claims"]

#: Slots claimed in the current session: (endpoint, token) pairs not yet graded. The env
#: server sets this around a template's steps so a dropped session can free its slots.
_claims: contextvars.ContextVar[list[tuple[RobotEndpoint, str]] | None] = contextvars.ContextVar(
    "pytest_hud_claims", default=None
)


def track_claims(claims: list[tuple[RobotEndpoint, str]] | None) -> contextvars.Token[Any]:
    """Record claims made in this context into ``claims``; reset with the returned token."""
    return _claims.set(claims)


async def release_claims(claims: list[tuple[RobotEndpoint, str]]) -> None:
    """Grade-and-free every slot still claimed (a dropped session's cleanup)."""
    while claims:
        endpoint, token = claims.pop()
        with contextlib.suppress(Exception):
            await endpoint.result(token)


class SimError(RuntimeError):
    """The sim process failed: it would not start, it crashed, or a control call failed."""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in sys.path if p]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([os.getcwd(), *paths]))
    env["PYTEST_HUD_LIFELINE"] = "1"
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class RobotEndpoint:
    """Drive a bridge in another process. Build from a bridge, an argv, or ``attach(url)``."""

    def __init__(
        self,
        bridge: type[RobotBridge] | RobotBridge | Any = None,
        *,
        kwargs: dict[str, Any] | None = None,
        argv: Sequence[str] | None = None,
        control: str | None = None,
        start_timeout: float = 120.0,
        call_timeout: float = 600.0,
    ) -> None:
        if sum(x is not None for x in (bridge, argv, control)) != 1:
            raise TypeError("RobotEndpoint needs exactly one of: a bridge, argv=, or control=")
        self._spec: bytes | None = encode_spec(bridge, kwargs) if bridge is not None else None
        self._argv = list(argv) if argv is not None else None
        self._control = control
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self._proc: asyncio.subprocess.Process | None = None
        self._rpc: RpcClient | None = None
        self._drain: asyncio.Task[None] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=60)
        self._info: dict[str, Any] | None = None
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
    def pid(self) -> int | None:
        """The spawned sim's process id (None when attached or not started)."""
        return self._proc.pid if self._proc is not None else None

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
            try:
                control = self._control or await self._spawn()
                parsed = urlparse(control)
                if parsed.scheme != "tcp" or not parsed.hostname or not parsed.port:
                    raise SimError(
                        f"control address must look like tcp://HOST:PORT, got {control!r}"
                    )
                self._rpc = await RpcClient.connect(
                    parsed.hostname, parsed.port, timeout=self.start_timeout
                )
                self._info = await self._call("info", timeout=self.start_timeout)
            except BaseException:
                await self.stop()
                raise

    async def _spawn(self) -> str:
        argv = self._argv or [sys.executable, "-m", "pytest_hud.robot.sim", "--stdin", "--lifeline"]
        env = _child_env()
        env["PYTEST_HUD_SIM_HOST"] = self.sim_host
        env["PYTEST_HUD_SIM_PORT"] = str(self.sim_port)
        self._proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
            limit=1 << 20,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        if self._spec is not None:
            self._proc.stdin.write(self._spec)
            await self._proc.stdin.drain()
        try:
            async with asyncio.timeout(self.start_timeout):
                while True:
                    line = await self._proc.stdout.readline()
                    if not line:
                        rc = await self._proc.wait()
                        raise SimError(
                            f"sim process exited with code {rc} before serving; "
                            f"its output:\n{self.log_tail()}"
                        )
                    text = line.decode(errors="replace").rstrip("\n")
                    if text.startswith(ANNOUNCE + " "):
                        info = json.loads(text[len(ANNOUNCE) + 1 :])
                        break
                    self._tail.append(text)
        except TimeoutError:
            raise SimError(
                f"sim process did not announce itself within {self.start_timeout} s "
                f"(expected a '{ANNOUNCE} {{...}}' line on stdout); its output:\n{self.log_tail()}"
            ) from None
        self._drain = asyncio.create_task(self._drain_output())
        return str(info["control"])

    async def _drain_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        with contextlib.suppress(Exception):
            while line := await self._proc.stdout.readline():
                self._tail.append(line.decode(errors="replace").rstrip("\n"))

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the spawned sim printed (stdout and stderr)."""
        return "\n".join(list(self._tail)[-lines:]) or "(no output)"

    async def stop(self) -> None:
        """Hang up; a spawned sim is stopped and reaped (stdin EOF, SIGTERM, then SIGKILL)."""
        if self._rpc is not None:
            await self._rpc.close()
            self._rpc = None
        proc, self._proc = self._proc, None
        if proc is not None:
            await _terminate(proc)
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._drain
            self._drain = None
        self._info = None

    async def __aenter__(self) -> RobotEndpoint:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- control -----------------------------------------------------------------
    async def _call(self, method: str, timeout: float | None = None, **params: Any) -> Any:
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

    async def _crash_message(self, method: str, exc: BaseException) -> str:
        proc = self._proc
        if proc is not None:  # a lost channel usually means the sim died: reap it to say how
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await proc.wait()
        if proc is not None and proc.returncode is not None:
            return (
                f"sim process exited with code {proc.returncode} during {method}(); "
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

    async def reset(self, **task_args: Any) -> dict[str, Any]:
        """Start an episode on the next slot: ``{"prompt", "token"}``."""
        await self.start()
        out = await self._call("reset", **task_args)
        claims = _claims.get()
        if claims is not None:
            claims.append((self, out["token"]))
        return {"prompt": out["prompt"], "token": out["token"]}

    async def result(self, token: str | None = None) -> dict[str, Any]:
        """Grade the slot's episode and free the slot: ``{"score", "success", "total_reward"}``."""
        claims = _claims.get()
        if claims is not None:
            claims[:] = [c for c in claims if not (c[0] is self and c[1] == token)]
        return dict(await self._call("result", token=token))

    async def capability(self, name: str = "robot") -> dict[str, Any]:
        """The robot capability's manifest entry: protocol, url and contract."""
        await self.start()
        info = self._require_info()
        return {
            "name": name,
            "protocol": PROTOCOL,
            "url": info["url"],
            "params": {"contract": info["contract"]},
        }


async def _terminate(proc: asyncio.subprocess.Process) -> None:
    """Stop a spawned sim and its process group, never waiting unboundedly.

    Closing stdin (the lifeline) asks for a clean stop; SIGTERM and SIGKILL follow.
    """
    if proc.stdin is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()
    for sig, grace in ((None, 2.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if proc.returncode is not None:
            break
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await proc.wait()
    if proc.returncode is None:  # pragma: no cover - SIGKILL always lands
        await proc.wait()
    # Reap stragglers in the group (e.g. vector env workers) once the leader is gone.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
