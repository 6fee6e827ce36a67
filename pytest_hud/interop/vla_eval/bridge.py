"""VlaEvalBridge: serve a vla-eval Benchmark over openpi/0, one benchmark instance per slot,
driven as vla-eval's runner drives it; the contract comes from the first observation.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_hud.errors import BridgeError
from pytest_hud.interop.vla_eval.specs import SPECS_KEY
from pytest_hud.robot.contract import Contract
from pytest_hud.robot.sim.bridge import RobotBridge

__all__ = ["VlaEvalBridge", "benchmark_rows", "build_benchmark", "flatten", "plain"]


def build_benchmark(target: object, params: Mapping[str, Any] | None = None) -> Any:
    """A benchmark instance from a class (built with ``params``) or an instance."""
    if isinstance(target, type):
        return target(**dict(params or {}))
    if params:
        raise TypeError("params= need a Benchmark class; an instance is already built")
    return target


def plain(value: object) -> Any:
    """Numpy scalars/arrays and tuples as JSON-able Python values (a grade crosses RPC)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def benchmark_rows(target: object, episodes: int = 1, **params: object) -> list[dict[str, Any]]:
    """Rows for ``@pytest.mark.hud(tasks=...)``: ``{"task": {...}}`` for each of
    ``get_tasks()`` x ``episodes``, the task carrying ``episode_idx`` as vla-eval's
    orchestrator adds it (JSON-able values only)."""
    bench = build_benchmark(target, params)
    try:
        tasks = bench.get_tasks()
    finally:
        cleanup = getattr(bench, "cleanup", None)
        if cleanup is not None and isinstance(target, type):
            cleanup()
    return [{"task": {**plain(t), "episode_idx": ep}} for t in tasks for ep in range(int(episodes))]


def flatten(obs: Mapping[str, object], prefix: str = "") -> dict[str, np.ndarray]:
    """vla-eval's observation dict as flat wire arrays; strings are dropped."""
    out: dict[str, np.ndarray] = {}
    for key, value in obs.items():
        name = f"{prefix}/{key}" if prefix else str(key)
        if type(value) is np.ndarray and value.dtype == np.float32:  # the common state
            out[name] = value.reshape(-1) if value.ndim != 1 else value
            continue
        if isinstance(value, str | bytes) or value is None:
            continue
        if isinstance(value, Mapping):
            out.update(flatten(value, name))
            continue
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            continue
        if arr.dtype == np.uint8 and arr.ndim >= 2:
            out[name] = arr
        else:
            out[name] = arr.astype(np.float32).reshape(-1)
    return out


@dataclasses.dataclass
class _Episode:
    bench: Any
    task: dict[str, Any] = dataclasses.field(default_factory=dict)
    steps: int = 0
    total: float = 0.0
    reward: float = 0.0
    done: bool = True
    terminated: bool = False
    truncated: bool = False
    metrics: dict[str, Any] | None = None
    #: StepBenchmark's own apply_action/is_done/get_observation, none overridden: the
    #: bridge calls the sync methods they wrap (step, check_done, make_obs) directly.
    plain: bool = False

    def __post_init__(self) -> None:
        kind = type(self.bench)  # a StepBenchmark has step, check_done and make_obs
        self.plain = all(
            getattr(getattr(kind, name, None), "__qualname__", "") == f"StepBenchmark.{name}"
            for name in ("apply_action", "is_done", "get_observation")
        )


