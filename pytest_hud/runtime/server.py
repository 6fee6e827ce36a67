"""The env server: serves every Environment of a module over the control channel.

See :mod:`pytest_hud.runtime.control` for the protocol. Each session runs one
template as a suspended async generator; the connection that started it owns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import json
from collections.abc import AsyncGenerator, Iterable
from typing import Any, Literal

from pytest_hud.errors import EnvError
from pytest_hud.plumbing.auth import server_secret
from pytest_hud.plumbing.rpc import Connection, serve_rpc
from pytest_hud.robot.sim.endpoint import RobotEndpoint, release_claims, track_claims
from pytest_hud.runtime.environment import Environment

__all__ = ["ANNOUNCE", "EnvServer"]

#: Prefix of the readiness line a served module prints: ``PYTEST_HUD_SERVER {"url": ...}``.
ANNOUNCE = "PYTEST_HUD_SERVER"


class _Session:
    def __init__(
        self, sid: str, env: Environment, template_id: str, gen: AsyncGenerator[object, None]
    ) -> None:
        self.id = sid
        self.env = env
        self.template_id = template_id
        self.gen = gen
        self.claims: list[tuple[RobotEndpoint, str]] = []
        self.lock = asyncio.Lock()

    async def step(self) -> object:
        """Advance the template to its next yield, recording the robot slots it claims."""
        token = track_claims(self.claims)
        try:
            return await self.gen.__anext__()
        finally:
            token.var.reset(token)

    async def close(self) -> None:
        """Run the template's cleanup and free any slot it left claimed."""
        with contextlib.suppress(Exception):
            await self.gen.aclose()
        await release_claims(self.claims)


class _Default(enum.Enum):
    SESSION = "session"  # EnvServer's default secret: the session's (None under --no-auth)


