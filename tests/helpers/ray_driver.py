"""A separate Ray driver for tests/runtime/test_ray.py: ``python ray_driver.py ADDRESS MODE``.

``rollout``: one pendulum rollout through RayRuntime(address=ADDRESS); prints its
outcome as JSON. ``hang``: starts a rollout whose agent never finishes, prints
``READY <actor id>`` once the actor serves, and waits (for the test's SIGINT).
A driver of its own because a process joins one Ray cluster, one way, once.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agents import zero_agent

from pytest_hud import Task
from pytest_hud.runtime import rollout
from pytest_hud.runtime.ray import RayRuntime, live_actors

PENDULUM = Path(__file__).resolve().parents[2] / "examples" / "envs" / "pendulum.py"


async def hang(run: Any) -> dict[str, Any]:
    print("READY", *live_actors(), flush=True)
    await asyncio.sleep(3600)
    return {}


async def main(address: str, mode: str) -> None:
    agent = zero_agent if mode == "rollout" else hang
    res = await rollout(
        Task("pendulum", "swing_up", {"seed": 0}), agent, RayRuntime(PENDULUM, address=address)
    )
    print(
        json.dumps({"error": res.error, "steps": res.steps, "reward": res.total_reward}), flush=True
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
