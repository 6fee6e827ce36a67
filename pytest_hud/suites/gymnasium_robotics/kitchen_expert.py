"""``kitchen-expert``: a scripted Cartesian controller for FrankaKitchen's seven tasks and their
sequences. The kitchen is a fixed scene, so where each handle, knob and the kettle are follows
from the observation's joint positions: the expert sets them on its own copy of the kitchen's
MuJoCo model (kinematics only, never stepped) and reads the sites. Each step it moves the
end effector toward a target pose by damped least squares on the site's Jacobian, and turns
the joint step into the env's action (a joint velocity the env integrates over its 80 ms step
into the position servos' setpoint), with the arm's gravity (and a held kettle's) fed
forward so the servos' sag does not stall it.

Per task: the light switch and the slide cabinet are pushed with closed fingers; the
microwave and the hinged cabinet door are gripped by their bar handle and pulled along the
door's arc; the burner knobs are gripped across their ridge and turned by rolling the wrist;
the kettle is lifted by its handle and set on the top-left burner. A goal of several tasks
takes them in :data:`ORDER`, the first not yet within the benchmark's threshold of its goal;
between two it lets go of the last one's handle and goes back to the start posture in joint
space (each task's approach is made from there). Stateless: each action follows from the
observation and the prompt.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pytest_hud.robot import ContractError, Model, RobotAgent, Spaces
from pytest_hud.robot.agent.model import Batch
from pytest_hud.suites.control import frame, rotation_error, rotz
from pytest_hud.suites.gymnasium_robotics.sim import KITCHEN_NAMES
from pytest_hud.suites.gymnasium_robotics.tasks import KITCHEN_GOALS, task_for_prompt

__all__ = ["KitchenArm", "KitchenExpert", "kitchen_agent"]

STATE_KEY = "observation/state"
#: A unit action moves a joint 2 rad/s x 80 ms (the env's ``act_rng`` and step).
STEP_RAD = 0.16
#: The arm's joint position bounds (the env's franka_config.xml).
BOUNDS = np.array(
    [[-2.9, 2.9], [-1.8, 1.8], [-2.9, 2.9], [-3.1, 0.0], [-2.9, 2.9], [0.0, 3.8], [-2.9, 2.9]]
)
#: The arm's posture at the kitchen's reset (its init_qpos).
HOME = np.array([0.148, -1.768, 1.844, -2.477, 0.26, 0.713, 1.595])
#: What :meth:`KitchenArm.act` does with the fingers.
OPEN, CLOSE = -1.0, 1.0
#: The kettle's mass (kg; the model's), fed forward while it is carried.
KETTLE_MASS = 0.88
#: Where the goal puts the kettle (its position; OBS_ELEMENT_GOALS["kettle"][:3]).
KETTLE_GOAL = np.array([-0.23, 0.75, 1.62])

#: Gripper orientations: pointing into the kitchen (+y) with the fingers closing along x;
#: pointing down with the fingers along y, either way round; pointing up and in at 45 degrees
#: (the high sliding door), the fingers in the same plane.
FORWARD = frame(np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0]))
DOWN = frame(np.array([0.0, 0.0, -1.0]), np.array([0.0, 1.0, 0.0]))
DOWN_TURNED = frame(np.array([0.0, 0.0, -1.0]), np.array([0.0, -1.0, 0.0]))
UP_FORWARD = frame(np.array([0.0, 0.7, 0.7]), np.array([0.0, -0.7, 0.7]))
_Y = np.array([0.0, 1.0, 0.0])
_Z = np.array([0.0, 0.0, 1.0])


def _kitchen_xml() -> Path:
    import gymnasium_robotics

    root = Path(gymnasium_robotics.__file__).parent / "envs" / "assets" / "kitchen_franka"
    return root / "kitchen_assets" / "kitchen_env_model.xml"


class KitchenArm:
    """The kitchen's model set to one observation: sites, the end effector, and the action
    that moves the end effector toward a pose."""

    def __init__(self) -> None:
        import mujoco

        self._mj = mujoco
        self.model = mujoco.MjModel.from_xml_path(str(_kitchen_xml()))
        self.data = mujoco.MjData(self.model)
        self.eef_site = self.model.site("end_effector").id
        self.kp = self.model.actuator_gainprm[:7, 0].copy()
        self.q: np.ndarray = np.zeros(9)
        self.data.qpos[:7] = HOME
        mujoco.mj_kinematics(self.model, self.data)
        #: Where the end effector is in the start posture.
        self.home_eef = np.array(self.data.site_xpos[self.eef_site])

    def set(self, state: np.ndarray) -> None:
        """Pose the model as ``state`` (the kitchen's 59-d observation) says."""
        self.q = np.asarray(state[:9], np.float64)
        self.data.qpos[:9] = self.q
        self.data.qpos[9:30] = state[18:39]
        self.data.qvel[:] = 0.0
        self._mj.mj_kinematics(self.model, self.data)
        self._mj.mj_comPos(self.model, self.data)

    def site(self, name: str) -> np.ndarray:
        return np.array(self.data.site_xpos[self.model.site(name).id])

    @property
    def eef(self) -> np.ndarray:
        return np.array(self.data.site_xpos[self.eef_site])

    @property
    def rotation(self) -> np.ndarray:
        return np.array(self.data.site_xmat[self.eef_site]).reshape(3, 3)

    @property
    def gap(self) -> float:
        return float(self.q[7] + self.q[8])

    def misaligned(self, target: np.ndarray) -> float:
        return float(np.linalg.norm(rotation_error(target, self.rotation)))

    def home(self) -> np.ndarray:
        """The action toward the start posture, in joint space, fingers open."""
        arm = np.clip((HOME - self.q[:7]) / STEP_RAD, -1.0, 1.0)
        return np.r_[arm, np.clip((0.04 - self.q[7:9]) / STEP_RAD, -1.0, 1.0)]

    def act(
        self,
        target: np.ndarray,
        orientation: np.ndarray,
        grip: float,
        speed: float = 0.04,
        payload: float = 0.0,
    ) -> np.ndarray:
        """The action toward ``target`` (at most ``speed`` m a step) and ``orientation``,
        fingers opening (``OPEN``) or closing (``CLOSE``); ``payload`` kg held."""
        ep = target - self.eef
        if (n := float(np.linalg.norm(ep))) > speed:
            ep *= speed / n
        er = rotation_error(orientation, self.rotation)
        if (n := float(np.linalg.norm(er))) > 0.15:
            er *= 0.15 / n
        jp = np.zeros((3, self.model.nv))
        jr = np.zeros((3, self.model.nv))
        self._mj.mj_jacSite(self.model, self.data, jp, jr, self.eef_site)
        jac, err = np.vstack([jp[:, :7], jr[:, :7]]), np.r_[ep, er]
        free = np.ones(7, bool)
        for _ in range(3):  # joints at a bound drop out, the others make up for them
            jf = jac * free
            pinv = jf.T @ np.linalg.inv(jf @ jf.T + 1e-4 * np.eye(6))
            # the task's step, and in its null space a pull toward the kitchen's start posture
            # (without it the redundant arm wanders into folded poses it cannot leave)
            dq = pinv @ err + (np.eye(7) - pinv @ jf) @ (0.1 * (HOME - self.q[:7])) * free
            after = self.q[:7] + dq
            stuck = ((after < BOUNDS[:, 0] + 0.03) & (dq < 0)) | (
                (after > BOUNDS[:, 1] - 0.03) & (dq > 0)
            )
            if not (stuck & free).any():
                break
            free &= ~stuck
        gravity = np.zeros(self.model.nv)
        self._mj.mj_rne(self.model, self.data, 0, gravity)
        load = gravity[:7] + jp[:, :7].T @ np.array([0.0, 0.0, payload * 9.81])
        arm = np.clip((dq + load / self.kp) / STEP_RAD, -1.0, 1.0)
        fingers = np.clip(((0.04 if grip == OPEN else 0.0) - self.q[7:9]) / STEP_RAD, -1.0, 1.0)
        return np.r_[arm, fingers]


def _reach(
    arm: KitchenArm, point: np.ndarray, orientation: np.ndarray, axis: np.ndarray, grip: float
) -> np.ndarray:
    """Come at ``point`` along ``axis`` (from 10 cm short of it), fingers as ``grip`` says,
    then close on it."""
    rel = point - arm.eef
    depth = float(rel @ axis)
    lateral = float(np.linalg.norm(rel - depth * axis))
    if lateral < 0.012 and depth < 0.12 and arm.misaligned(orientation) < 0.2:
        if depth > 0.005:
            return arm.act(point, orientation, grip)
        return arm.act(point, orientation, CLOSE)
    return arm.act(point - 0.10 * axis, orientation, grip)


def _push(
    arm: KitchenArm,
    contact: np.ndarray,
    direction: np.ndarray,
    orientation: np.ndarray,
    standoff: float = 0.05,
) -> np.ndarray:
    """Closed fingers beside ``contact`` (from the front), then through it along
    ``direction``."""
    ready = contact - standoff * direction
    off = arm.eef - ready
    along = float(off @ direction)
    if np.linalg.norm(off) < 0.015 or (
        along > -0.005 and np.linalg.norm(off - along * direction) < 0.02
    ):
        return arm.act(contact + 0.08 * direction, orientation, CLOSE)
    rel = ready - arm.eef
    if np.linalg.norm(rel - rel[1] * _Y) > 0.02:  # off the line in: go in front of it first
        return arm.act(ready - 0.10 * _Y, orientation, CLOSE)
    return arm.act(ready, orientation, CLOSE)


def _held(arm: KitchenArm, point: np.ndarray, width: float) -> bool:
    return bool(np.linalg.norm(point - arm.eef) < 0.03 and abs(arm.gap - width) < 0.012)


class _Door:
    """A door on a vertical hinge with a vertical bar handle (the microwave, the right hinged
    cabinet door): grip the bar, pull it along the door's arc."""

    def __init__(
        self,
        site: str,
        hinge: tuple[float, float],
        joint: int,
        out: tuple[float, float],
        sign: float,
        follow: bool,
    ) -> None:
        self.site, self.hinge, self.joint = site, np.array(hinge), joint
        self.out0, self.sign = np.array([*out, 0.0]), sign
        #: whether the gripper turns with the door, or keeps pointing as at the closed door
        #: (the bar turns between the fingers) where turning would twist the arm
        self.follow = follow

    def grasp(self, arm: KitchenArm, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The handle's point and the door's outward normal."""
        return arm.site(self.site), rotz(float(state[self.joint + 9]), self.out0)

    def __call__(self, arm: KitchenArm, state: np.ndarray) -> np.ndarray:
        handle, out = self.grasp(arm, state)
        tilt = 0.6 if handle[2] > 2.4 else 0.0  # a high handle: come at it from below
        facing = out if self.follow else self.out0
        inward = -facing * np.cos(tilt) + _Z * np.sin(tilt)
        orientation = frame(inward, np.cross(_Z, facing))
        if _held(arm, handle, 0.045):
            hinge = np.r_[self.hinge, handle[2]]
            return arm.act(hinge + rotz(self.sign * 0.25, handle - hinge), orientation, CLOSE)
        return _reach(arm, handle, orientation, -out, OPEN)


class _Knob:
    """A burner knob: grip its ridge from the front and roll the wrist to turn it."""

    def __init__(self, site: str, joint: int) -> None:
        self.site, self.joint = site, joint

    def grasp(self, arm: KitchenArm, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return arm.site(self.site), -_Y

    @staticmethod
    def turned(angle: float) -> np.ndarray:
        """The gripper across the ridge of a knob at ``angle`` (about the world's -y)."""
        c, s = np.cos(angle), np.sin(angle)
        return np.array([[c, 0.0, -s], [0.0, 1.0, 0.0], [s, 0.0, c]]) @ FORWARD

    def __call__(self, arm: KitchenArm, state: np.ndarray) -> np.ndarray:
        knob, angle = arm.site(self.site), float(state[self.joint + 9])
        if _held(arm, knob, 0.03):
            return arm.act(knob, self.turned(max(angle - 0.4, -1.5)), CLOSE)
        return _reach(arm, knob, self.turned(angle), _Y, OPEN)


def _kettle_grasp(arm: KitchenArm, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return arm.site("kettle_site"), _Z


def kettle(arm: KitchenArm, state: np.ndarray) -> np.ndarray:
    """Lift the kettle by its handle, carry it over the goal, set it down."""
    handle, body = arm.site("kettle_site"), np.asarray(state[32:35], np.float64)
    # fingers across the handle either way round: the nearer of the two
    down = min((DOWN, DOWN_TURNED), key=arm.misaligned)
    if _held(arm, handle, 0.065):
        dest = KETTLE_GOAL + (handle - body)
        if np.linalg.norm((dest - handle)[:2]) > 0.02:  # lift first, then carry level
            lifted = body[2] > KETTLE_GOAL[2] + 0.03
            dest = np.r_[dest[:2], handle[2]] if lifted else handle + 0.05 * _Z
        return arm.act(dest, down, CLOSE, speed=0.02, payload=KETTLE_MASS)
    rel = handle - arm.eef
    if np.linalg.norm(rel[:2]) > 0.01:  # above it with the fingers open, high enough
        high = arm.eef[2] > handle[2] + 0.05 or np.linalg.norm(rel[:2]) < 0.03
        above = handle + 0.10 * _Z if high else np.r_[arm.eef[:2], handle[2] + 0.12]
        return arm.act(above, down, OPEN)
    if rel[2] < -0.008 or arm.misaligned(down) > 0.1:
        return arm.act(handle, down, OPEN)
    return arm.act(handle, down, CLOSE)


def light_switch(arm: KitchenArm, state: np.ndarray) -> np.ndarray:
    """Push the switch's lever to the left."""
    return _push(arm, arm.site("light_site"), np.array([-1.0, 0.0, 0.0]), FORWARD)


def slide_cabinet(arm: KitchenArm, state: np.ndarray) -> np.ndarray:
    """Push the sliding door's handle (its lower half) to the right."""
    handle = arm.site("slide_site") - 0.08 * _Z
    return _push(arm, handle, np.array([1.0, 0.0, 0.0]), UP_FORWARD)


Policy = Callable[[KitchenArm, np.ndarray], np.ndarray]
#: Each kitchen task's policy; the object joints are qpos indices (the state's ``+ 9``).
POLICIES: dict[str, Policy] = {
    "microwave": _Door("microhandle_site", (-1.128, 0.455), 22, (0.3, -0.96), -1.0, False),
    "kettle": kettle,
    "light switch": light_switch,
    "slide cabinet": slide_cabinet,
    "hinge cabinet": _Door("hinge_site2", (-0.224, 0.71), 21, (0.0, -1.0), 1.0, True),
    "bottom burner": _Knob("knob2_site", 11),
    "top burner": _Knob("knob4_site", 15),
}
#: The site each task works at (the arm leaves it for the next task).
SITES = {
    "light switch": "light_site",
    "slide cabinet": "slide_site",
    "microwave": "microhandle_site",
    "hinge cabinet": "hinge_site2",
    "bottom burner": "knob2_site",
    "top burner": "knob4_site",
    "kettle": "kettle_site",
}
#: How to let go of what a task's policy holds: its grip point and the way back out.
GRASPS: dict[str, Callable[[KitchenArm, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "microwave": POLICIES["microwave"].grasp,  # type: ignore[attr-defined]
    "hinge cabinet": POLICIES["hinge cabinet"].grasp,  # type: ignore[attr-defined]
    "bottom burner": POLICIES["bottom burner"].grasp,  # type: ignore[attr-defined]
    "top burner": POLICIES["top burner"].grasp,  # type: ignore[attr-defined]
    "kettle": _kettle_grasp,
}


#: The order the expert takes a goal's tasks in (the four-task goal's own: the microwave's
#: door opened first is out of the way; a joint-space return from the sliding door would
#: sweep the kettle off its burner). The benchmark counts each task whenever it is done.
ORDER = tuple(POLICIES)
#: How far inside the benchmark's threshold a task must be before the expert leaves it: the
#: microwave's door, let go of at the threshold, can swing back out of it.
MARGIN = {"microwave": 0.5}


def done(task: str, state: np.ndarray, margin: float = 1.0) -> bool:
    """Whether ``task``'s objects are within ``margin`` x the benchmark's threshold of its
    goal (the benchmark's own test at ``margin=1``)."""
    from gymnasium_robotics.envs.franka_kitchen.kitchen_env import (
        BONUS_THRESH,
        OBS_ELEMENT_GOALS,
        OBS_ELEMENT_INDICES,
    )

    at = np.asarray(state, np.float64)[OBS_ELEMENT_INDICES[task] + 9]
    return bool(np.linalg.norm(at - OBS_ELEMENT_GOALS[task]) < margin * BONUS_THRESH)


def kitchen_action(arm: KitchenArm, goals: tuple[str, ...], state: np.ndarray) -> np.ndarray:
    """The action for a goal of tasks: the first one (in :data:`ORDER`) not done; after a
    task that held something, let go of it and go back to the start posture first."""
    arm.set(state)
    tasks = sorted(goals, key=ORDER.index)
    todo = [t for t in tasks if not done(t, state, MARGIN.get(t, 0.8))]
    if not todo:
        return arm.act(arm.eef, arm.rotation, OPEN)
    at = tasks.index(todo[0])
    if at:  # coming from the task before: let go of it, back to the start posture
        last = tasks[at - 1]
        if last in GRASPS:
            point, away = GRASPS[last](arm, state)
            if np.linalg.norm(point - arm.eef) < 0.10 and arm.gap < 0.07:  # open, back off
                return arm.act(point + 0.12 * away, arm.rotation, OPEN)
    # the next task's approach is made from the start posture: go back to it in joint space
    # first if the arm is farther from the task than the start posture would be
    site = arm.site(SITES[todo[0]])
    farther = np.linalg.norm(site - arm.eef) > np.linalg.norm(site - arm.home_eef) + 0.05
    if farther and np.abs(HOME - arm.q[:7]).max() > 0.3:
        return arm.home()
    return POLICIES[todo[0]](arm, state)


class KitchenExpert(Model):
    """``infer(batch) -> [N, 1, 9]``: one scripted action per row."""

    def __init__(self) -> None:
        self._arm: KitchenArm | None = None
        self._lock = threading.Lock()  # one model copy; rows of a batch share it in turn

    def bind(self, spaces: Spaces) -> None:
        state = spaces.observation.get(STATE_KEY)
        if state is None or tuple(state.names or ()) != KITCHEN_NAMES:
            raise ContractError(
                f"kitchen-expert reads FrankaKitchen's 59-d {STATE_KEY!r} (robot and object "
                f"joints, named as pytest_hud.suites.gymnasium_robotics' contract); got "
                f"{ {k: f.size for k, f in spaces.observation.items()} }. Fix: run it on "
                "pytest_hud.suites.gymnasium_robotics.kitchen rows"
            )

    def act(self, task: str, state: np.ndarray) -> np.ndarray:
        if task not in KITCHEN_GOALS:
            raise LookupError(f"kitchen-expert drives the FrankaKitchen goals only; got {task!r}")
        with self._lock:
            if self._arm is None:
                self._arm = KitchenArm()
            return kitchen_action(self._arm, KITCHEN_GOALS[task], state)

    def infer(self, batch: Batch) -> np.ndarray:
        states = np.asarray(batch[STATE_KEY], np.float64)
        actions = [
            self.act(task_for_prompt(p), s) for p, s in zip(batch["prompt"], states, strict=True)
        ]
        return np.stack(actions).astype(np.float32)[:, None, :]


def kitchen_agent() -> RobotAgent:
    """The ``kitchen-expert`` agent (``--hud-agent=kitchen-expert`` once installed, or
    ``--hud-agent=pytest_hud.suites.gymnasium_robotics:kitchen_agent``)."""
    return RobotAgent(KitchenExpert(), name="kitchen-expert")