class EnvServer:
    """Serve environments; ``await start()`` returns the ``tcp://`` url.

    ``secret``: what a peer must prove it holds (:mod:`pytest_hud.plumbing.auth`); default this
    session's, None serves anyone (``--no-auth``).
    """

    def __init__(
        self,
        envs: Iterable[Environment],
        *,
        sim_host: str = "127.0.0.1",
        sim_ports: Iterable[int] = (),
        secret: str | Literal[_Default.SESSION] | None = _Default.SESSION,
    ) -> None:
        self.envs: dict[str, Environment] = {}
        for env in envs:
            if env.name in self.envs and self.envs[env.name] is not env:
                raise ValueError(f"two environments are named {env.name!r}")
            self.envs[env.name] = env
        self._sim_host = sim_host
        self._sim_ports = list(sim_ports)
        self.secret = server_secret() if secret is _Default.SESSION else secret
        self._server: asyncio.Server | None = None
        self._ids = itertools.count(1)
        self._sessions: dict[str, _Session] = {}
        self.url = ""

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        ports = iter(self._sim_ports)
        for env in self.envs.values():
            for cap in env.capabilities.values():
                if isinstance(cap, RobotEndpoint):
                    cap.listen(self._sim_host, next(ports, 0))
        started: list[Environment] = []
        try:
            for env in self.envs.values():
                await env.start()
                started.append(env)
            self._server = await serve_rpc(
                self._handle, host, port, on_close=self._on_close, secret=self.secret
            )
        except BaseException:
            for env in reversed(started):
                with contextlib.suppress(Exception):
                    await env.stop()
            raise
        bound = next(iter(self._server.sockets)).getsockname()[1]
        self.url = f"tcp://{host}:{bound}"
        return self.url

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for session in list(self._sessions.values()):
            await session.close()
        self._sessions.clear()
        for env in self.envs.values():
            with contextlib.suppress(Exception):
                await env.stop()

    async def __aenter__(self) -> EnvServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the protocol -----------------------------------------------------------------
    def _env(self, name: Any) -> Environment:
        env = self.envs.get(name)
        if env is None:
            known = ", ".join(sorted(self.envs)) or "none"
            raise EnvError(f"this server has no env {name!r}; it serves: {known}")
        return env

    async def _handle(self, conn: Connection, method: str, params: dict[str, object]) -> object:
        if method == "ping":
            return {"ok": True, "envs": sorted(self.envs)}
        if method == "envs":
            return {
                name: {
                    "templates": {
                        t: list(tpl.signature.parameters) for t, tpl in env.templates.items()
                    },
                    "capabilities": sorted(env.capabilities),
                    "capacity": capacity(env),
                }
                for name, env in self.envs.items()
            }
        if method == "start":
            return await self._start(conn, params)
        if method == "result":
            return await self._result(conn, params)
        if method == "cancel":
            session = self._own(conn, params)
            await self._drop(conn, session)
            return {"ok": True}
        if method == "cameras":
            return await self._cameras(params)
        raise ValueError(
            f"unknown method {method!r}; known: ping, envs, start, result, cancel, cameras"
        )

    async def _cameras(self, params: dict[str, object]) -> object:
        """An env's robot cameras now, outside any session (an operator's reset gate shows
        them live): its first robot endpoint's answer (RobotEndpoint.cameras)."""
        env = self._env(params.get("env"))
        robots = [c for c in env.capabilities.values() if isinstance(c, RobotEndpoint)]
        if not robots:
            return {"cameras": None, "why": f"env {env.name!r} serves no robot"}
        seconds = params.get("seconds")
        bound = float(seconds) if isinstance(seconds, int | float) and seconds > 0 else None
        return await robots[0].cameras(bound)

    async def _start(self, conn: Connection, params: dict[str, Any]) -> dict[str, object]:
        env = self._env(params.get("env"))
        template = env.get_template(str(params.get("id")))
        args = template.bind(dict(params.get("args") or {}))
        sid = f"s{next(self._ids)}"
        session = _Session(sid, env, template.id, template(**args))
        conn.state.setdefault("sessions", set()).add(sid)
        self._sessions[sid] = session
        try:
            first = await session.step()
        except BaseException as exc:
            await self._drop(conn, session)
            if isinstance(exc, StopAsyncIteration):
                raise EnvError(
                    f"template {env.name}/{template.id} returned before its first yield; "
                    "yield the prompt first, then the grade"
                ) from None
            raise
        if isinstance(first, str):
            first = {"prompt": first}
        if not isinstance(first, dict) or "prompt" not in first:
            await self._drop(conn, session)
            raise EnvError(
                f"template {env.name}/{template.id}: the first yield must be a dict with a "
                f"'prompt' (and bindings such as 'robot': {{'token': ...}}), got {first!r}"
            )
        bindings = {k: v for k, v in first.items() if k != "prompt"}
        bindings.pop("bindings", None)
        bindings.update(first.get("bindings") or {})
        return {
            "session": sid,
            "prompt": str(first["prompt"]),
            "bindings": _jsonable(bindings),
            "capabilities": await env.manifest(),
        }

    def _own(self, conn: Connection, params: dict[str, object]) -> _Session:
        sid = params.get("session")
        if sid not in conn.state.get("sessions", set()) or sid not in self._sessions:
            raise LookupError(f"no open session {sid!r} on this connection")
        return self._sessions[sid]

    async def _result(self, conn: Connection, params: dict[str, object]) -> object:
        session = self._own(conn, params)
        try:
            async with session.lock:
                try:
                    grade = await session.step()
                except StopAsyncIteration:
                    raise EnvError(
                        f"template {session.env.name}/{session.template_id} ended after one "
                        "yield; yield the grade (a dict with score/success) second"
                    ) from None
        finally:
            await self._drop(conn, session)
        if isinstance(grade, bool | int | float):
            grade = {"score": float(grade), "success": bool(grade)}
        if not isinstance(grade, dict):
            raise EnvError(
                f"template {session.env.name}/{session.template_id}: the second yield must be "
                f"a grade dict, got {grade!r}"
            )
        return _jsonable(grade)

    async def _drop(self, conn: Connection | None, session: _Session) -> None:
        self._sessions.pop(session.id, None)
        if conn is not None:
            conn.state.get("sessions", set()).discard(session.id)
        await session.close()

    async def _on_close(self, conn: Connection) -> None:
        for sid in list(conn.state.get("sessions", set())):
            session = self._sessions.get(sid)
            if session is not None:
                await self._drop(conn, session)


def _jsonable(obj: object) -> object:
    return json.loads(json.dumps(obj, default=_default))


def _default(obj: object) -> object:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def capacity(env: Environment) -> int | None:
    """How many sessions of ``env`` this server can run at once: the fewest slots among
    its started robot endpoints (``num_envs``); None when nothing bounds it. Shared reads
    it so it never leases more rollouts than the sim has slots (issue 12 #3)."""
    slots = [
        cap.num_envs
        for cap in env.capabilities.values()
        if isinstance(cap, RobotEndpoint) and cap.started
    ]
    return min(slots) if slots else None
