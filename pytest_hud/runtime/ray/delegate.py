"""Delegated rollouts: the whole rollout runs as a Ray task (:func:`delegated_rollout`, taking
``rollout()``'s arguments and the cluster's). A worker that dies is a ``SubstrateError``
result, never a failed episode.
"""

from __future__ import annotations

import asyncio
from typing import Unpack

from pytest_hud.plumbing.cluster import connect
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.ray.resources import placement_options
from pytest_hud.runtime.rollout import Agent, RolloutOptions, RolloutResult, rollout
from pytest_hud.runtime.task import Task

__all__ = ["delegated_rollout"]


def _run_on_worker(
    task: Task, agent: Agent, provider: Provider, options: RolloutOptions
) -> RolloutResult:
    import os

    import ray

    result = asyncio.run(rollout(task, agent, provider, **options))
    ctx = ray.get_runtime_context()
    result.agent_info["ray"] = {"node_id": ctx.get_node_id(), "pid": os.getpid()}
    return result


async def delegated_rollout(
    task: Task,
    agent: Agent,
    provider: Provider,
    *,
    address: str | None = None,
    num_cpus: float = 1,
    **options: Unpack[RolloutOptions],
) -> RolloutResult:
    """Run ``rollout(task, agent, provider, **options)`` as a Ray task on the cluster at
    ``address``; never raises for rollout failures (see ``RolloutResult.error``)."""
    import ray

    await asyncio.to_thread(connect, address)
    placed = placement_options(task, num_cpus=num_cpus)
    placed["max_retries"] = 0  # a rollout is not idempotent: never re-run it silently
    ref = ray.remote(_run_on_worker).options(**placed).remote(task, agent, provider, options)
    try:
        result: RolloutResult = await ref
        return result
    except ray.exceptions.RayError as exc:
        failed = RolloutResult(task, options.get("index", 0))
        failed.error = f"the Ray task running this rollout failed: {type(exc).__name__}: {exc}"
        failed.error_type, failed.phase = "SubstrateError", "delegate"
        return failed
    except BaseException:
        ray.cancel(ref, force=True)
        raise