class VlaEvalBridge(RobotBridge):
    """A RobotBridge over ``num_envs`` instances of a vla-eval benchmark."""

    def __init__(
        self,
        target: object,
        *,
        params: dict[str, Any] | None = None,
        num_envs: int = 1,
        max_steps: int | None = None,
        fps: float | None = None,
        action_dim: int | None = None,
    ) -> None:
        if not isinstance(target, type) and num_envs != 1:
            raise BridgeError("a benchmark instance serves one slot; pass its class for num_envs>1")
        self.target = target
        self.params = dict(params or {})
        self.num_envs = int(num_envs)
        self.max_steps = max_steps
        self.fps = fps
        self.action_dim = action_dim
        self._eps: list[_Episode] = []
        self._obs: dict[str, np.ndarray] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sync = all(
            callable(getattr(target, m, None)) for m in ("reset", "step", "make_obs", "check_done")
        )
        self.offload = not self._sync  # async benchmarks run on the sim thread's own loop

    # -- the benchmark -------------------------------------------------------------
    def _benches(self) -> list[_Episode]:
        if not self._eps:
            self._eps = [
                _Episode(build_benchmark(self.target, self.params)) for _ in range(self.num_envs)
            ]
            meta = self._eps[0].bench.get_metadata() or {}
            if self.max_steps is None:
                self.max_steps = int(meta.get("max_steps", 300))
        return self._eps

    def _call(self, coro: Any) -> Any:
        """A benchmark coroutine's value: a StepBenchmark's never suspend, so they run
        here at once; any other benchmark's run on the sim thread's own loop."""
        if self._sync:
            try:
                coro.send(None)
            except StopIteration as done:
                return done.value
            coro.close()
            raise BridgeError(
                f"{type(coro).__qualname__} suspended: a StepBenchmark's async methods run "
                "synchronously here; serve an async Benchmark without StepBenchmark's methods"
            )
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def _specs(self, bench: object) -> dict[str, object]:
        out: dict[str, object] = {"benchmark": type(bench).__name__}
        for key, method in (
            ("action_spec", "get_action_spec"),
            ("observation_spec", "get_observation_spec"),
        ):
            with contextlib.suppress(NotImplementedError):  # specs are optional in vla-eval
                out[key] = {k: v.to_dict() for k, v in getattr(bench, method)().items()}
        return out

    def _spec_action_size(self, specs: dict[str, Any]) -> int:
        if self.action_dim is not None:
            return int(self.action_dim)
        dims = [int(s.get("dims") or 0) for s in (specs.get("action_spec") or {}).values()]
        if not dims or any(d <= 0 for d in dims):
            raise BridgeError(
                f"{specs['benchmark']}.get_action_spec() does not give every action component's "
                f"dims ({specs.get('action_spec')}); pass env.vla_eval(..., action_dim=N)"
            )
        return sum(dims)

    def ensure_contract(self) -> Contract:
        import gymnasium as gym

        eps = self._benches()
        tasks = eps[0].bench.get_tasks()
        if not tasks:
            raise BridgeError(f"{type(eps[0].bench).__name__}.get_tasks() returned no task")
        self._start(0, {**tasks[0], "episode_idx": 0})
        sample = {k: v[0] for k, v in self._obs.items()}
        specs = self._specs(eps[0].bench)
        size = self._spec_action_size(specs)
        space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        derived = Contract.derive(sample, space, control_rate=self.fps)
        action = derived.spaces().action_feature
        tagged = dataclasses.replace(action, extra={**action.extra, SPECS_KEY: plain(specs)})
        return dataclasses.replace(derived, features={**derived.features, action.name: tagged})

    # -- episodes ------------------------------------------------------------------
    def _observe(self, index: int, obs: Mapping[str, object]) -> None:
        flat = flatten(obs)
        if not self._obs:
            self._obs = {k: np.zeros((self.num_envs, *v.shape), v.dtype) for k, v in flat.items()}
        for key, rows in self._obs.items():
            if key not in flat:
                raise BridgeError(
                    f"the benchmark's observation lost {key!r} (it sends {sorted(flat)})"
                )
            rows[index] = flat[key]

    def _start(self, index: int, task: dict[str, Any]) -> str:
        ep = self._benches()[index]
        ep.task, ep.steps, ep.total, ep.reward, ep.metrics = dict(task), 0, 0.0, 0.0, None
        ep.done = ep.terminated = ep.truncated = False
        self._call(ep.bench.start_episode(ep.task))
        obs = self._call(ep.bench.get_observation())
        self._observe(index, obs)
        text = obs.get("task_description") if isinstance(obs, Mapping) else None
        return str(text or task.get("description") or task.get("name") or type(ep.bench).__name__)

    @staticmethod
    def _task(task_args: dict[str, Any]) -> dict[str, object]:
        args = dict(task_args)
        task = args.pop("task", {})
        if not isinstance(task, Mapping):
            raise BridgeError(f"reset(task=...) takes the benchmark's task dict, got {task!r}")
        return {**task, **args}

    def reset(self, **task_args: object) -> str:
        for ep in self._benches()[1:]:
            ep.done = True
        return self._start(0, self._task(task_args))

    def reset_slot(self, index: int, **task_args: object) -> str:
        return self._start(index, self._task(task_args))

    def _step_one(self, index: int, action: np.ndarray) -> None:
        ep = self._eps[index]
        if ep.done:
            return
        bench = ep.bench
        payload = {"actions": np.asarray(action, np.float32)}
        if ep.plain:  # what StepBenchmark's own async methods do, without three coroutines
            last = bench._last_result = bench.step(payload)
            finished = bool(bench.check_done(last))
        else:
            self._call(bench.apply_action(payload))
            # a StepBenchmark keeps its step's StepResult (its reward) as _last_result
            last = getattr(bench, "_last_result", None)
            finished = bool(self._call(bench.is_done()))
        reward = float(getattr(last, "reward", 0.0) or 0.0)
        ep.steps += 1
        ep.reward = reward
        ep.total += reward
        if finished or ep.steps >= (self.max_steps or 300):
            ep.done, ep.terminated, ep.truncated = True, finished, not finished
            ep.metrics = self._metrics(ep)
        elif ep.plain:
            self._observe(index, bench.make_obs(last.obs, bench._task))
        else:
            self._observe(index, self._call(bench.get_observation()))

    def _metrics(self, ep: _Episode) -> dict[str, object]:
        return dict(self._call(ep.bench.get_result()) or {})

    def step(self, actions: np.ndarray) -> None:
        for i in range(self.num_envs):
            self._step_one(i, actions[i])

    def step_slots(self, indices: list[int], actions: np.ndarray) -> None:
        for j, i in enumerate(indices):
            self._step_one(i, actions[j])

    def get_observation(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        done = np.array([ep.done for ep in self._eps], bool)
        reward = np.array([ep.reward for ep in self._eps], np.float32)
        return self._obs, done, reward

    def result_slots(self) -> list[dict[str, Any]]:
        return [self._grade(ep) for ep in self._benches()]

    def _grade(self, ep: _Episode) -> dict[str, object]:
        metrics = ep.metrics if ep.metrics is not None else (self._metrics(ep) if ep.task else {})
        metrics = plain(metrics)
        success = bool(metrics.get("success", False))
        score = metrics.get("score")
        reward = metrics.get("total_reward", ep.total)
        return {
            "score": float(score) if isinstance(score, int | float) else (1.0 if success else 0.0),
            "success": success,
            "total_reward": float(reward) if isinstance(reward, int | float) else ep.total,
            "steps": ep.steps,
            "terminated": ep.terminated,
            "truncated": ep.truncated,
            "metrics": metrics,
        }

    def close(self) -> None:
        for ep in self._eps:
            cleanup = getattr(ep.bench, "cleanup", None)
            if cleanup is not None:
                cleanup()
        self._eps = []
        if self._loop is not None:
            self._loop.close()
            self._loop = None
