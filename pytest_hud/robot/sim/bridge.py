"""RobotBridge: the env side of the openpi/0 wire. Hooks run on the event-loop thread (the main
thread), so thread-affine sims are safe; ``offload = True`` moves them to a sim thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import TYPE_CHECKING, TypedDict, TypeVar
from urllib.parse import parse_qsl, urlparse

import websockets
from websockets.asyncio.server import serve

from pytest_hud.errors import BridgeError
from pytest_hud.plumbing.auth import derive, same, server_secret
from pytest_hud.plumbing.rpc import Connection
from pytest_hud.plumbing.tracebacks import format_exc
from pytest_hud.robot.contract import Contract
from pytest_hud.robot.sim.barrier import SlotBarrier
from pytest_hud.robot.sim.cameras import encode_frames
from pytest_hud.robot.sim.messages import (
    _describe,
    _send_error,
    decode_action,
    decode_frame,
)
from pytest_hud.robot.sim.slots import AgentConnection, SlotState, _Slot, next_free, resolve_slot
from pytest_hud.robot.wire.codec import (
    PROTOCOL,
    frame_limit,
    pack,
    release_memory,
    ws_options,
)
from pytest_hud.robot.wire.deadline import Watchdog
from pytest_hud.robot.wire.inproc import InprocServerEnd

if TYPE_CHECKING:
    from websockets.asyncio.server import Server, ServerConnection
    from websockets.http11 import Request, Response

__all__ = ["ANNOUNCE", "BridgeError", "Grant", "RobotBridge"]

T = TypeVar("T")


class Grant(TypedDict):
    """A claimed slot: the episode's prompt, the token its agent connects with, the slot."""

    prompt: str
    token: str
    slot: int


#: Prefix of the line a sim process prints on stdout once it serves: ``ANNOUNCE {json}``.
ANNOUNCE = "PYTEST_HUD_SIM"


