"""The control channel: how a rollout drives an env server (docs/reference/control.md). Sessions
belong to the connection that started them: when it drops, the server cancels them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse, urlunparse

from pytest_hud.errors import ControlError, TemplateError
from pytest_hud.plumbing.auth import (
    RUNTIME_TOKEN_ENV,
    session_secret,
    strip_token,
    url_token,
)
from pytest_hud.plumbing.rpc import AuthError, RemoteError, RpcClient, RpcClosed, tcp_address
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.remote_traceback import user_frames
from pytest_hud.runtime.task import Task

if TYPE_CHECKING:
    pass

__all__ = ["ControlClient", "ControlError", "Run", "rewrite_url"]


@dataclass
class Run:
    """A started session: what the agent gets to act on."""

    task: Task
    session: str
    prompt: str
    bindings: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def robot(self) -> dict[str, Any]:
        """The openpi/0 capability manifest (url and contract) of this run."""
        for cap in self.capabilities.values():
            if cap.get("protocol") == "openpi/0":
                return cap
        raise ControlError(
            f"env {self.task.env!r} publishes no robot (openpi/0) capability; "
            f"it has: {sorted(self.capabilities) or 'none'}"
        )

    @property
    def robot_token(self) -> str | None:
        for name, cap in self.capabilities.items():
            if cap.get("protocol") == "openpi/0":
                binding = self.bindings.get(name) or {}
                return binding.get("token") if isinstance(binding, dict) else None
        return None


def rewrite_url(url: str, host: str | None, port_map: dict[str, int | str] | None) -> str:
    """Map a url a substrate published (its own host and ports) to one reachable from here.

    A ``port_map`` value is a port (reached on ``host``) or ``"host:port"`` (its own host).
    """
    parsed = urlparse(url)
    if parsed.port is None:
        return url
    port = parsed.port
    mapped = port_map.get(str(port)) if port_map else None
    if isinstance(mapped, str) and ":" in mapped:
        return urlunparse(parsed._replace(netloc=mapped))
    if port_map and str(port) in port_map:
        port = int(port_map[str(port)])
    new_host = host or parsed.hostname or "127.0.0.1"
    if parsed.hostname not in ("0.0.0.0", "127.0.0.1", "localhost", "::") and not port_map:
        new_host = parsed.hostname or new_host
    return urlunparse(parsed._replace(netloc=f"{new_host}:{port}"))


class ControlClient:
    """One control connection to an env server (one rollout's sessions)."""

    def __init__(
        self, rpc: RpcClient, host: str | None, port_map: dict[str, int | str] | None
    ) -> None:
        self._rpc = rpc
        self._host = host
        self._port_map = port_map

    @classmethod
    async def connect(cls, runtime: Runtime | str, *, timeout: float = 30.0) -> ControlClient:
        """Dial a Runtime (or a ``tcp://`` url string), proving the secret its params or
        url carry (``?token=``), else this session's (servers it started hold that)."""
        url = runtime if isinstance(runtime, str) else runtime.url
        params = {} if isinstance(runtime, str) else dict(runtime.params or {})
        address = tcp_address(url, ("tcp", "ws"))
        shown = strip_token(url)
        if address is None:
            raise ControlError(f"a runtime url looks like tcp://HOST:PORT, got {shown!r}")
        secret = params.get("token") or url_token(url) or session_secret()
        try:
            rpc = await RpcClient.connect(*address, timeout=timeout, secret=secret)
        except AuthError as exc:
            raise ControlError(
                f"the env server at {shown} refused this session: {exc}. Fix: a server this "
                f"session did not start needs its token: in ${RUNTIME_TOKEN_ENV}, or on the "
                "same host the file python -m pytest_hud.serve named when it started"
            ) from None
        except OSError as exc:
            raise ControlError(f"cannot reach the env server at {shown}: {exc}") from exc
        return cls(rpc, params.get("host") or address[0], params.get("port_map"))

    async def call(self, method: str, timeout: float | None = 600.0, **params: object) -> Any:
        try:
            return await self._rpc.call(method, timeout=timeout, **params)
        except RemoteError as exc:
            frames = user_frames(exc.remote_traceback)
            if frames:  # the user's template raised: its type, message and lines
                raise TemplateError(method, exc.type_name, str(exc), frames) from None
            raise ControlError(f"env server {method}() failed: {exc.type_name}: {exc}") from None
        except RpcClosed as exc:
            raise ControlError(f"env server connection lost during {method}(): {exc}") from None

    async def ping(self, timeout: float = 10.0) -> dict[str, Any]:
        return dict(await self.call("ping", timeout=timeout))

    async def start(self, task: Task, *, timeout: float | None = 600.0) -> Run:
        reply = await self.call(
            "start", timeout=timeout, env=task.env, id=task.id, args=dict(task.args)
        )
        caps = {
            name: {**cap, "url": rewrite_url(cap["url"], self._host, self._port_map)}
            if "url" in cap
            else cap
            for name, cap in (reply.get("capabilities") or {}).items()
        }
        return Run(
            task, reply["session"], reply.get("prompt", ""), reply.get("bindings") or {}, caps
        )

    async def result(self, run: Run, *, timeout: float | None = 600.0) -> dict[str, Any]:
        return dict(await self.call("result", timeout=timeout, session=run.session))

    async def cameras(self, env: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """``env``'s robot cameras now, outside any session, while no episode holds the robot
        (what an operator's reset gate shows live): ``{"cameras": {name: {"jpeg", "width",
        "height"}}}`` (robot/sim/cameras.py decodes them), empty for a robot without a
        camera, or ``{"cameras": None, "why": ...}`` where they cannot be read now."""
        try:
            reply = await self._rpc.call("cameras", timeout=timeout, env=env, seconds=timeout)
        except RemoteError as exc:  # the robot's own code raised, not a template: one line
            raise ControlError(f"reading the robot's cameras failed: {exc}") from None
        except RpcClosed as exc:
            raise ControlError(f"env server connection lost during cameras(): {exc}") from None
        return dict(reply)  # type: ignore[call-overload]

    async def cancel(self, run: Run) -> None:
        await self.call("cancel", timeout=30.0, session=run.session)

    async def close(self) -> None:
        await self._rpc.close()

    @property
    def closed(self) -> bool:
        """The connection is gone (closed here, or by the server)."""
        return self._rpc.closed

    async def __aenter__(self) -> ControlClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
