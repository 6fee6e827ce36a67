"""``genesis-expert``: a scripted controller for lerobot-genesis's FrankaReach: it commands the
task's goal pose, normalised by the Franka Panda's joint limits (the arm's datasheet values,
the same as in Genesis's bundled ``panda.xml``), and the arm's PD gains take it there.
"""

from __future__ import annotations

import numpy as np

from pytest_hud.robot import ContractError, Model, RobotAgent, Spaces
from pytest_hud.robot.agent.model import Batch

__all__ = ["FRANKA_HIGH", "FRANKA_LOW", "GOAL", "GenesisReachExpert", "expert_agent"]

#: The 7 arm joints (rad) and the 2 finger slides (m).
FRANKA_LOW = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973, 0, 0])
FRANKA_HIGH = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973, 0.04, 0.04])
#: FrankaReach-v0's goal pose (lerobot-genesis's task definition).
GOAL = np.array([0.6, -0.785, 0.0, -1.5, 0.0, 1.571, 0.785, 0.04, 0.04])


class GenesisReachExpert(Model):
    """``infer(batch) -> [N, 1, 9]``: the goal pose as a normalised joint command."""

    def bind(self, spaces: Spaces) -> None:
        if spaces.action_feature.size != GOAL.size:
            raise ContractError(
                f"genesis-expert commands the Franka's {GOAL.size} joints; the env takes "
                f"{spaces.action_feature.size}. Fix: run it on pytest_hud.suites.genesis rows"
            )

    def infer(self, batch: Batch) -> np.ndarray:
        action = 2.0 * (GOAL - FRANKA_LOW) / (FRANKA_HIGH - FRANKA_LOW) - 1.0
        rows = len(batch["prompt"])
        return np.tile(action.astype(np.float32), (rows, 1, 1))


def expert_agent() -> RobotAgent:
    """The ``genesis-expert`` agent (``--hud-agent=pytest_hud.suites.genesis:expert_agent``)."""
    return RobotAgent(GenesisReachExpert(), name="genesis-expert")
