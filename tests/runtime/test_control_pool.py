"""Control connections kept between rollouts on a Shared substrate (issue 18, per-item cost)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hud import Shared, Task, run
from pytest_hud.runtime import LocalRuntime
from pytest_hud.runtime.control_pool import ControlPool, use_pool

COUNTER = Path(__file__).resolve().parents[1] / "helpers" / "envs" / "counter_env.py"


async def zero(run_: object) -> dict:
    return {}


@pytest.mark.anyio
async def test_a_shared_substrate_reuses_the_connection_of_a_graded_rollout() -> None:
    pool = ControlPool()
    probes = [Task("counter", "cleanup_probe", {"tag": str(i)}) for i in range(3)]
    failing = [Task("counter", "no_grade")]  # the template raises: its connection is closed
    shared = Shared(LocalRuntime(COUNTER), width=1)
    async with shared:
        with use_pool(pool):
            results = await run(probes, zero, shared, max_concurrent=1)
            bad = await run(failing, zero, shared)
            after = await run(probes[:1], zero, shared)
        kept = [client for clients in pool._idle.values() for client in clients]
        await pool.drain()
    assert [r.success for r in results + after] == [True] * 4
    assert bad[0].error is not None
    # 1 dial, then 2 reuses, the failed rollout takes the kept one (3) and closes it,
    # so the last rollout dials anew
    assert pool.reused == 3
    assert len(kept) == 1 and all(client.closed for client in kept)  # drained: closed


@pytest.mark.anyio
async def test_without_shared_or_pool_every_rollout_dials() -> None:
    pool = ControlPool()
    tasks = [Task("counter", "cleanup_probe", {"tag": str(i)}) for i in range(2)]
    with use_pool(pool):  # a fresh substrate per rollout: never pooled
        results = await run(tasks, zero, LocalRuntime(COUNTER), max_concurrent=1)
    shared = Shared(LocalRuntime(COUNTER), width=1)
    async with shared:  # no pool installed: dial and hang up as before
        await run(tasks, zero, shared, max_concurrent=1)
    assert [r.success for r in results] == [True, True]
    assert pool.reused == 0 and pool._idle == {}
