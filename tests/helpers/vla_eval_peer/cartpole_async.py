"""The CartPole episodes of cartpole_bench.py through vla-eval's async ``Benchmark`` API.

Not a ``StepBenchmark``: every method awaits a real suspension first, as a benchmark that
talks to a remote simulator does, so ``env.vla_eval`` must drive it on an event loop of
its own (the bridge's ``offload`` path). Same tasks, seeds and results as
``CartPoleBenchmark``, so the rows can be compared one for one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cartpole_bench import CartPoleBenchmark
from vla_eval.benchmarks.base import Benchmark
from vla_eval.specs import DimSpec


class AsyncCartPoleBenchmark(Benchmark):
    def __init__(self, goals: tuple[float, ...] = (50.0, 1e9), max_steps: int = 100) -> None:
        self.inner = CartPoleBenchmark(goals=goals, max_steps=max_steps)

    async def _suspend(self) -> None:
        await asyncio.sleep(0)  # hands the loop over: a StepBenchmark's methods never do

    def get_tasks(self) -> list[dict[str, Any]]:
        return self.inner.get_tasks()

    async def start_episode(self, task: dict[str, Any], recorder: Any = None) -> None:
        await self._suspend()
        await self.inner.start_episode(task)

    async def apply_action(self, action: dict[str, Any]) -> None:
        await self._suspend()
        await self.inner.apply_action(action)

    async def get_observation(self) -> dict[str, Any]:
        await self._suspend()
        return await self.inner.get_observation()

    async def is_done(self) -> bool:
        await self._suspend()
        return await self.inner.is_done()

    async def get_time(self) -> float:
        return await self.inner.get_time()

    async def get_result(self) -> dict[str, Any]:
        await self._suspend()
        return await self.inner.get_result()

    def get_metadata(self) -> dict[str, Any]:
        return self.inner.get_metadata()

    def get_action_spec(self) -> dict[str, DimSpec]:
        return self.inner.get_action_spec()

    def get_observation_spec(self) -> dict[str, DimSpec]:
        return self.inner.get_observation_spec()

    def cleanup(self) -> None:
        self.inner.cleanup()
