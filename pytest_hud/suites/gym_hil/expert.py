"""``gym-hil-expert``: a proportional controller for PandaPickCube that reads the cube's position
(``observation/environment_state``) and the gripper's (``tcp`` in the state): above the cube
with the gripper open, down, close, lift. Stateless: each action follows from the observation.
"""

from __future__ import annotations

import numpy as np

from pytest_hud.robot import Model, RobotAgent, Spaces
from pytest_hud.robot.agent.model import Batch
from pytest_hud.suites.control import named_state
from pytest_hud.suites.gym_hil.tasks import MODULE

__all__ = ["HilExpert", "expert_agent"]

STATE_KEY = "observation/state"
CUBE_KEY = "observation/environment_state"
#: gym-hil moves 2.5 cm per unit action.
STEP = 0.025
#: gym-hil's gripper action: 0 opens, 1 holds, 2 closes; its command reads 0..255.
OPEN, CLOSE = 0.0, 2.0
CLOSED = 0.6 * 255


def pick(tcp: np.ndarray, gripper: float, cube: np.ndarray) -> np.ndarray:
    rel = cube - tcp
    if gripper > CLOSED and np.linalg.norm(rel) < 0.03:  # held: lift
        return np.array([0.0, 0.0, 1.0, CLOSE])
    if np.linalg.norm(rel[:2]) > 0.01:  # above the cube
        return np.r_[np.clip((cube + np.r_[0.0, 0.0, 0.06] - tcp) / STEP, -1, 1), OPEN]
    if rel[2] < -0.005:  # down to it
        return np.r_[np.clip(rel / STEP, -1, 1), OPEN]
    return np.array([0.0, 0.0, 0.0, CLOSE])


class HilExpert(Model):
    """``infer(batch) -> [N, 1, 4]``: one scripted action per row."""

    def bind(self, spaces: Spaces) -> None:
        means = "gym-hil's agent_pos and the cube"
        index = named_state(spaces, "gym-hil-expert", (STATE_KEY, CUBE_KEY), means, MODULE)
        self.tcp = [index[f"tcp.{a}"] for a in "xyz"]
        self.gripper = index["gripper"]

    def infer(self, batch: Batch) -> np.ndarray:
        states = np.asarray(batch[STATE_KEY], np.float64)
        cubes = np.asarray(batch[CUBE_KEY], np.float64)
        actions = [
            pick(s[self.tcp], float(s[self.gripper]), c) for s, c in zip(states, cubes, strict=True)
        ]
        return np.stack(actions).astype(np.float32)[:, None, :]


def expert_agent() -> RobotAgent:
    """The ``gym-hil-expert`` agent (``--hud-agent=gym-hil-expert`` once installed, or
    ``--hud-agent=pytest_hud.suites.gym_hil:expert_agent``)."""
    return RobotAgent(HilExpert(), name="gym-hil-expert")
