"""Delegated rollouts: the whole rollout runs as a Ray task (:func:`delegated_rollout`, same
signature as ``rollout()``). A worker that dies is a ``SubstrateError`` result, never a failed
episode.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pytest_hud.plumbing.cluster import connect
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.ray.resources import placement_options
from pytest_hud.runtime.rollout import Agent, RolloutResult, rollout
from pytest_hud.runtime.task import Task

__all__ = ["delegated_rollout"]


def _run_on_worker(
    task: Task, agent: Any, provider: Any, index: int, timeout: float | None
) -> RolloutResult:
    import os

    import ray

    result = asyncio.run(rollout(task, agent, provider, index=index, timeout=timeout))
    ctx = ray.get_runtime_context()
    result.agent_info["ray"] = {"node_id": ctx.get_node_id(), "pid": os.getpid()}
    return result


async def delegated_rollout(
    task: Task,
    agent: Agent,
    provider: Provider,
    *,
    index: int = 0,
    timeout: float | None = None,
    address: str | None = None,
    num_cpus: float = 1,
) -> RolloutResult:
    """Run ``rollout(task, agent, provider)`` as a Ray task; never raises for rollout
    failures (see ``RolloutResult.error``)."""
    import ray

    await asyncio.to_thread(connect, address)
    options = placement_options(task, num_cpus=num_cpus)
    options["max_retries"] = 0  # a rollout is not idempotent: never re-run it silently
    ref = (
        ray.remote(_run_on_worker).options(**options).remote(task, agent, provider, index, timeout)
    )
    try:
        result: RolloutResult = await ref
        return result
    except ray.exceptions.RayError as exc:
        failed = RolloutResult(task, index)
        failed.error = f"the Ray task running this rollout failed: {type(exc).__name__}: {exc}"
        failed.error_type, failed.phase = "SubstrateError", "delegate"
        return failed
    except BaseException:
        ray.cancel(ref, force=True)
        raise
