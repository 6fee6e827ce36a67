"""``robosuite-expert``: a Cartesian proportional controller over robosuite's default OSC_POSE
(each action a 5 cm-per-unit end-effector delta and a 0.5 rad-per-unit rotation, both in the
arm's base frame, then the gripper: -1 open, 1 close). Lift: above the cube, down, close,
lift. Stack: pick cube A, carry it above cube B, lower, open. Door: grip the latch's lever from
the side, fingers across it, roll the wrist to turn it past the latch, pull the door open.
TwoArmLift: each arm grips its handle of the pot from above, fingers across it, and both lift
once both hold. Stateless: each action follows from the observation; the task comes from the
row's prompt.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pytest_hud.robot import ContractError, Model, RobotAgent, Spaces
from pytest_hud.robot.agent.model import Batch
from pytest_hud.suites.control import frame, quat_xyzw_matrix, rotation_error, toward
from pytest_hud.suites.robosuite.sim import ROBOT_PARTS
from pytest_hud.suites.robosuite.tasks import OBJECTS, ROBOTS, task_for_prompt

__all__ = ["EXPERT_TASKS", "Arm", "RobosuiteExpert", "expert_agent"]

STATE_KEY = "observation/state"
OBJECTS_KEY = "observation/environment_state"
#: Action per metre of error (the OSC moves 5 cm per unit action), per radian (0.5 rad).
GAIN, TURN_GAIN = 10.0, 4.0
#: Finger gap below which the gripper counts as closed (open: ~0.08 m).
CLOSED_GAP = 0.06
OPEN, CLOSE = -1.0, 1.0
_Z = np.array([0.0, 0.0, 1.0])

#: robosuite's locked door (door_lock.xml), in the door body's frame: the latch joint (the
#: lever's pivot, about the door's normal y) and the lever's handle site from it (along the
#: lever, out along the normal). The lever must turn past UNLATCHED (measured: 1.3 rad) before
#: the latch clears the frame; the fingers close GRIP_AT along the lever from its pivot.
LATCH = np.array([-0.175, 0.0, -0.025])
LEVER_TIP, LEVER_OUT = 0.125, -0.10
UNLATCHED, TURNED, GRIP_AT = 1.3, 1.45, 0.09
#: TwoArmLift's default "opposed" placement turns robot0's base +90 degrees and robot1's -90
#: about the vertical; each arm's action is in its base's frame.
OPPOSED_YAW = (np.pi / 2, -np.pi / 2)
#: The handles' height to lift to: the table top (0.8 m) + 0.3 m; success is the pot's bottom
#: 10 cm above the table.
LIFT_TO = 1.1


class Arm(NamedTuple):
    """One arm's part of the state: end effector position, orientation, finger joints."""

    eef: np.ndarray
    rotation: np.ndarray
    fingers: np.ndarray

    @property
    def gap(self) -> float:
        return float(self.fingers[0] - self.fingers[1])


def _action(move: np.ndarray, gripper: float, turn: np.ndarray | None = None) -> np.ndarray:
    return np.r_[move, np.zeros(3) if turn is None else turn, gripper]


def _turn(arm: Arm, target: np.ndarray) -> np.ndarray:
    return np.clip(TURN_GAIN * rotation_error(target, arm.rotation), -1.0, 1.0)


def pick_to(arm: Arm, obj: np.ndarray, dest: np.ndarray) -> tuple[np.ndarray, bool]:
    """Grasp ``obj`` from above and carry it toward ``dest``; ``(action, holding)``."""
    eef, gap = arm.eef, arm.gap
    rel = obj - eef
    if np.linalg.norm(rel) < 0.02 and 0.01 < gap < CLOSED_GAP:  # held
        return _action(toward(obj, dest, GAIN), CLOSE), True
    if np.linalg.norm(rel[:2]) > 0.006:
        above = eef[2] > obj[2] + 0.04 or np.linalg.norm(rel[:2]) < 0.02
        target = obj + np.r_[0.0, 0.0, 0.08] if above else np.r_[eef[:2], obj[2] + 0.1]
        return _action(toward(eef, target, GAIN), OPEN), False
    if rel[2] < -0.006 or (gap >= CLOSED_GAP and abs(rel[2]) > 0.01):
        return _action(toward(eef, obj, GAIN), OPEN), False
    return _action(np.zeros(3), CLOSE), False


