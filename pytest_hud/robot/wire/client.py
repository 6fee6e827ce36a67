"""RobotClient: the agent side of the openpi/0 wire. A refused claim fails at connect; then
actions and observations alternate, every wait bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import NotRequired, TypedDict

import numpy as np

from pytest_hud.errors import ConnectError, RobotError, TransportClosed, WireError
from pytest_hud.robot.contract import Contract, Spaces
from pytest_hud.robot.wire.codec import pack, unpack
from pytest_hud.robot.wire.deadline import Watchdog
from pytest_hud.robot.wire.inproc import InprocTransport
from pytest_hud.robot.wire.transport import Transport, connect

__all__ = ["Observed", "RobotClient", "RobotError"]


class Observed(TypedDict):
    """One observation as the agent reads it: the sim's values by name (arrays), whether the
    episode ended, and the step's reward where the sim sends one."""

    data: dict[str, object]
    terminated: bool
    reward: NotRequired[float]


class RobotClient:
    """One agent connection to one slot of a bridge."""

    def __init__(
        self,
        ws: Transport,
        metadata: dict[str, object],
        contract: Contract | None,
        first: object,
        *,
        timeout: float | None,
    ) -> None:
        self._ws = ws
        self.metadata = metadata
        self._contract = contract
        self._pending = first
        self.timeout = timeout
        self.url = ""
        self._watchdog = Watchdog()  # one timer per connection, not one per receive

    @classmethod
    async def connect(
        cls,
        target: str | Mapping[str, object],
        *,
        token: str | None = None,
        contract: Contract | Mapping[str, object] | None = None,
        open_timeout: float = 30.0,
        timeout: float | None = 300.0,
        websocket: str | None = None,
    ) -> RobotClient:
        """Dial ``target`` (a ``ws://`` url or a capability dict) and claim a slot.

        ``timeout`` bounds each wait for an observation (None: wait indefinitely);
        ``websocket`` picks the implementation (see
        :func:`pytest_hud.robot.wire.transport.connect`).
        """
        url, published = _target(target)
        source = contract if contract is not None else published
        try:
            ws = await connect(url, open_timeout=open_timeout, impl=websocket)
        except ConnectError as exc:
            raise RobotError(f"cannot connect to robot bridge at {url}: {exc}") from None
        try:
            meta = await _recv(ws, open_timeout, "the metadata frame")
            if not isinstance(meta, dict):
                raise RobotError(f"bridge metadata frame is not a map: {meta!r}")
            if source is None and meta.get("contract"):
                source = meta["contract"]
            first = None
            if token is not None or meta.get("claim_required"):
                await ws.send(pack({"claim": token}))
                first = await _recv(ws, open_timeout, "the first observation after the claim")
        except BaseException:
            with contextlib.suppress(Exception):
                await ws.close()
            raise
        client = cls(
            ws, meta, Contract.from_dict(source) if source else None, first, timeout=timeout
        )
        client.url = url
        return client

    # -- the contract ------------------------------------------------------------
    @property
    def contract(self) -> Contract:
        if self._contract is None:
            raise RobotError(
                "this bridge published no contract: pass contract= to connect() or the "
                "capability dict that carries it"
            )
        return self._contract

    def spaces(self) -> Spaces:
        """The contract split by role into observation and action spaces."""
        return self.contract.spaces()

    @property
    def control_rate(self) -> float | None:
        return self._contract.control_rate if self._contract else None

    # -- the loop ------------------------------------------------------------------
    async def get_observation(self, timeout: float | None = None) -> Observed:
        """The next observation: ``{"data": {name: array}, "terminated": bool, "reward"?}``."""
        msg: object
        if self._pending is not None:
            msg, self._pending = self._pending, None
        else:  # an inline sim's observation is usually queued already: no wait to bound
            ws = self._ws
            msg = ws.take() if type(ws) is InprocTransport else None
            if msg is None:
                msg = await self._recv_watched(timeout or self.timeout)
        if not isinstance(msg, dict):
            raise RobotError(f"bridge sent a {type(msg).__name__} where an observation was due")
        data = dict(msg)
        terminated = bool(data.pop("terminated", False))
        reward = data.pop("reward", None)
        data.pop("meta", None)
        out = Observed(data=data, terminated=terminated)
        if reward is not None:
            out["reward"] = reward
        return out

    async def _recv_watched(self, timeout: float | None) -> object:
        receive = _recv(self._ws, None, "an observation")
        if timeout is None:
            return await receive
        try:
            return await self._watchdog.wait(receive, timeout)
        except TimeoutError:
            raise RobotError(
                f"timed out after {timeout} s waiting for an observation from the bridge"
            ) from None

    async def send_action(self, action: object) -> None:
        """Send one action (shape ``[A]``) under openpi's ``actions`` key."""
        await self._send({"actions": np.asarray(action, dtype=np.float32)})

    async def send_chunk(self, chunk: object, **extra: object) -> None:
        """Send a whole ``[T, A]`` chunk (for bridges that execute chunks themselves)."""
        await self._send({"actions": np.asarray(chunk, dtype=np.float32), **extra})

    async def step(self, action: object) -> Observed:
        """Send one action and wait for the observation it produced."""
        await self.send_action(action)
        return await self.get_observation()

    async def _send(self, msg: dict[str, object]) -> None:
        try:
            if isinstance(self._ws, InprocTransport):  # an inline sim: the message itself
                await self._ws.send_message(msg)
            else:
                await self._ws.send(pack(msg))
        except TransportClosed as exc:
            raise RobotError(f"bridge closed the connection: {exc}") from None

    async def close(self) -> None:
        self._watchdog.close()
        with contextlib.suppress(Exception):
            await self._ws.close()

    async def __aenter__(self) -> RobotClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _target(target: str | Mapping[str, object]) -> tuple[str, object]:
    """The url a target names and the contract it publishes (None: none)."""
    if isinstance(target, str):
        return target, None
    if isinstance(target, Mapping) and "url" in target:
        params = target.get("params")
        published = params.get("contract") if isinstance(params, Mapping) else None
        return str(target["url"]), published or target.get("contract")
    raise RobotError(f"connect() takes a ws:// url or a capability dict with a url, got {target!r}")


async def _recv(ws: Transport, timeout: float | None, what: str) -> object:
    try:
        if timeout is None:
            frame = await ws.recv()
        else:
            async with asyncio.timeout(timeout):
                frame = await ws.recv()
    except TimeoutError:
        raise RobotError(
            f"timed out after {timeout} s waiting for {what} from the bridge"
        ) from None
    except TransportClosed as exc:
        raise RobotError(
            f"bridge closed the connection while we waited for {what}: {exc}"
        ) from None
    if isinstance(frame, str):
        raise RobotError(frame)
    if isinstance(frame, dict):  # passed by an inline sim, already decoded
        return frame
    try:
        return unpack(frame)
    except WireError as exc:
        raise RobotError(f"bad frame from the bridge: {exc}") from None
