"""The lockstep barrier over a vectorized sim's slots; after ``step_timeout`` idle slots fail, so
one lost agent cannot stall its peers. Runs on the serve loop: no locks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from websockets.exceptions import ConnectionClosed

from pytest_hud.errors import BridgeError
from pytest_hud.plumbing.tracebacks import format_exc
from pytest_hud.robot.sim.hooks import Batched, SimHooks
from pytest_hud.robot.sim.messages import _send_error, slot_row
from pytest_hud.robot.sim.slots import SlotState, _Slot
from pytest_hud.robot.wire.codec import pack_chunks
from pytest_hud.robot.wire.inproc import InprocServerEnd
from pytest_hud.robot.wire.vectored import send_chunks

__all__: list[str] = []


T = TypeVar("T")


class SlotBarrier(SimHooks):
    """RobotBridge's stepping: a mixin over the slot state the bridge sets up.

    The bridge provides the attributes below (``_init_serving``) and the two helpers
    declared under ``TYPE_CHECKING``: running a hook on the sim thread and spawning a task
    it cancels at ``stop()``.
    """

    num_envs: int
    step_timeout: float
    _slots: list[_Slot]
    _stepping: bool
    _missed: bool  # an action came while a step was under way: look again after it
    _watchdog: asyncio.TimerHandle | None
    _executor: object | None  # the sim thread's executor, None when the sim runs on the loop

    if TYPE_CHECKING:

        async def _sim(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T: ...

        def _spawn(self, coro: Coroutine[object, object, None]) -> None: ...

    def _alone(self) -> bool:
        """Whether slots step without a barrier (a vectorized sim with ``step_slots``)."""
        return self.num_envs > 1 and self.can_step_slots()

    async def _send_row(self, slot: _Slot, batch: Batched | None) -> None:
        """Send one slot's row of a batched observation; a terminated slot leaves the barrier."""
        ws = slot.ws
        if ws is None:
            return
        if batch is None:
            raise BridgeError("get_observation() returned None: the sim has no observation yet")
        msg, done = slot_row(batch, slot.index, self.num_envs)
        if done and slot.state is SlotState.LIVE:
            slot.state, slot.reason = SlotState.DONE, "terminated"
        with contextlib.suppress(ConnectionClosed):  # not websockets.X: a lazy import per step
            if type(ws) is InprocServerEnd:  # an inline agent: the message itself, queued
                ws.post_message(msg)
            else:
                await send_chunks(ws, pack_chunks(msg))

    async def _acted(self, slot: _Slot) -> None:
        """``slot``'s agent acted: step now. A one-slot sim or one whose slots step alone
        steps that slot at once, without looking at the others (this runs every step);
        a barrier waits for every participant (:meth:`_maybe_step`)."""
        if self._stepping or not (self.num_envs == 1 or self._alone()):
            await self._maybe_step()
            return
        self._stepping, self._missed = True, False
        try:
            await self._step([slot])
        finally:
            self._stepping = False
        if self._missed:  # the step suspended (a sim thread, a socket) and others acted
            await self._maybe_step()

    async def _maybe_step(self) -> None:
        """Step while every participant is ready; re-entrant calls return at once."""
        if self._stepping:
            self._missed = True
            return
        self._stepping = True
        try:
            while True:
                parts, ready = 0, []
                for s in self._slots:  # one pass: this runs every step
                    if s.participant:
                        parts += 1
                        if s.ready:
                            ready.append(s)
                if not ready:
                    self._disarm()
                    return
                if len(ready) < parts and not self._alone():
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
        alone = self._alone()
        try:
            rows: np.ndarray
            indices: list[int] | None = None
            first = acting[0]
            if len(acting) == 1 and first.action is not None and (self.num_envs == 1 or alone):
                rows = first.action.reshape(1, -1).copy()  # the sim's own: it may write to it
                first.action = None
                indices = [first.index] if alone else None
            elif alone:  # only the slots that acted, each with its own action
                rows = np.stack([s.action for s in acting if s.action is not None])
                for s in acting:
                    s.action = None
                indices = [s.index for s in acting]
            else:
                rows, indices = self._barrier_rows(), None
            if self._executor is None:  # the sim runs here: no hop through a coroutine
                batch = self._advance(indices, rows)
            else:
                batch = await self._sim(self._advance, indices, rows)
        except Exception:
            tb = format_exc()
            for s in self._slots:
                if s.participant:
                    await self._fail(s, tb, reason="the sim raised")
            return
        for s in acting:
            await self._send_row(s, batch)

    def _advance(self, indices: list[int] | None, rows: np.ndarray) -> Batched:
        """One step of the sim (those slots, or all of them) and the observation after it:
        on the sim thread if there is one, in one hop."""
        if indices is None:
            self.step(rows)
        else:
            self.step_slots(indices, rows)
        batch = self.get_observation()
        if batch is None:
            raise BridgeError("get_observation() returned None after a step")
        return batch

    def _barrier_rows(self) -> np.ndarray:
        """Every slot's row for a barrier step: its action, or ``hold_action()`` if idle."""
        acted = next((s.action for s in self._slots if s.action is not None), None)
        rows = np.empty((self.num_envs, len(acted) if acted is not None else 1), np.float32)
        hold = None
        for s in self._slots:
            if s.action is not None:
                rows[s.index] = s.action
                s.action = None
            else:
                if hold is None:
                    hold = np.asarray(self.hold_action(), np.float32).reshape(-1)
                rows[s.index] = hold
        return rows
