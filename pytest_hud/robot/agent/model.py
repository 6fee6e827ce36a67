"""Model: a stateless policy checkpoint. ``infer`` runs one batched forward, ``ainfer`` one row
off the event loop; per-episode state belongs to the agent.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor

import numpy as np

from pytest_hud.errors import ModelOutputError
from pytest_hud.plumbing.threads import DaemonExecutor, abandon, model_threads
from pytest_hud.robot.agent.ensembler import Ensembler
from pytest_hud.robot.contract import Spaces

__all__ = [
    "Batch",
    "Model",
    "ModelOutputError",
    "RandomModel",
    "Row",
    "ZeroModel",
    "check_chunk",
    "episode_task",
    "stack_rows",
]

#: The task running the current episode (set by RobotAgent.run_episode). The timed loop
#: runs each inference in a task of its own; a model that holds a connection per episode
#: keys it by this task, not by whichever task asks.
EPISODE_TASK: contextvars.ContextVar[asyncio.Task[object] | None] = contextvars.ContextVar(
    "pytest_hud_episode_task", default=None
)


def episode_task() -> asyncio.Task[object] | None:
    """The task whose episode the caller serves: the episode's, else the caller's own."""
    return EPISODE_TASK.get() or asyncio.current_task()


#: One row of model input, as an adapter makes it from one observation: arrays by the model's
#: input names and the prompt (a vla-eval row nests its cameras' images in a map).
Row = dict[str, object]
#: Rows stacked for one forward (:func:`stack_rows`): an ``[N, ...]`` array per numeric input,
#: the list of the N values of any other (the prompts).
Batch = dict[str, np.ndarray | list[object]]


def stack_rows(rows: Sequence[Mapping[str, object]]) -> Batch:
    """Rows of per-step inputs stacked into one batch: arrays gain a leading N axis,
    anything else (prompts) becomes a list of N values."""
    if not rows:
        raise ValueError("cannot stack zero rows")
    keys = list(rows[0])
    for i, row in enumerate(rows[1:], 1):
        if list(row) != keys:
            raise ValueError(f"row {i} has keys {sorted(row)}, row 0 has {sorted(keys)}")
    batch: Batch = {}
    for key in keys:
        values = [row[key] for row in rows]
        if isinstance(values[0], np.ndarray | np.generic | int | float) and not isinstance(
            values[0], bool
        ):
            batch[key] = np.stack([np.asarray(v) for v in values])
        else:
            batch[key] = values
    return batch


def check_chunk(out: object, n: int, action_size: int | None, who: str = "model") -> np.ndarray:
    """``out`` as float32 ``[N, T, A]``; a clear error naming expected vs got otherwise."""
    arr = np.asarray(out, dtype=np.float32)
    given = arr.shape
    if arr.ndim == 2 and n == 1:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[0] != n:
        raise ModelOutputError(
            f"{who}.infer returned shape {given}; expected [N, T, A] = "
            f"[{n}, T, {action_size or 'A'}] (N rows in, one [T, A] action chunk per row out)"
        )
    if action_size is not None and arr.shape[2] != action_size:
        raise ModelOutputError(
            f"{who}.infer returned actions of size {arr.shape[2]}; the env's contract "
            f"declares an action of size {action_size}: wrong checkpoint, or an Adapter "
            "that maps the model's actions onto the env's is missing"
        )
    if arr.shape[1] < 1:
        raise ModelOutputError(f"{who}.infer returned an empty chunk (T = 0)")
    return arr


class Model:
    """Subclass and implement :meth:`infer`; override :meth:`ainfer` only if natively async."""

    #: An Ensembler to reduce overlapping chunks; the agent uses it if it has none itself.
    ensembler: Ensembler | None = None
    #: Whether ``infer`` runs a whole [N, ...] batch in one forward (BatchedModel can wrap it).
    batchable: bool = True
    #: Consecutive observations per row. Above 1, the agent sends the episode's last
    #: ``n_obs_steps`` observations stacked on a new leading axis (``[H, ...]`` per array,
    #: the first observation repeated at the episode's start, as LeRobot fills its queues).
    n_obs_steps: int = 1

    def bind(self, spaces: Spaces) -> None:
        """Called once per episode with the env's spaces (models that need the action space)."""

    def infer(self, batch: Batch) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must implement infer(batch)")

    def executor(self) -> Executor | None:
        """Where :meth:`infer` runs off the event loop; None is the shared daemon model
        threads. Models whose framework wants one thread (torch) return a one-thread
        executor (a :class:`~pytest_hud.plumbing.threads.DaemonExecutor`: exit never waits)."""
        return None

    async def aclose(self) -> None:
        """Release what the model keeps between episodes (a server's connections); the
        session calls it once, at its end, on the loop its episodes ran on."""

    async def ainfer(self, row: Row) -> np.ndarray:
        """One row in, one ``[T, A]`` chunk out; the forward runs off the event loop."""
        out = await run_infer(self, stack_rows([row]))
        return check_chunk(out, 1, None, type(self).__name__)[0]