def lift(arms: list[Arm], o: dict[str, np.ndarray]) -> np.ndarray:
    cube = o["cube_pos"]
    return pick_to(arms[0], cube, cube + np.r_[0.0, 0.0, 0.3])[0]


def stack(arms: list[Arm], o: dict[str, np.ndarray]) -> np.ndarray:
    a, b = o["cubeA_pos"], o["cubeB_pos"]
    dest = b + np.r_[0.0, 0.0, 0.05]
    action, holding = pick_to(arms[0], a, dest)
    if holding and np.linalg.norm((a - dest)[:2]) > 0.01:  # carry high, then lower
        action[:3] = toward(a, np.r_[dest[:2], max(a[2], dest[2] + 0.04)], GAIN)
    elif holding and np.linalg.norm(a - dest) < 0.012:  # on it: let go
        action = _action(np.zeros(3), OPEN)
    return action


def door(arms: list[Arm], o: dict[str, np.ndarray]) -> np.ndarray:
    """Grip the lever near its end from the door's side, turn it, pull the door."""
    arm = arms[0]
    angle, hinge = float(o["handle_qpos"][0]), float(o["hinge_qpos"][0])
    # the door's yaw, from where its handle site is for the lever's angle
    local = np.array([LATCH[0] + LEVER_TIP * np.cos(angle), LEVER_OUT])
    seen = (o["handle_pos"] - o["door_pos"])[:2]
    yaw = np.arctan2(seen[1], seen[0]) - np.arctan2(local[1], local[0])
    u = np.array([np.cos(yaw), np.sin(yaw), 0.0])  # along the door, toward its hinge
    v = np.array([-np.sin(yaw), np.cos(yaw), 0.0])  # its normal, into the door
    pivot = o["door_pos"] + LATCH[0] * u + LATCH[2] * _Z + LEVER_OUT * v

    def lever(t: float) -> np.ndarray:
        return np.cos(t) * u - np.sin(t) * _Z

    def across(t: float) -> np.ndarray:  # pointing into the door, fingers across the lever
        return frame(v, np.sin(t) * u + np.cos(t) * _Z)

    rel = arm.eef - pivot
    along = float(rel @ lever(angle))
    off = float(np.linalg.norm(rel - along * lever(angle)))
    if 0.025 < arm.gap < 0.058 and off < 0.025 and 0.02 < along < 0.16:  # held
        if angle < UNLATCHED and hinge < 0.05:  # turn the lever, leading it by 0.3 rad
            t = min(angle + 0.3, TURNED)
            target = pivot + GRIP_AT * lever(t)
        else:  # unlatched (or already open): pull along the door's normal
            t = TURNED if hinge < 0.05 else angle
            target = pivot + GRIP_AT * lever(t) - 0.08 * v
        return _action(toward(arm.eef, target, GAIN), CLOSE, _turn(arm, across(t)))
    grip = pivot + GRIP_AT * lever(angle)
    err = grip - arm.eef
    lateral = err - float(err @ v) * v
    aligned = float(np.linalg.norm(rotation_error(across(angle), arm.rotation))) < 0.15
    target = grip if aligned and np.linalg.norm(lateral) <= 0.01 else grip - 0.08 * v
    closing = CLOSE if np.linalg.norm(err) < 0.012 else OPEN
    return _action(toward(arm.eef, target, GAIN), closing, _turn(arm, across(angle)))


