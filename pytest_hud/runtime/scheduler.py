"""The scheduler: run task rows through one provider with bounded concurrency.

``run(tasks, agent, runtime=..., group=..., max_concurrent=..., rollout_timeout=...)``
works without pytest; the plugin drives the same rollout atom. Placement is
resolved once for all rows: per-row behaviour lives inside the provider.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_hud.loader import load_module
from pytest_hud.runtime.local import LocalRuntime
from pytest_hud.runtime.modules import declared_environments, environments_in
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.rollout import Agent, RolloutResult, rollout
from pytest_hud.runtime.shared import Shared
from pytest_hud.runtime.task import Task, Taskset

__all__ = ["PlacementError", "resolve_placement", "run"]


class PlacementError(LookupError):
    """No runtime was given and none could be inferred for some rows."""


def resolve_placement(tasks: Iterable[Task], runtime: Provider | None = None) -> Provider:
    """The provider for a batch: the given one, else one inferred from where envs are declared.

    Rows from a ``.py`` taskset are served fresh from that file; rows whose envs are
    declared in already-imported modules are served from their declaring files.
    """
    if runtime is not None:
        return runtime
    source = getattr(tasks, "source", None)
    envs = {t.env for t in tasks}
    if source and str(source).endswith(".py") and Path(source).exists():
        declared = {env.name for env in environments_in(load_module(source))}
        if envs <= declared:
            return LocalRuntime(source)
    files: dict[str, str] = {}
    for env, path in declared_environments():
        if path and env.name in envs:
            files.setdefault(env.name, path)
    missing = envs - set(files)
    if missing:
        raise PlacementError(
            f"no runtime given and no declaration found for env(s) {sorted(missing)}. Pass "
            "runtime= one of: LocalRuntime('envs.py') or LocalRuntime(build), "
            "SubprocessRuntime('envs.py'), DockerRuntime('image'), ModalRuntime('image'), "
            "Runtime('tcp://host:port') for a running server, Shared(provider, width=N), or "
            "a callable (task) -> provider(task); or import the module that declares the env"
        )
    providers = {name: LocalRuntime(path) for name, path in files.items()}
    return lambda task: providers[task.env](task)


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