async def run_infer(
    model: Model, batch: Batch, call: Callable[[Batch], object] | None = None
) -> object:
    """``model.infer(batch)`` on the model's executor, awaited from the event loop.

    Without one, it runs on :func:`~pytest_hud.plumbing.threads.model_threads` (daemon threads:
    a forward that never returns does not hold the process at exit). A caller that is
    cancelled while the forward still runs (a rollout timeout) leaves it abandoned:
    :func:`pytest_hud.plumbing.threads.abandoned` lists it until it returns. ``call`` replaces
    ``model.infer`` (a wrapper that times it where it runs); errors still name ``model``.
    """
    executor = model.executor() or model_threads()
    fut = executor.submit(call or model.infer, batch)
    try:
        return await asyncio.wrap_future(fut)
    except asyncio.CancelledError:
        thread = executor.thread_of(fut) if isinstance(executor, DaemonExecutor) else None
        abandon(fut, f"{type(model).__name__}.infer", thread)
        raise


class _ActionSpaceModel(Model):
    """Built-ins that act from the contract's action space alone."""

    def __init__(self, chunk: int = 1) -> None:
        self.chunk = chunk
        self.low = np.array([-1.0], np.float32)
        self.high = np.array([1.0], np.float32)
        self.size = 1
        self.discrete: int | None = None

    def bind(self, spaces: Spaces) -> None:
        action = spaces.action_feature
        self.size = action.size or 1
        stats = action.stats or {}
        low = np.asarray(stats.get("min", [-1.0] * self.size), np.float32)
        high = np.asarray(stats.get("max", [1.0] * self.size), np.float32)
        self.low = np.broadcast_to(low, (self.size,)).copy()
        self.high = np.broadcast_to(high, (self.size,)).copy()
        n = action.extra.get("n")
        self.discrete = int(n) if n is not None else None

    def _n(self, batch: Batch) -> int:
        for value in batch.values():
            return len(value)
        return 1


class ZeroModel(_ActionSpaceModel):
    """Zeros (clipped into the action bounds): a do-nothing baseline."""

    def infer(self, batch: Batch) -> np.ndarray:
        zero = np.clip(np.zeros(self.size, np.float32), self.low, self.high)
        return np.broadcast_to(zero, (self._n(batch), self.chunk, self.size)).copy()


class RandomModel(_ActionSpaceModel):
    """Uniform samples from the action bounds (integers for a discrete action)."""

    def __init__(self, chunk: int = 1, seed: int | None = None) -> None:
        super().__init__(chunk)
        self.rng = np.random.default_rng(seed)

    def infer(self, batch: Batch) -> np.ndarray:
        shape = (self._n(batch), self.chunk, self.size)
        if self.discrete is not None:
            return self.rng.integers(0, self.discrete, shape).astype(np.float32)
        return self.rng.uniform(self.low, self.high, shape).astype(np.float32)
