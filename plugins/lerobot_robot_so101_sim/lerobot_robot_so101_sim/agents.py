"""The arm's scripted reach policies as pytest-hud agents (entry points ``so101-reach`` and
``so101-reach-slow``): one action a chunk from the robot's 17-dim state. Imported only when
pytest-hud asks for them."""

from __future__ import annotations

from typing import Any

import numpy as np

from lerobot_robot_so101_sim import reach_close_action
from pytest_hud.robot import RobotAgent
from pytest_hud.robot.agent.model import Model

__all__ = ["ReachModel", "reach_agent", "slow_reach_agent"]


class ReachModel(Model):
    """lerobot-env-so101's scripted reach-and-close policy on the robot's state, one action a
    chunk; ``scale`` < 1 is a weaker arm (slower: it runs out of steps more often)."""

    def __init__(self, scale: float = 1.0, horizon: int = 1) -> None:
        self.scale = scale
        self.horizon = horizon

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        states = np.asarray(batch["observation/state"], np.float64)
        rows = [reach_close_action(state, self.scale) for state in states]
        return np.repeat(np.stack(rows)[:, None, :], self.horizon, axis=1).astype(np.float32)


def reach_agent() -> RobotAgent:
    """``--hud-agent=so101-reach``: the scripted reach-and-close policy."""
    return RobotAgent(ReachModel(), name="so101-reach")


def slow_reach_agent() -> RobotAgent:
    """``--hud-agent=so101-reach-slow``: the same at a sixth of the speed."""
    return RobotAgent(ReachModel(scale=1 / 6), name="so101-reach-slow")