def _across_handle(arm: Arm, handle: np.ndarray, pot: np.ndarray) -> np.ndarray:
    """Pointing down, fingers along the pot's radius through the handle (either way round:
    the nearer)."""
    radial = np.r_[(handle - pot)[:2], 0.0]
    if float(radial @ arm.rotation[:, 1]) < 0:
        radial = -radial
    return frame(-_Z, radial)


def two_arm_lift(arms: list[Arm], o: dict[str, np.ndarray]) -> np.ndarray:
    """Each arm grips its handle from above; both lift once both hold."""
    steps = []
    for arm, handle in zip(arms, (o["handle0_xpos"], o["handle1_xpos"]), strict=True):
        orientation = _across_handle(arm, handle, o["pot_pos"])
        rel = handle - arm.eef
        radial = orientation[:, 1]  # the fingers' axis: the handle bar lies across it
        off_bar = abs(float(rel @ radial)) > 0.012 or abs(float(rel @ orientation[:, 0])) > 0.008
        near = np.linalg.norm(rel) < 0.035
        if near and 0.005 < arm.gap < 0.035:  # held
            target, grip = None, CLOSE
        elif near and arm.gap < 0.075 and rel[2] > -0.01:  # closing on it: keep closing
            target, grip = arm.eef, CLOSE
        elif off_bar or np.linalg.norm(rotation_error(orientation, arm.rotation)) > 0.1:
            above = arm.eef[2] > handle[2] + 0.04 or np.linalg.norm(rel[:2]) < 0.02
            hover = np.r_[arm.eef[:2], handle[2] + 0.1]
            target, grip = (handle + 0.08 * _Z if above else hover), OPEN
        elif rel[2] < -0.005 or (arm.gap >= 0.035 and abs(rel[2]) > 0.01):
            target, grip = handle, OPEN
        else:
            target, grip = arm.eef, CLOSE
        steps.append((arm, target, grip, _turn(arm, orientation)))
    both = all(target is None for _, target, _, _ in steps)
    actions = []
    for (arm, target, grip, turn), yaw in zip(steps, OPPOSED_YAW, strict=True):
        if target is None:  # held: up together once both hold, else wait
            target = np.r_[arm.eef[:2], LIFT_TO] if both else arm.eef
        c, s = np.cos(yaw), np.sin(yaw)
        to_base = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])  # world -> base
        move = toward(arm.eef, target, GAIN)
        actions.append(np.r_[to_base @ move, to_base @ turn, grip])
    return np.concatenate(actions)


_POLICIES = {"Lift": lift, "Stack": stack, "Door": door, "TwoArmLift": two_arm_lift}
EXPERT_TASKS = tuple(_POLICIES)
_ARM_SIZE = sum(n for _, n in ROBOT_PARTS)


def arms_of(state: np.ndarray, count: int) -> list[Arm]:
    """The state's arms (robomimic's per-arm layout: position, xyzw quaternion, fingers)."""
    out = []
    for i in range(count):
        part = state[i * _ARM_SIZE : (i + 1) * _ARM_SIZE]
        out.append(Arm(part[0:3], quat_xyzw_matrix(part[3:7]), part[7:9]))
    return out


class RobosuiteExpert(Model):
    """``infer(batch) -> [N, 1, 7 x arms]``: one scripted action per row."""

    def bind(self, spaces: Spaces) -> None:
        state, objects = spaces.observation.get(STATE_KEY), spaces.observation.get(OBJECTS_KEY)
        if state is None or objects is None or not state.size or state.size % _ARM_SIZE:
            raise ContractError(
                f"robosuite-expert drives the arms from {STATE_KEY!r} ({_ARM_SIZE}-d per arm: "
                f"end-effector position, quaternion, fingers) and {OBJECTS_KEY!r}; got "
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
        return _POLICIES[task](arms_of(state, len(ROBOTS[task])), parts)

    def infer(self, batch: Batch) -> np.ndarray:
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
