"""``fetch-expert``: a proportional controller on the Fetch tasks that reads the block and the
goal from the observation (Reach: gripper to goal; Push: behind the block, then through it
toward the goal; PickAndPlace: above the block, down, close, carry to the goal). Stateless:
each action follows from the observation alone; the task comes from the row's prompt.
"""

from __future__ import annotations

import numpy as np

from pytest_hud.robot import Model, RobotAgent, Spaces
from pytest_hud.robot.agent.model import Batch
from pytest_hud.suites.control import named_state
from pytest_hud.suites.gymnasium_robotics.tasks import FETCH, task_for_prompt

__all__ = ["FetchExpert", "expert_agent"]

STATE_KEY = "observation/state"
GOAL_KEY = "observation/goal"
#: Action per metre of position error (Fetch moves 5 cm per unit action).
GAIN = 10.0


def _toward(at: np.ndarray, target: np.ndarray) -> np.ndarray:
    return np.clip(GAIN * (target - at), -1.0, 1.0)


def reach(grip: np.ndarray, goal: np.ndarray) -> np.ndarray:
    return np.r_[_toward(grip, goal), 0.0]


def push(grip: np.ndarray, block: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Behind the block on the goal's line, down to its height, then push along the line."""
    line = goal[:2] - block[:2]
    norm = float(np.linalg.norm(line))
    u = line / norm if norm > 1e-6 else np.zeros(2)
    behind = np.r_[block[:2] - 0.06 * u, block[2]]
    offset = grip[:2] - block[:2]
    along = float(offset @ u)
    across = abs(float(offset[0] * u[1] - offset[1] * u[0]))
    if along < -0.03 and across < 0.012 and grip[2] < block[2] + 0.02:  # in place: push
        return np.r_[_toward(grip, np.r_[block[:2] + 0.02 * u, block[2]]), -1.0]
    if np.linalg.norm(grip[:2] - behind[:2]) < 0.01:  # above the spot: go down
        return np.r_[_toward(grip, behind), -1.0]
    high = block[2] + 0.06
    if grip[2] < high - 0.01:  # low and elsewhere: up first (never sweep the block)
        near = np.linalg.norm(grip[:2] - behind[:2]) <= 0.02
        return np.r_[_toward(grip, behind if near else np.r_[grip[:2], high]), -1.0]
    return np.r_[_toward(grip, np.r_[behind[:2], high]), -1.0]


def pick_and_place(
    grip: np.ndarray, block: np.ndarray, fingers: np.ndarray, goal: np.ndarray
) -> np.ndarray:
    """Above the block with the gripper open, down, close, then carry the block to the goal."""
    rel = block - grip
    width = float(fingers.sum())
    if np.linalg.norm(rel) < 0.02 and width < 0.06:  # held
        return np.r_[_toward(grip, goal), -1.0]
    if np.linalg.norm(rel[:2]) > 0.008:
        hover = block + np.r_[0.0, 0.0, 0.05]
        above = grip[2] > block[2] + 0.03 or np.linalg.norm(rel[:2]) < 0.02
        return np.r_[_toward(grip, hover if above else np.r_[grip[:2], block[2] + 0.06]), 1.0]
    if rel[2] < -0.008:
        return np.r_[_toward(grip, block), 1.0]
    return np.array([0.0, 0.0, 0.0, -1.0])


class FetchExpert(Model):
    """``infer(batch) -> [N, 1, 4]``: one scripted action per row."""

    def bind(self, spaces: Spaces) -> None:
        means = "the Fetch tasks' observation and desired goal"
        rows = "pytest_hud.suites.gymnasium_robotics.fetch"
        self.index = named_state(spaces, "fetch-expert", (STATE_KEY, GOAL_KEY), means, rows)

    def _part(self, state: np.ndarray, part: str, axes: tuple[str, ...]) -> np.ndarray:
        return np.array([state[self.index[f"{part}.{a}"]] for a in axes])

    def act(self, task: str, state: np.ndarray, goal: np.ndarray) -> np.ndarray:
        xyz = ("x", "y", "z")
        grip = self._part(state, "grip_pos", xyz)
        if task == "FetchReach-v4":
            return reach(grip, goal)
        block = self._part(state, "object_pos", xyz)
        if task == "FetchPush-v4":
            return push(grip, block, goal)
        fingers = self._part(state, "gripper_state", ("right", "left"))
        return pick_and_place(grip, block, fingers, goal)

    def infer(self, batch: Batch) -> np.ndarray:
        states = np.asarray(batch[STATE_KEY], np.float64)
        goals = np.asarray(batch[GOAL_KEY], np.float64)
        actions = []
        for prompt, state, goal in zip(batch["prompt"], states, goals, strict=True):
            task = task_for_prompt(prompt)
            if task not in FETCH:
                raise LookupError(f"fetch-expert drives the Fetch tasks only; got {task!r}")
            actions.append(self.act(task, state, goal))
        return np.stack(actions).astype(np.float32)[:, None, :]


def expert_agent() -> RobotAgent:
    """The ``fetch-expert`` agent (``--hud-agent=fetch-expert`` once installed, or
    ``--hud-agent=pytest_hud.suites.gymnasium_robotics:expert_agent``)."""
    return RobotAgent(FetchExpert(), name="fetch-expert")
