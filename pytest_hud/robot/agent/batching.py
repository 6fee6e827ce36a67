"""Batching: many concurrent rollouts, one shared model, one stacked forward per tick. A failing
forward is rerun row by row, so only the callers whose rows raise get the error.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Executor
from typing import TypedDict, Unpack

import numpy as np

from pytest_hud.robot.agent.agent import STEPS_ALONE, EpisodeArgs, EpisodeReport, RobotAgent
from pytest_hud.robot.agent.model import Batch, Model, Row, check_chunk, run_infer, stack_rows
from pytest_hud.robot.agent.pacing import CURRENT, Arrivals, Rollout
from pytest_hud.robot.agent.split import Split
from pytest_hud.robot.contract import Spaces

__all__ = ["BatchedAgent", "BatchedModel"]


class BatchOptions(TypedDict, total=False):
    """BatchedModel's options, which BatchedAgent passes on (see BatchedModel)."""

    max_wait_s: float
    batch_size: int | None
    split_from: int
    pace: bool
    split: str


class BatchedModel(Model):
    """Coalesce concurrent single-row ``ainfer`` calls into batched ``infer`` calls."""

    def __init__(
        self,
        model: Model,
        *,
        max_wait_s: float = 0.05,
        batch_size: int | None = None,
        split_from: int = 8,
        pace: bool = True,
        split: str = "auto",
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.model = model
        #: Rollouts whose sims step alone may run in two halves once this many are live.
        self.split_from = split_from
        #: Whether they do: "auto" runs halves, one batch where measured faster (split.py).
        self.split = Split(split)
        self.max_wait_s = max_wait_s
        #: Wait past ``max_wait_s`` for rollouts predicted to ask within a forward (pacing.py).
        self.pace = pace
        self.batch_size = batch_size
        self._arrivals = Arrivals()
        self._who: dict[asyncio.Future[np.ndarray], Rollout | None] = {}
        self.ensembler = getattr(model, "ensembler", None)
        self.n_action_steps = getattr(model, "n_action_steps", None)
        self.n_obs_steps = getattr(model, "n_obs_steps", 1)
        self.live = 0  # rollouts that may still queue a row
        self._pending: list[tuple[dict[str, object], asyncio.Future[np.ndarray]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._busy = False
        self._alone: set[asyncio.Future[np.ndarray]] = set()  # rows whose sims step alone
        #: Sizes of the forwards run so far (for reports and benchmarks).
        self.batches: list[int] = []
        self.forward_s = 0.0
        #: Seconds the wrapped model's ``infer`` has run (finished forwards), measured on
        #: the thread that runs it; see :meth:`busy`.
        self.busy_s = 0.0
        self._busy_since: float | None = None  # start of the forward running now
        self._busy_lock = threading.Lock()  # the model thread writes, the loop reads
        self._span_start: float | None = None  # when the first rollout began

    def busy_seconds(self, now: float | None = None) -> float:
        """Seconds the forward has run so far, the one running now included."""
        now = time.monotonic() if now is None else now
        with self._busy_lock:
            since = self._busy_since
            return self.busy_s + (max(now - since, 0.0) if since is not None else 0.0)

    def busy(self) -> dict[str, float]:
        """How much of the wall time since the first rollout began the forward has run.

        ``fraction`` near 1 means the policy is the bottleneck (sims never hold it up);
        well below it, rollouts wait on sims, round trips or the event loop.
        """
        now = time.monotonic()
        span = now - self._span_start if self._span_start is not None else 0.0
        busy = self.busy_seconds(now)
        return {"busy_s": busy, "span_s": span, "fraction": busy / span if span > 0 else 0.0}

    def bind(self, spaces: Spaces) -> None:
        self.model.bind(spaces)

    def infer(self, batch: Batch) -> np.ndarray:
        return self.model.infer(batch)

    def _timed_infer(self, batch: Batch) -> np.ndarray:
        """The wrapped model's forward, timed where it runs (two clock reads a forward)."""
        with self._busy_lock:
            start = self._busy_since = time.monotonic()
        try:
            return self.model.infer(batch)
        finally:
            with self._busy_lock:
                self.busy_s += time.monotonic() - start
                self._busy_since = None

    def executor(self) -> Executor | None:
        return self.model.executor()

    @contextlib.contextmanager
    def session(self) -> Iterator[BatchedModel]:
        """Count one live rollout for as long as the block runs."""
        self.live += 1
        if self._span_start is None:
            self._span_start = time.monotonic()
        rollout = Rollout()
        self._arrivals.live.add(rollout)
        token = CURRENT.set(rollout)
        try:
            yield self
        finally:
            CURRENT.reset(token)
            self._arrivals.live.discard(rollout)
            self.live -= 1
            self._maybe_flush()

    async def ainfer(self, row: Row) -> np.ndarray:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[np.ndarray] = loop.create_future()
        rollout = CURRENT.get()
        self._arrivals.asked(rollout, loop.time())
        self._pending.append((row, fut))
        self._who[fut] = rollout
        if STEPS_ALONE.get():
            self._alone.add(fut)
        if len(self._pending) == 1 and self._timer is None:
            self._timer = loop.call_later(self.max_wait_s, self._waited)
        self._maybe_flush()
        try:
            return await fut
        finally:
            self._who.pop(fut, None)

    def _maybe_flush(self) -> None:
        if self._due():
            self._flush_now()

    def _due(self) -> bool:
        """Whether the queued rows should run as soon as the policy is free: a full
        batch, every live rollout, or half of them when all queued rows step alone."""
        n = len(self._pending)
        if not n:
            return False
        if (self.batch_size is not None and n >= self.batch_size) or n >= max(self.live, 1):
            return True
        if not self.split.halves or self.live < self.split_from or n < -(-self.live // 2):
            return False
        return all(fut in self._alone for _, fut in self._pending)

    def _waited(self) -> None:
        """The fixed window is over: run the queued rows now, or, when every missing
        rollout is predicted to ask within a forward's time, at that time."""
        self._timer = None
        if self.pace and self._pending and not self._busy:
            loop = asyncio.get_running_loop()
            queued = [self._who.get(fut) for _, fut in self._pending]
            until = self._arrivals.hold_until(queued, loop.time())
            if until is not None and until > loop.time():
                self._timer = loop.call_at(until, self._flush_now)
                return
        self._flush_now()

    def _flush_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending or self._busy:
            return
        # One forward stacks rows of one layout (keys, shapes, dtypes): the oldest row's.
        # Rows of another layout (a rollout on another env) wait for the next forward.
        take = self.batch_size or len(self._pending)
        first = _layout(self._pending[0][0])
        rows: list[tuple[dict[str, object], asyncio.Future[np.ndarray]]] = []
        rest: list[tuple[dict[str, object], asyncio.Future[np.ndarray]]] = []
        for item in self._pending:
            (rows if len(rows) < take and _layout(item[0]) == first else rest).append(item)
        self._pending = rest
        alone = all(fut in self._alone for _, fut in rows)
        self._alone.difference_update(fut for _, fut in rows)
        self._busy = True
        task = asyncio.ensure_future(self._forward(rows, alone))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forward(
        self, rows: list[tuple[Row, asyncio.Future[np.ndarray]]], alone: bool = False
    ) -> None:
        try:
            start = time.monotonic()
            batch = stack_rows([row for row, _ in rows])
            out = await run_infer(self.model, batch, self._timed_infer)
            chunks = check_chunk(out, len(rows), None, type(self.model).__name__)
            took = time.monotonic() - start
            self.forward_s += took
            now = asyncio.get_running_loop().time()
            self._arrivals.answered((self._who.get(fut) for _, fut in rows), took, now)
            self.batches.append(len(rows))
            eligible = alone and self.live >= self.split_from
            self.split.answered(len(rows), now, self.live, eligible)
            for i, (_, fut) in enumerate(rows):
                if not fut.done():
                    fut.set_result(chunks[i])
        except Exception as exc:
            if len(rows) == 1:
                if not rows[0][1].done():
                    rows[0][1].set_exception(exc)
            else:
                await self._rows_alone(rows)
        finally:
            self._busy = False
            if self._pending:  # rows queued while this forward ran
                if self._due():
                    self._flush_now()
                elif self._timer is None:
                    loop = asyncio.get_running_loop()
                    self._timer = loop.call_later(self.max_wait_s, self._waited)

    async def _rows_alone(self, rows: list[tuple[Row, asyncio.Future[np.ndarray]]]) -> None:
        """Rerun a failed forward's rows one by one, so only the rows that raise fail.

        One client's bad row (a NaN the model refuses, a malformed prompt) used to fail
        every client batched with it (3 of 3 trials). A failure costs N extra forwards;
        a forward that succeeds costs nothing more.
        """
        for row, fut in rows:
            if fut.done():  # its caller gave up
                continue
            try:
                out = await run_infer(self.model, stack_rows([row]), self._timed_infer)
                chunk = check_chunk(out, 1, None, type(self.model).__name__)[0]
            except Exception as exc:
                if not fut.done():
                    fut.set_exception(exc)
                continue
            self.batches.append(1)
            if not fut.done():
                fut.set_result(chunk)


def _layout(row: Row) -> tuple[object, ...]:
    """What must match for rows to stack: keys in order, and each array's shape and dtype."""
    return tuple(
        (k, v.shape, v.dtype.str) if isinstance(v, np.ndarray) else (k, type(v))
        for k, v in row.items()
    )


class BatchedAgent(RobotAgent):
    """Many concurrent rollouts of one RobotAgent around one shared BatchedModel.

    Wraps ``agent`` without changing it: episodes run on a shallow copy of it whose model
    is the batched one (the copy shares the agent's observers list and settings).
    """

    def __init__(self, agent: RobotAgent, **options: Unpack[BatchOptions]) -> None:
        model = agent.model
        if not isinstance(model, BatchedModel):
            model = BatchedModel(model, **options)
        super().__init__(model, name=agent.name)
        self.agent = copy.copy(agent)
        self.agent.model = model
        self.observers = agent.observers

    @property
    def batched(self) -> BatchedModel:
        assert isinstance(self.model, BatchedModel)
        return self.model

    async def run_episode(
        self, capability: str | dict[str, object], **episode: Unpack[EpisodeArgs]
    ) -> EpisodeReport:
        if episode.get("settings") is None:  # an agent of an older shape takes none
            episode.pop("settings", None)
        model = self.batched
        with model.session():
            start = time.monotonic()
            busy0 = model.busy_seconds(start)
            report = await self.agent.run_episode(capability, **episode)
            end = time.monotonic()
            busy1 = model.busy_seconds(end)
        whole = model.busy()
        # this episode's share, and the process-wide figures so far (pid tells -n N apart)
        report.extra["policy_busy"] = {
            "episode": round((busy1 - busy0) / (end - start), 4) if end > start else 0.0,
            "busy_s": round(whole["busy_s"], 3),
            "span_s": round(whole["span_s"], 3),
            "pid": os.getpid(),
            "halves": model.split.halves,  # the way its forwards ran at the episode's end
        }
        return report
