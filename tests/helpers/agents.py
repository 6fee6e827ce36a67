"""Tiny agents for placement tests: drive the robot wire with a fixed action."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_hud.robot import RobotClient
from pytest_hud.runtime import Run


async def zero_agent(run: Run) -> dict[str, Any]:
    """Send zeros of the contract's action size until the episode terminates."""
    async with await RobotClient.connect(run.robot, token=run.robot_token) as client:
        size = client.spaces().action_feature.size or 1
        obs = await client.get_observation()
        steps = 0
        while not obs["terminated"]:
            obs = await client.step(np.zeros(size, np.float32))
            steps += 1
    return {"steps": steps}


async def walk_away_agent(run: Run) -> dict[str, Any]:
    """Connect, take two steps, then raise (the rollout errors mid-episode)."""
    async with await RobotClient.connect(run.robot, token=run.robot_token) as client:
        await client.get_observation()
        await client.step(np.zeros(2, np.float32))
        await client.step(np.zeros(2, np.float32))
    raise RuntimeError("the agent gave up")