class RobotBridge(SlotBarrier):
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
    #: Agent connections held at once (each waits for its claim or drives a slot); one
    #: more is refused before the WebSocket opens. None: 16 per slot, at least 64.
    max_connections: int | None = None

    contract: Contract | Mapping[str, object] | None = None
    metadata: Mapping[str, object] | None = None

    def halt(self, index: int) -> None:
        """Slot ``index``'s agent left before its episode ended (an operator stop, max
        steps, an error): bring it to rest. A sim just waits; a robot holds still."""

    # -- serving ---------------------------------------------------------------
    def _init_serving(self) -> None:
        if getattr(self, "_slots", None) is not None:
            return
        if not isinstance(self.num_envs, int) or self.num_envs < 1:
            raise BridgeError(f"num_envs must be a positive int, got {self.num_envs!r}")
        self._slots = [_Slot(i) for i in range(self.num_envs)]
        self._server: Server | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._stepping = self._missed = False
        self._watchdog: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._batch_args: dict[str, object] | None = None
        self._batch_prompt = ""
        self._lock: asyncio.Lock = asyncio.Lock()  # serialises claims and releases
        self._contract_obj: Contract | None = None
        self._host = "127.0.0.1"
        self._port = 0
        self._key: str | None = None  # what an agent's url must carry (auth)
        self._open = 0  # agent connections being served
        self._sockets = 0  # of which WebSockets (not an inline agent's in-process pair)

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
        """Where agents connect; it carries the key that admits them (the session's
        bridge key, :mod:`pytest_hud.plumbing.auth`) unless the session runs ``--no-auth``."""
        if getattr(self, "_server", None) is None:
            raise BridgeError("bridge is not serving yet; await start() first")
        base = f"ws://{self._host}:{self._port}"
        return f"{base}/?key={self._key}" if self._key else base

    async def _sim(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
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
        secret = server_secret()
        self._key = derive(secret, "bridge") if secret else None
        self._server = await serve(
            self._serve_connection,
            host,
            port,
            ping_interval=None,
            process_request=self._admit,
            **ws_options(self._max_frame()),
        )
        sock = next(iter(self._server.sockets))
        self._host, self._port = host, sock.getsockname()[1]
        return self.url

    def _admit(self, connection: ServerConnection, request: Request) -> Response | None:
        """Before the WebSocket opens: refuse a peer without the bridge key (its url's
        ``?key=``, or openpi-client's ``Authorization: Api-Key``) and one past the
        connection cap, with a one-line HTTP answer and no traceback."""
        if self._key is not None:
            given = dict(parse_qsl(urlparse(request.path).query)).get("key")
            header = request.headers.get("Authorization", "")
            if header.startswith("Api-Key "):
                given = given or header[len("Api-Key ") :]
            if not same(self._key, given):
                return connection.respond(
                    HTTPStatus.FORBIDDEN,
                    "this robot bridge serves only its session's agents: connect to the url "
                    "the env server handed out (it carries the key)\n",
                )
        cap = self.max_connections or max(64, 16 * self.num_envs)
        if self._open >= cap:
            return connection.respond(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"this robot bridge already serves {self._open} connections (limit {cap})\n",
            )
        return None

    def _max_frame(self) -> int:
        """An agent only ever sends a claim and one action per frame: cap frames at that.

        From the contract's action size (a few KB); 1 MB if the contract leaves it open.
        """
        contract = self._contract_obj
        action = contract.payload_bytes("action") if contract is not None else None
        return frame_limit(action, margin=4.0, ceiling=1 << 20)

    async def stop(self) -> None:
        """Close every connection, stop serving and release the sim."""
        server = getattr(self, "_server", None)
        if server is None:
            return
        if self._watchdog is not None:
            self._watchdog.cancel()
        server.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                await server.wait_closed()
        self._server = None
        with contextlib.suppress(Exception):
            await self._sim(self.close)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
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
            slots_step_alone=self._alone(),
        )
        return pack(meta)

    async def _serve_connection(self, ws: AgentConnection) -> None:
        slot: _Slot | None = None
        idle: Watchdog | None = None
        self._open += 1
        on_socket = type(ws) is not InprocServerEnd
        self._sockets += on_socket
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
            claim = decode_frame(raw)
            if not isinstance(claim, dict) or "claim" not in claim:
                raise BridgeError(
                    'the first frame must be {"claim": <token>}, got '
                    f"{_describe(claim)}; claim the slot token returned by reset()"
                )
            slot = resolve_slot(self._slots, claim["claim"])
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
            idle = Watchdog()  # one timer for the connection, not one per action
            if isinstance(ws, InprocServerEnd):  # an inline agent: actions in its own task
                ws.direct = functools.partial(self._direct_action, ws, slot, idle)
            await self._send_row(slot, await self._sim(self.get_observation))
            await self._maybe_step()
            while True:
                if self.idle_timeout is None:
                    frame = await ws.recv()
                else:
                    try:
                        frame = await idle.wait(ws.recv(), self.idle_timeout)
                    except TimeoutError:
                        raise BridgeError(
                            f"no action within {self.idle_timeout} s; the slot is released"
                        ) from None
                await self._on_action(slot, frame)
        except websockets.ConnectionClosed:
            pass
        except BridgeError as exc:
            await _send_error(ws, f"robot env error: {exc}")
        except Exception:
            await _send_error(ws, format_exc())
        finally:
            if isinstance(ws, InprocServerEnd):
                ws.direct = None
            if idle is not None:
                idle.close()
            self._open -= 1
            self._sockets -= on_socket
            if slot is not None and slot.ws is ws:
                slot.ws = None
                slot.action = None
                if slot.state is SlotState.LIVE:
                    slot.state, slot.reason = SlotState.DONE, "agent disconnected"
                    with contextlib.suppress(Exception):  # the grade still comes
                        await self._sim(self.halt, slot.index)
                await self._maybe_step()
            release_memory()

    async def _on_action(self, slot: _Slot, frame: object) -> None:
        """One action frame of ``slot``'s agent: step once every participant is ready."""
        action = decode_action(frame, self.action_size)
        if slot.state is not SlotState.LIVE:
            raise BridgeError(
                f"action after the episode ended ({slot.reason}); stop when terminated is true"
            )
        slot.action = action
        await self._acted(slot)

    async def _direct_action(
        self, ws: InprocServerEnd, slot: _Slot, idle: Watchdog, message: object
    ) -> None:
        """An inline agent's action, handled in the agent's own task: no hand-off to the
        connection's task and back (two turns of the loop a step). Only where nothing in
        a step can suspend, so the agent's cancellation cannot cut a step in half: no sim
        thread and no WebSocket agent served; otherwise it is queued as a frame."""
        if self._executor is not None or self._sockets:
            ws.inbox.put(message)
            return
        if self.idle_timeout is not None:
            idle.extend(self.idle_timeout)
        try:
            await self._on_action(slot, message)
        except Exception as exc:  # as the connection's loop does: an error frame, then close
            ws.direct = None
            text = f"robot env error: {exc}" if isinstance(exc, BridgeError) else format_exc()
            await _send_error(ws, text)
            await ws.close()

    # -- the control side (driven by a RobotEndpoint) ----------------------------
    async def claim(self, **task_args: object) -> Grant:
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
                slot = next_free(self._slots, self.can_reset_slot())
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
            return Grant(prompt=slot.prompt, token=slot.token, slot=slot.index)

    async def release(self, token: str | None = None) -> dict[str, object]:
        """Grade a slot's episode and free the slot."""
        async with self._lock:
            slot = resolve_slot(self._slots, token)
            grades = await self._sim(self.result_slots)
            grade = dict(grades[slot.index])
            ws = slot.ws
            slot.token, slot.ws, slot.action = None, None, None
            slot.state, slot.reason, slot.token_required = SlotState.FREE, "released", False
            if ws is not None:
                self._spawn(ws.close())
        await self._maybe_step()
        return grade

    async def read_cameras(self) -> dict[str, object]:
        """The cameras now, while no episode holds the sim (an operator's reset gate shows
        them live): ``{"cameras": {name: {"jpeg", "width", "height"}}}`` (empty: it has no
        camera), or ``{"cameras": None, "why": ...}`` when it cannot be read now. Never
        claims a slot; a claim waits for the read (one lock serialises them)."""
        self._init_serving()
        async with self._lock:
            if any(s.token is not None for s in self._slots):
                return {"cameras": None, "why": "an episode holds the robot"}
            frames = await self._sim(self.camera_frames)
            if frames is None:
                return {
                    "cameras": None,
                    "why": f"{type(self).__name__} reads its cameras only while an episode runs",
                }
            return {"cameras": encode_frames(frames)}

    async def control(
        self, conn: Connection | None, method: str, params: dict[str, object]
    ) -> object:
        """The control side channel's methods (``conn`` is None for an inline endpoint's calls)."""
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
            token = params.get("token")
            if not isinstance(token, str):  # on a one-slot sim None would be "the" slot
                raise BridgeError(
                    "result needs the slot token reset() returned, got "
                    f"{_describe(token)}; no slot is graded or freed without it"
                )
            return await self.release(token)
        if method == "slots":
            return [
                {"index": s.index, "state": s.state.value, "reason": s.reason} for s in self._slots
            ]
        if method == "cameras":
            return await self.read_cameras()
        raise BridgeError(
            f"unknown control method {method!r}; known: info, reset, result, slots, cameras"
        )
