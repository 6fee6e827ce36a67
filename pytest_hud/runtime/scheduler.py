"""The scheduler: run task rows through one provider with bounded concurrency.

``run(tasks, agent, runtime=..., group=..., max_concurrent=..., rollout_timeout=...)``
works without pytest; the plugin drives the same rollout atom. Placement is
resolved once for all rows: per-row behaviour lives inside the provider.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

from pytest_hud.runtime.errors import PlacementError
from pytest_hud.runtime.placement import resolve_placement
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.rollout import Agent, RolloutResult, rollout
from pytest_hud.runtime.shared import Shared
from pytest_hud.runtime.task import Task, Taskset

__all__ = ["PlacementError", "resolve_placement", "run"]


async def run(
    tasks: Iterable[Task],
    agent: Agent,
    runtime: Provider | None = None,
    *,
    group: int = 1,
    max_concurrent: int | None = None,
    rollout_timeout: float | None = None,
) -> list[RolloutResult]:
    """Run every task ``group`` times; results come back in task order, repeats together."""
    taskset: Any = tasks if isinstance(tasks, Taskset) else list(tasks)
    provider = resolve_placement(taskset, runtime)
    items = [(task, i) for task in taskset for i in range(group)]
    limit = asyncio.Semaphore(max_concurrent or len(items) or 1)

    async def one(task: Task, index: int) -> RolloutResult:
        async with limit:
            return await rollout(task, agent, provider, index=index, timeout=rollout_timeout)

    async with contextlib.AsyncExitStack() as stack:
        if isinstance(provider, Shared):
            await stack.enter_async_context(provider)
        return list(await asyncio.gather(*(one(t, i) for t, i in items)))
