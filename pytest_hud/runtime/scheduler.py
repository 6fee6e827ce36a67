"""``run(tasks, agent, runtime=...)``: task rows through one provider with bounded concurrency,
without pytest; placement is resolved once for all rows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from pytest_hud.errors import PlacementError
from pytest_hud.runtime.placement import resolve_placement
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.rollout import Agent, RolloutResult, rollout
from pytest_hud.runtime.shared import Shared
from pytest_hud.runtime.task import Task, Taskset
from pytest_hud.runtime.warm import WarmPool, pool_size

__all__ = ["PlacementError", "resolve_placement", "run"]


async def run(
    tasks: Iterable[Task],
    agent: Agent,
    runtime: Provider | None = None,
    *,
    group: int = 1,
    max_concurrent: int | None = None,
    rollout_timeout: float | None = None,
    warm: int | None = None,
) -> list[RolloutResult]:
    """Run every task ``group`` times; results come back in task order, repeats together.

    ``warm``: how many substrates to boot ahead of the running rollouts (0: off; default:
    ``max_concurrent`` for a provider whose boot is worth hiding, see :mod:`.warm`).
    """
    if not callable(agent):  # a spec string included: it names an agent, it is not one
        raise TypeError(
            f"run() takes an agent object (a callable on a Run, e.g. RobotAgent(model)), "
            f"got {agent!r}; fix: for a --hud-agent spec, pass "
            "pytest_hud.robot.agent.registry.load_agent(spec)"
        )
    taskset: Taskset | list[Task] = tasks if isinstance(tasks, Taskset) else list(tasks)
    provider = resolve_placement(taskset, runtime)
    items = [(task, i) for task in taskset for i in range(group)]
    limit = asyncio.Semaphore(max_concurrent or len(items) or 1)
    ahead = pool_size(provider, warm, max_concurrent or len(items))
    queued = max_concurrent is not None and len(items) > max_concurrent  # else all start now
    pool = WarmPool(provider, ahead) if ahead and queued else None

    async def one(n: int, task: Task, index: int) -> RolloutResult:
        async with limit:
            place = pool.serving(n) if pool is not None else provider
            return await rollout(task, agent, place, index=index, timeout=rollout_timeout)

    async with contextlib.AsyncExitStack() as stack:
        if isinstance(provider, Shared):
            await stack.enter_async_context(provider)
        if pool is not None:
            await stack.enter_async_context(pool)
            pool.plan((n, task) for n, (task, _) in enumerate(items))
        return list(await asyncio.gather(*(one(n, t, i) for n, (t, i) in enumerate(items))))
