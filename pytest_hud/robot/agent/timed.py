"""The timed control loop: one action per tick of a :mod:`~pytest_hud.robot.clock` whether or
not the policy answered. Inference runs beside the ticks (chunk-ahead: the next chunk is asked
for while ``ahead`` actions of the current one remain, as LeRobot's async inference does);
until it answers the rest of the current chunk is sent, then the last action is held. A
chunk that answers late is aligned to the clock: its actions for ticks already passed are
dropped, all but its last (the freshest action there is).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

from pytest_hud.robot.clock import Clock, SimClock, WallClock, monotonic, percentile, rounded
from pytest_hud.robot.wire.client import Observed

__all__ = ["INSTRUCTION", "STOP", "TimedCounters", "Timing", "run_timed"]

#: Set for the length of an attended episode: returns True once the operator asked to
#: stop it. The loop ends the episode at its next tick.
STOP: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "pytest_hud_stop", default=None
)

#: Set for the length of an attended episode: returns the operator's latest instruction to
#: the policy ("" for none: the row's prompt stands); each inference reads it.
INSTRUCTION: contextvars.ContextVar[Callable[[], str] | None] = contextvars.ContextVar(
    "pytest_hud_instruction", default=None
)

#: What one tick does: send ``action``, return the next observation frame.
Act = Callable[[np.ndarray], Awaitable["Frame"]]
#: One inference on the observations seen so far: a ``[T, A]`` chunk. The call itself reads
#: the observations (synchronously); the awaitable it returns runs the forward.
Infer = Callable[[], Awaitable[np.ndarray]]
Frame = Observed


@dataclass(frozen=True)
class Timing:
    """How an episode meets the clock: ``realtime`` ticks on the wall clock; otherwise the
    ticks are sim time and each inference takes ``latency`` seconds of it. ``rate`` (Hz)
    defaults to the contract's ``control_rate``; ``ahead`` (actions left when the next
    chunk is asked for) to half a chunk."""

    realtime: bool = False
    latency: float = 0.0
    rate: float | None = None
    ahead: int | None = None

    def clock(self, contract_rate: float | None) -> Clock:
        rate = self.rate or contract_rate
        if rate is None:
            raise ValueError(
                "a timed loop needs the control rate: the env's contract has no control_rate; "
                "serve it with one (env.gym(..., fps=N)) or set Timing(rate=N)"
            )
        return WallClock(rate) if self.realtime else SimClock(rate, self.latency)

    def describe(self) -> str:
        if self.realtime:
            return "real time"
        return f"sim time, {self.latency * 1000:g} ms inference latency"


@dataclass
class TimedCounters:
    """Per episode: ticks run, held ticks (no fresh action: the last one again), actions
    dropped because their tick had passed when the chunk answered, and each inference's
    latency (wall seconds, or ticks for sim time)."""

    ticks: int = 0
    held: int = 0
    dropped: int = 0
    latencies: list[float] = field(default_factory=list)
    stopped: bool = False

    def summary(self, clock: Clock, timing: Timing) -> dict[str, object]:
        ms = [x * 1000.0 for x in self.latencies]
        out: dict[str, object] = {
            "mode": "realtime" if timing.realtime else "latency",
            "rate_hz": round(1.0 / clock.period, 3),
            "ticks": self.ticks,
            "held_steps": self.held,
            "dropped_actions": self.dropped,
            "infer_ms_p50": rounded(percentile(ms, 0.5)),
            "infer_ms_p95": rounded(percentile(ms, 0.95)),
            "infer_ms_max": rounded(max(ms) if ms else None),
        }
        if timing.realtime:
            out.update(clock.stats.summary())
        else:
            out["latency_ms"] = timing.latency * 1000.0
            out["delay_ticks"] = clock.delay if isinstance(clock, SimClock) else 0
        return out


@dataclass
class _Pending:
    """An inference in flight: the tick whose observation it read, and its answer."""

    started: int
    task: asyncio.Task[np.ndarray] | None = None
    chunk: np.ndarray | None = None
    began: float = 0.0
    finished: float | None = None

    def done(self, _task: object = None) -> None:
        self.finished = monotonic()


async def run_timed(
    frame: Frame,
    infer: Infer,
    act: Act,
    clock: Clock,
    *,
    keep: int | None,
    ahead: int | None,
    steps_left: Callable[[int], bool],
    counters: TimedCounters,
) -> Frame:
    """Tick until the env terminates, ``steps_left(ticks)`` is False or the operator stops;
    returns the last frame. The first chunk is awaited before the first tick (a robot
    waits still for its first command, as with LeRobot's async inference)."""
    stop = STOP.get()

    async def ask(started: int) -> _Pending:
        pending = _Pending(started, began=monotonic())
        forward = infer()  # reads the observations now, before the next tick's action
        if clock.wall:
            pending.task = asyncio.ensure_future(forward)
            pending.task.add_done_callback(pending.done)
        else:  # sim time: awaited now, so the run does not depend on the machine's speed
            pending.chunk = await forward
        return pending

    def trim(chunk: np.ndarray) -> np.ndarray:
        return chunk[:keep] if keep else chunk

    first = await ask(0)
    if first.task is not None:
        first.chunk = await first.task
    assert first.chunk is not None
    counters.latencies.append(_latency(first, clock))
    queue = list(trim(first.chunk))
    threshold = _threshold(ahead, keep, first.chunk)
    pending: _Pending | None = None
    last: np.ndarray | None = None
    try:
        while not frame["terminated"]:
            if stop is not None and stop():
                counters.stopped = True
                break
            if not steps_left(counters.ticks):
                break
            tick = await clock.tick()
            if pending is not None and _answered(pending, clock, tick):
                chunk = trim(_chunk(pending))
                counters.latencies.append(_latency(pending, clock))
                # actions for ticks already gone are dropped, but never the chunk's last:
                # a late answer still replaces what is held (a one-action policy acts)
                stale = min(clock.ticks_since(pending.started), len(chunk) - 1)
                counters.dropped += stale
                queue = list(chunk[stale:])
                pending = None
            if queue:
                action = queue.pop(0)
            else:
                assert last is not None  # the first chunk has at least one action
                action = last
                counters.held += 1
            last = action
            frame = await act(action)
            clock.sent()
            counters.ticks += 1
            if pending is None and len(queue) <= threshold:
                pending = await ask(tick + 1)
    finally:
        if pending is not None and pending.task is not None and not pending.task.done():
            pending.task.cancel()
            with contextlib.suppress(BaseException):
                await pending.task
    return frame


def _answered(pending: _Pending, clock: Clock, tick: int) -> bool:
    if pending.task is not None:
        return pending.task.done()
    assert isinstance(clock, SimClock)
    return tick >= clock.arrives(pending.started)


def _chunk(pending: _Pending) -> np.ndarray:
    if pending.task is not None:
        return pending.task.result()  # an inference's error ends the episode here
    assert pending.chunk is not None
    return pending.chunk


def _latency(pending: _Pending, clock: Clock) -> float:
    if isinstance(clock, SimClock):
        return clock.delay * clock.period
    return (pending.finished or monotonic()) - pending.began


def _threshold(ahead: int | None, keep: int | None, first: np.ndarray) -> int:
    """Actions left when the next chunk is asked for: ``ahead``, else half a chunk."""
    if ahead is not None:
        return ahead
    return max(0, math.floor((keep or len(first)) / 2))
