"""RobotBridge: the env side of the openpi/0 wire.

Subclasses implement ``reset`` / ``step`` / ``get_observation`` around a sim; the
base owns the WebSocket serve loop. Each agent connection is scalar openpi for
one slot: the server sends a metadata frame, the client claims its slot with
``{"claim": token}``, then every ``{"actions": a}`` frame is answered with that
slot's observation ``{name: array, ..., "terminated": bool}``. A vectorized sim
(``num_envs`` slots) steps once all live slots have acted (a barrier); idle slots
get ``hold_action()``. A text frame is an error (a message or a traceback).

Sim hooks run on the event-loop thread, which :func:`serve_bridge` makes the main
thread: thread-affine sims are safe and no step pays a thread hand-off. A bridge
whose hooks block for long can set ``offload = True`` to run them on one
dedicated sim thread instead, keeping the serve loop responsive.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import json
import os
import secrets
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import websockets
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from pytest_hud.process import serve_until_stopped
from pytest_hud.robot.contract import Contract
from pytest_hud.robot.vectored import send_chunks
from pytest_hud.robot.wire import (
    PROTOCOL,
    WireError,
    frame_limit,
    pack,
    pack_chunks,
    release_memory,
    tune_allocator,
    unpack,
    ws_options,
)
from pytest_hud.rpc import Connection, serve_rpc

__all__ = ["ANNOUNCE", "BridgeError", "RobotBridge", "serve_bridge"]

#: Prefix of the line a sim process prints on stdout once it serves: ``ANNOUNCE {json}``.
ANNOUNCE = "PYTEST_HUD_SIM"


class BridgeError(RuntimeError):
    """A protocol or episode error the bridge reports to an agent or the endpoint."""


class SlotState(enum.Enum):
    FREE = "free"  # no episode; may be claimed by a reset
    CLAIMED = "claimed"  # token issued, waiting for its agent to connect
    LIVE = "live"  # agent connected, a barrier participant
    DONE = "done"  # terminated, dropped or timed out; held until result() releases it


@dataclass(eq=False)
class _Slot:
    index: int
    state: SlotState = SlotState.FREE
    token: str | None = None
    ws: ServerConnection | None = None
    action: np.ndarray | None = None
    used: bool = False  # claimed since the last whole-sim reset
    prompt: str = ""
    reason: str = ""
    #: Reset through the control channel: its agent must present the token (no ``None``).
    token_required: bool = False

    @property
    def participant(self) -> bool:
        return self.state in (SlotState.CLAIMED, SlotState.LIVE)

    @property
    def ready(self) -> bool:
        return self.state is SlotState.LIVE and self.action is not None


class RobotBridge(ABC):
    """Serve a sim over openpi/0. Implement ``reset``, ``step`` and ``get_observation``.

    ``reset(**task_args) -> prompt`` starts an episode (all slots); ``step(actions)``
    advances the sim by one ``[num_envs, A]`` batch; ``get_observation()`` returns
    ``(data, terminated)`` with ``[num_envs, ...]`` arrays and a ``[num_envs]`` mask
    (optionally a third ``[num_envs]`` reward array). Implement
    ``reset_slot(index, **task_args)`` too if one copy of a vectorized sim can be
    reset alone; then every slot may run its own task args.
    """

    #: Slots (copies of the sim stepped together). Set before serving.
    num_envs: int = 1
    #: Seconds a connection may take to send its claim frame.
    claim_timeout: float = 30.0
    #: Seconds the barrier waits for a slot (to connect, or to act) while peers wait.
    step_timeout: float = 60.0
    #: Seconds a lone connected agent may stay silent; None waits as long as the rollout.
    idle_timeout: float | None = None
    #: Run sim hooks on one dedicated thread instead of the serve loop's thread.
    offload: bool = False

    contract: Contract | dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None

    # -- hooks users implement ----------------------------------------------
    @abstractmethod
    def reset(self, **task_args: Any) -> str:
        """Start a new episode on every slot; return the task prompt."""

    @abstractmethod
    def step(self, actions: np.ndarray) -> None:
        """Advance the sim one control tick with a ``[num_envs, A]`` action batch."""

    @abstractmethod
    def get_observation(self) -> tuple[Any, ...] | None:
        """``(data{name: [N, ...]}, terminated[N])``, optionally ``reward[N]`` third."""

    def reset_slot(self, index: int, **task_args: Any) -> str:
        """Reset one slot of a vectorized sim alone (optional)."""
        raise NotImplementedError

    def can_reset_slot(self) -> bool:
        """Whether :meth:`reset_slot` works here (default: the subclass overrides it)."""
        return type(self).reset_slot is not RobotBridge.reset_slot

    def result_slots(self) -> list[dict[str, Any]]:
        """One grade dict per slot; default broadcasts :meth:`result`."""
        grade = self.result()
        return [dict(grade) for _ in range(self.num_envs)]

    def result(self) -> dict[str, Any]:
        """The episode's grade: ``score``, ``success``, ``total_reward``."""
        success = bool(getattr(self, "success", False))
        return {
            "score": 1.0 if success else 0.0,
            "success": success,
            "total_reward": float(getattr(self, "total_reward", 0.0)),
        }

    def hold_action(self) -> np.ndarray:
        """The action an idle slot gets at a barrier step (zeros)."""
        return np.zeros(self.action_size or 1, np.float32)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the sim (called once, on the sim thread, when serving stops)."""

    def ensure_contract(self) -> Contract:
        """The contract to publish; subclasses may derive it lazily (on the sim thread)."""
        if self.contract is None:
            raise BridgeError(
                f"{type(self).__name__} has no contract: set self.contract to a Contract or "
                "a contract v0 dict before serving"
            )
        return Contract.from_dict(self.contract)

    # -- serving ---------------------------------------------------------------
    def _init_serving(self) -> None:
        if getattr(self, "_slots", None) is not None:
            return
        if not isinstance(self.num_envs, int) or self.num_envs < 1:
            raise BridgeError(f"num_envs must be a positive int, got {self.num_envs!r}")
        self._slots = [_Slot(i) for i in range(self.num_envs)]
        self._server: Any = None
        self._executor: ThreadPoolExecutor | None = None
        self._stepping = False
        self._watchdog: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._batch_args: dict[str, Any] | None = None
        self._batch_prompt = ""
        self._lock: asyncio.Lock = asyncio.Lock()  # serialises claims and releases
        self._contract_obj: Contract | None = None
        self._host = "127.0.0.1"
        self._port = 0

    @property
    def action_size(self) -> int | None:
        contract = getattr(self, "_contract_obj", None)
        if contract is None:
            return None
        cached = getattr(self, "_action_size", None)
        if cached is None or cached[0] is not contract:  # spaces() + np.prod once, not per step
            cached = self._action_size = (contract, contract.spaces().action_feature.size)
        return cached[1]

    @property
    def url(self) -> str:
        if getattr(self, "_server", None) is None:
            raise BridgeError("bridge is not serving yet; await start() first")
        return f"ws://{self._host}:{self._port}"

    async def _sim(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a sim hook on the sim thread."""
        if self._executor is None:
            return fn(*args, **kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Bind the agent WebSocket; returns its ``ws://`` url."""
        self._init_serving()
        if self._server is not None:
            return self.url
        if self.offload:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="pytest-hud-sim")
        self._contract_obj = await self._sim(self.ensure_contract)
        self._server = await serve(
            self._serve_connection, host, port, ping_interval=None, **ws_options(self._max_frame())
        )
        sock = next(iter(self._server.sockets))
        self._host, self._port = host, sock.getsockname()[1]
        return self.url

    def _max_frame(self) -> int:
        """An agent only ever sends a claim and one action per frame: cap frames at that.

        From the contract's action size (a few KB); 1 MB if the contract leaves it open.
        """
        contract = self._contract_obj
        action = contract.payload_bytes("action") if contract is not None else None
        return frame_limit(action, margin=4.0, ceiling=1 << 20)

    async def stop(self) -> None:
        """Close every connection, stop serving and release the sim."""
        if getattr(self, "_server", None) is None:
            return
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                await self._server.wait_closed()
        self._server = None
        with contextlib.suppress(Exception):
            await self._sim(self.close)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- the agent side --------------------------------------------------------
    def _metadata_frame(self) -> bytes:
        meta = dict(self.metadata or {})
        meta.update(
            claim_required=True,
            protocol=PROTOCOL,
            num_envs=self.num_envs,
            contract=self._contract_obj.to_dict() if self._contract_obj else None,
        )
        return pack(meta)

    async def _serve_connection(self, ws: ServerConnection) -> None:
        slot: _Slot | None = None
        try:
            await ws.send(self._metadata_frame())
            try:
                async with asyncio.timeout(self.claim_timeout):
                    raw = await ws.recv()
            except TimeoutError:
                raise BridgeError(
                    f"no claim frame within {self.claim_timeout} s: after the metadata frame "
                    'send {"claim": <token from reset()>} (or {"claim": None} on a one-slot sim)'
                ) from None
            claim = self._decode(raw)
            if not isinstance(claim, dict) or "claim" not in claim:
                raise BridgeError(
                    'the first frame must be {"claim": <token>}, got '
                    f"{_describe(claim)}; claim the slot token returned by reset()"
                )
            slot = self._resolve(claim["claim"])
            if claim["claim"] is None and slot.token_required:
                slot = None
                raise BridgeError(
                    "a claim without a token is refused: this episode was started through the "
                    "control channel, which handed its agent a slot token; claim with that token"
                )
            if slot.ws is not None:
                slot = None
                raise BridgeError(
                    "that slot already has a live agent connection; one agent drives a slot "
                    "(a second connection or a reused token is refused)"
                )
            if slot.state is not SlotState.CLAIMED:
                reason = slot.reason
                slot = None
                raise BridgeError(
                    f"that slot's episode is over ({reason}); reset() for a new token"
                )
            slot.ws, slot.state, slot.action = ws, SlotState.LIVE, None
            await self._send_row(slot, await self._sim(self.get_observation))
            await self._maybe_step()
            while True:
                if self.idle_timeout is None:
                    frame = await ws.recv()
                else:
                    try:
                        async with asyncio.timeout(self.idle_timeout):
                            frame = await ws.recv()
                    except TimeoutError:
                        raise BridgeError(
                            f"no action within {self.idle_timeout} s; the slot is released"
                        ) from None
                action = self._decode_action(frame)
                if slot.state is not SlotState.LIVE:
                    raise BridgeError(
                        f"action after the episode ended ({slot.reason}); stop when "
                        "terminated is true"
                    )
                slot.action = action
                await self._maybe_step()
        except websockets.ConnectionClosed:
            pass
        except BridgeError as exc:
            await _send_error(ws, f"robot env error: {exc}")
        except Exception:
            await _send_error(ws, traceback.format_exc())
        finally:
            if slot is not None and slot.ws is ws:
                slot.ws = None
                slot.action = None
                if slot.state is SlotState.LIVE:
                    slot.state, slot.reason = SlotState.DONE, "agent disconnected"
                await self._maybe_step()
            release_memory()

    def _decode(self, frame: Any) -> Any:
        if isinstance(frame, str):
            raise BridgeError(
                f"got a text frame ({frame[:80]!r}); text frames are errors on openpi/0, "
                "send msgpack binary frames"
            )
        try:
            return unpack(frame)
        except WireError as exc:
            raise BridgeError(str(exc)) from None

    def _decode_action(self, frame: Any) -> np.ndarray:
        msg = self._decode(frame)
        if not isinstance(msg, dict) or "actions" not in msg:
            raise BridgeError(f'expected {{"actions": array}}, got {_describe(msg)}')
        try:
            action = np.asarray(msg["actions"], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise BridgeError(f"actions must be numeric: {exc}") from None
        size = self.action_size
        flat = action.reshape(-1)
        if action.ndim > 2 or (action.ndim == 2 and action.shape[0] != 1):
            raise BridgeError(
                f"got an action of shape {action.shape}; this bridge steps one action per "
                f"tick: send shape [{size or 'A'}] (use an agent-side chunk queue for chunks)"
            )
        if size is not None and flat.size != size:
            raise BridgeError(
                f"action has {flat.size} values, the contract's action space has {size}; "
                f"send shape [{size}]"
            )
        if not np.isfinite(flat).all():
            raise BridgeError("action contains NaN or inf")
        return flat

    def _resolve(self, token: Any) -> _Slot:
        claimed = [s for s in self._slots if s.token is not None]
        if token is None:
            if len(self._slots) == 1 and len(claimed) == 1:
                return claimed[0]
            raise BridgeError(
                f"a claim without a token needs a one-slot sim with one episode; this sim has "
                f"{self.num_envs} slots and {len(claimed)} claimed: pass the token from reset()"
            )
        if not isinstance(token, str):
            raise BridgeError(f"claim token must be a string, got {type(token).__name__}")
        for s in claimed:
            if secrets.compare_digest(s.token or "", token):
                return s
        raise BridgeError("unknown or expired slot token; call reset() and claim the new token")

    async def _send_row(self, slot: _Slot, batch: tuple[Any, ...] | None) -> None:
        """Send one slot's row of a batched observation; a terminated slot leaves the barrier."""
        ws = slot.ws
        if ws is None:
            return
        if batch is None:
            raise BridgeError("get_observation() returned None: the sim has no observation yet")
        data, terminated = batch[0], batch[1]
        i, n = slot.index, self.num_envs
        msg: dict[str, Any] = {}
        for key, value in data.items():
            arr = np.asarray(value)
            msg[key] = arr[i] if arr.ndim >= 1 and arr.shape[0] == n else arr
        done = bool(np.asarray(terminated).reshape(-1)[i if n > 1 else 0])
        msg["terminated"] = done
        if len(batch) > 2 and batch[2] is not None:
            msg["reward"] = float(np.asarray(batch[2]).reshape(-1)[i if n > 1 else 0])
        if done and slot.state is SlotState.LIVE:
            slot.state, slot.reason = SlotState.DONE, "terminated"
        with contextlib.suppress(ConnectionClosed):  # not websockets.X: a lazy import per step
            await send_chunks(ws, pack_chunks(msg))

    # -- the barrier -----------------------------------------------------------
    async def _maybe_step(self) -> None:
        """Step while every participant is ready; re-entrant calls return at once."""
        if self._stepping:
            return
        self._stepping = True
        try:
            while True:
                parts = [s for s in self._slots if s.participant]
                ready = [s for s in parts if s.ready]
                if not ready:
                    self._disarm()
                    return
                if len(ready) < len(parts):
                    self._arm()
                    return
                await self._step(ready)
        finally:
            self._stepping = False

    def _arm(self) -> None:
        if self._watchdog is None:
            loop = asyncio.get_running_loop()
            self._watchdog = loop.call_later(
                self.step_timeout, lambda: self._spawn(self._expire_laggards())
            )

    def _disarm(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    async def _expire_laggards(self) -> None:
        self._watchdog = None
        for s in self._slots:
            if s.participant and not s.ready:
                why = "never connected" if s.state is SlotState.CLAIMED else "never acted"
                await self._fail(
                    s,
                    f"robot env error: slot timed out: its agent {why} within "
                    f"{self.step_timeout} s while other slots waited",
                    reason=f"timed out ({why})",
                )
        await self._maybe_step()

    async def _fail(self, slot: _Slot, message: str, *, reason: str) -> None:
        ws = slot.ws
        slot.state, slot.reason, slot.action, slot.ws = SlotState.DONE, reason, None, None
        if ws is not None:
            await _send_error(ws, message)
            self._spawn(ws.close())

    async def _step(self, acting: list[_Slot]) -> None:
        self._disarm()
        size = len(acting[0].action) if acting[0].action is not None else 1
        rows = np.empty((self.num_envs, size), np.float32)
        hold = None
        for s in self._slots:
            if s.action is not None:
                rows[s.index] = s.action
                s.action = None
            else:
                if hold is None:
                    hold = np.asarray(self.hold_action(), np.float32).reshape(-1)
                rows[s.index] = hold
        try:
            await self._sim(self.step, rows)
            batch = await self._sim(self.get_observation)
            if batch is None:
                raise BridgeError("get_observation() returned None after a step")
        except Exception:
            tb = traceback.format_exc()
            for s in self._slots:
                if s.participant:
                    await self._fail(s, tb, reason="the sim raised")
            return
        for s in acting:
            await self._send_row(s, batch)

    # -- the control side (driven by a RobotEndpoint) ----------------------------
    async def claim(self, **task_args: Any) -> dict[str, Any]:
        """Start an episode: a whole-sim reset when no slot is claimed, else the next slot."""
        self._init_serving()
        async with self._lock:
            if all(s.token is None for s in self._slots):
                prompt = await self._sim(self.reset, **task_args)
                for s in self._slots:
                    s.used, s.state, s.reason = False, SlotState.FREE, ""
                self._batch_args = dict(task_args)
                self._batch_prompt = str(prompt or "")
                slot = self._slots[0]
            else:
                slot = self._next_free()
                if self.can_reset_slot():
                    prompt = await self._sim(self.reset_slot, slot.index, **task_args)
                elif task_args != self._batch_args:
                    raise BridgeError(
                        f"this sim resets all {self.num_envs} slots together with "
                        f"{self._batch_args}; a concurrent episode cannot use {task_args}. "
                        "Group rows with identical args, or implement reset_slot()"
                    )
                else:
                    prompt = self._batch_prompt
            slot.token = secrets.token_hex(16)
            slot.state, slot.used, slot.action, slot.reason = SlotState.CLAIMED, True, None, ""
            slot.token_required = False  # control() sets it for a reset it carried
            slot.prompt = str(prompt or "")
            return {"prompt": slot.prompt, "token": slot.token, "slot": slot.index}

    def _next_free(self) -> _Slot:
        reusable = self.can_reset_slot()
        for s in self._slots:
            if s.token is None and (reusable or not s.used):
                return s
        busy = sum(s.token is not None for s in self._slots)
        if busy == self.num_envs:
            raise BridgeError(
                f"all {self.num_envs} slots are claimed: a reset past the last slot fails; "
                "grade a finished episode with result() first, or serve more num_envs"
            )
        raise BridgeError(
            f"no free slot: {busy} of {self.num_envs} are claimed and the rest finished "
            "episodes of this batch; this sim resets all slots together, so a new episode "
            "starts once every slot is released (or implement reset_slot())"
        )

    async def release(self, token: str | None = None) -> dict[str, Any]:
        """Grade a slot's episode and free the slot."""
        async with self._lock:
            slot = self._resolve(token)
            grades = await self._sim(self.result_slots)
            grade = dict(grades[slot.index])
            ws = slot.ws
            slot.token, slot.ws, slot.action = None, None, None
            slot.state, slot.reason, slot.token_required = SlotState.FREE, "released", False
            if ws is not None:
                self._spawn(ws.close())
        await self._maybe_step()
        return grade

    async def control(self, conn: Connection, method: str, params: dict[str, Any]) -> Any:
        """The control side channel's methods."""
        if method == "info":
            return {
                "url": self.url,
                "contract": self._contract_obj.to_dict() if self._contract_obj else None,
                "num_envs": self.num_envs,
                "protocol": PROTOCOL,
            }
        if method == "reset":
            grant = await self.claim(**params)
            # no await since claim() returned: no anonymous claim can slip in before this
            self._slots[grant["slot"]].token_required = True
            return grant
        if method == "result":
            return await self.release(params.get("token"))
        if method == "slots":
            return [
                {"index": s.index, "state": s.state.value, "reason": s.reason} for s in self._slots
            ]
        raise BridgeError(f"unknown control method {method!r}; known: info, reset, result, slots")


def _describe(obj: Any) -> str:
    if isinstance(obj, dict):
        return f"a map with keys {sorted(map(str, obj))[:8]}"
    return f"a {type(obj).__name__}"


async def _send_error(ws: ServerConnection, message: str) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(5):
            await ws.send(message)


# -- the sim program -------------------------------------------------------------
async def run_bridge(
    bridge: RobotBridge,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    control_host: str = "127.0.0.1",
    control_port: int = 0,
    announce: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Serve ``bridge`` and its control channel until cancelled."""
    url = await bridge.start(host, port)
    server = await serve_rpc(bridge.control, control_host, control_port)
    try:
        cport = next(iter(server.sockets)).getsockname()[1]
        if announce is not None:
            announce({"url": url, "control": f"tcp://{control_host}:{cport}"})
        await asyncio.Event().wait()
    finally:
        server.close()
        await bridge.stop()


def serve_bridge(
    bridge: RobotBridge,
    *,
    host: str | None = None,
    port: int | None = None,
    control_port: int = 0,
    lifeline: bool | None = None,
) -> None:
    """Serve ``bridge`` from this (main) thread until SIGTERM, Ctrl-C or, with
    ``lifeline`` (default: ``$PYTEST_HUD_LIFELINE == "1"``, set by RobotEndpoint, as are
    ``$PYTEST_HUD_SIM_HOST`` and ``$PYTEST_HUD_SIM_PORT``, the defaults of host and port),
    end-of-file on stdin (the parent died). Announces its addresses on
    stdout as ``PYTEST_HUD_SIM {"url": ..., "control": ...}``.
    """

    tune_allocator()
    if host is None:
        host = os.environ.get("PYTEST_HUD_SIM_HOST") or "127.0.0.1"
    if port is None:
        port = int(os.environ.get("PYTEST_HUD_SIM_PORT") or 0)

    def announce(info: dict[str, Any]) -> None:
        print(f"{ANNOUNCE} {json.dumps(info)}", flush=True)

    serve_until_stopped(
        lambda: run_bridge(
            bridge, host=host, port=port, control_port=control_port, announce=announce
        ),
        lifeline=lifeline,
    )
