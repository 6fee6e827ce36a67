"""``robosuite-expert``: a Cartesian proportional controller over robosuite's default OSC (each
action a 5 cm-per-unit end-effector delta, orientation held, then the gripper: -1 open, 1
close). Lift: above the cube, down, close, lift. Stack: pick cube A, carry it above cube B,
lower, open. Stateless: each action follows from the observation; the task comes from the
row's prompt. Door and TwoArmLift have no expert here (see docs/guides/suites.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_hud.robot import ContractError, Model, RobotAgent, Spaces
from pytest_hud.suites.robosuite.tasks import OBJECTS, task_for_prompt

__all__ = ["EXPERT_TASKS", "RobosuiteExpert", "expert_agent"]

STATE_KEY = "observation/state"
OBJECTS_KEY = "observation/environment_state"
#: Action per metre of error (the OSC moves 5 cm per unit action).
GAIN = 10.0
#: Finger gap below which the gripper counts as closed (open: ~0.08 m).
CLOSED_GAP = 0.06
EXPERT_TASKS = ("Lift", "Stack")


def _toward(at: np.ndarray, target: np.ndarray) -> np.ndarray:
    return np.clip(GAIN * (target - at), -1.0, 1.0)


def _action(move: np.ndarray, gripper: float) -> np.ndarray:
    return np.r_[move, 0.0, 0.0, 0.0, gripper]


def pick_to(
    eef: np.ndarray, fingers: np.ndarray, obj: np.ndarray, dest: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Grasp ``obj`` from above and carry it toward ``dest``; ``(action, holding)``."""
    rel = obj - eef
    gap = float(fingers[0] - fingers[1])
    if np.linalg.norm(rel) < 0.02 and 0.01 < gap < CLOSED_GAP:  # held
        return _action(_toward(obj, dest), 1.0), True
    if np.linalg.norm(rel[:2]) > 0.006:
        above = eef[2] > obj[2] + 0.04 or np.linalg.norm(rel[:2]) < 0.02
        target = obj + np.r_[0.0, 0.0, 0.08] if above else np.r_[eef[:2], obj[2] + 0.1]
        return _action(_toward(eef, target), -1.0), False
    if rel[2] < -0.006 or (gap >= CLOSED_GAP and abs(rel[2]) > 0.01):
        return _action(_toward(eef, obj), -1.0), False
    return _action(np.zeros(3), 1.0), False


def lift(eef: np.ndarray, fingers: np.ndarray, o: dict[str, np.ndarray]) -> np.ndarray:
    cube = o["cube_pos"]
    return pick_to(eef, fingers, cube, cube + np.r_[0.0, 0.0, 0.3])[0]


def stack(eef: np.ndarray, fingers: np.ndarray, o: dict[str, np.ndarray]) -> np.ndarray:
    a, b = o["cubeA_pos"], o["cubeB_pos"]
    dest = b + np.r_[0.0, 0.0, 0.05]
    action, holding = pick_to(eef, fingers, a, dest)
    if holding and np.linalg.norm((a - dest)[:2]) > 0.01:  # carry high, then lower
        action[:3] = _toward(a, np.r_[dest[:2], max(a[2], dest[2] + 0.04)])
    elif holding and np.linalg.norm(a - dest) < 0.012:  # on it: let go
        action = _action(np.zeros(3), -1.0)
    return action


_POLICIES = {"Lift": lift, "Stack": stack}


class RobosuiteExpert(Model):
    """``infer(batch) -> [N, 1, 7]``: one scripted action per row (single-arm tasks)."""

    def bind(self, spaces: Spaces) -> None:
        state, objects = spaces.observation.get(STATE_KEY), spaces.observation.get(OBJECTS_KEY)
        if state is None or objects is None or state.size != 9:
            raise ContractError(
                f"robosuite-expert drives one arm from {STATE_KEY!r} (9-d: end-effector "
                f"position, quaternion, fingers) and {OBJECTS_KEY!r}; got "
                f"{ {k: f.size for k, f in spaces.observation.items()} }. Fix: run it on "
                f"pytest_hud.suites.robosuite rows of {', '.join(EXPERT_TASKS)}"
            )

    def act(self, task: str, state: np.ndarray, objects: np.ndarray) -> np.ndarray:
        if task not in _POLICIES:
            raise LookupError(
                f"robosuite-expert has no policy for {task!r}; it drives {', '.join(EXPERT_TASKS)}"
            )
        parts, at = {}, 0
        for key, size in OBJECTS[task]:
            parts[key] = objects[at : at + size]
            at += size
        return _POLICIES[task](state[0:3], state[7:9], parts)

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        states = np.asarray(batch[STATE_KEY], np.float64)
        objects = np.asarray(batch[OBJECTS_KEY], np.float64)
        actions = [
            self.act(task_for_prompt(p), s, o)
            for p, s, o in zip(batch["prompt"], states, objects, strict=True)
        ]
        return np.stack(actions).astype(np.float32)[:, None, :]


def expert_agent() -> RobotAgent:
    """The ``robosuite-expert`` agent (``--hud-agent=robosuite-expert`` once installed, or
    ``--hud-agent=pytest_hud.suites.robosuite:expert_agent``)."""
    return RobotAgent(RobosuiteExpert(), name="robosuite-expert")
