"""A Ray policy replica that dies and is restarted (issue 26 #3), on the REAL Ray test
cluster (tests/conftest.py: ``cluster``): Ray restarts the actor, which serves again on a
new address; the rollout in flight when it died is an ERROR naming the lost connection,
and the following rollouts reach the replica at its new address (logged), through
``PolicyReplicas.agent()`` and through ``--hud-agent=openpi:ray:NAME``'s
``replica_agent``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ray_cluster import LocalCluster

from pytest_hud import LocalRuntime, Task, run

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.xdist_group("ray")]

PENDULUM = Path(__file__).resolve().parents[2] / "examples" / "envs" / "pendulum.py"
LOGGER = "pytest_hud.robot.agent.remote"


class KillAtTick:
    """An observer factory: at tick ``tick`` of the first episode, kill the replica's
    process (Ray restarts it: ``no_restart=False``)."""

    def __init__(self, handle: Any, tick: int) -> None:
        self.handle, self.tick, self.episodes = handle, tick, 0

    def __call__(self, run: Any, spaces: Any) -> Any:
        factory, episode = self, self.episodes
        self.episodes += 1

        class Observer:
            seen = 0

            def step(self, data: dict[str, Any], action: np.ndarray) -> None:
                if episode == 0 and self.seen == factory.tick:
                    import ray

                    ray.kill(factory.handle, no_restart=False)
                self.seen += 1

            def end(self, ok: bool) -> dict[str, Any]:
                return {}

        return Observer()


async def test_a_restarted_replica_is_followed_to_its_new_address(
    cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    from pytest_hud.robot.agent.model import ZeroModel
    from pytest_hud.robot.agent.replicas import PolicyReplicas, replica_agent

    rows = [Task("pendulum", "swing_up", {"seed": s}) for s in range(3)]
    async with PolicyReplicas(ZeroModel, 1, num_cpus=0.5, restarts=1, name="moving") as replicas:
        (before,) = replicas.urls
        agent = replicas.agent()
        agent.agents[0].observers.append(KillAtTick(replicas.handles[0], tick=5))
        with caplog.at_level(logging.INFO, logger=LOGGER):
            results = await run(rows, agent, LocalRuntime(PENDULUM), max_concurrent=1)
        after = await replicas.handles[0].address.remote()
        # the plugin's openpi:ray:NAME agent, made after the restart, reaches it too
        named = replica_agent("moving")
        again = await run(rows[:1], named, LocalRuntime(PENDULUM))

    assert after != before and after.startswith("ws://127.0.0.1:"), (before, after)
    first, *rest = results
    assert first.error is not None and "policy server connection was lost" in first.error
    assert before in first.error and (first.steps or 0) < 200
    assert [(r.error, r.steps) for r in rest] == [(None, 200), (None, 200)]
    moved = [r.getMessage() for r in caplog.records if "moved" in r.getMessage()]
    assert moved == [f"policy server moved: {before} -> {after}; reconnecting there"], moved
    assert [(r.error, r.steps) for r in again] == [(None, 200)]
