"""robosuite as a shipped suite: Lift, Stack, Door and TwoArmLift, env module, rows (in ``.lift``,
``.stack``, ``.door``, ``.two_arm_lift``) and a scripted expert (guide: docs/guides/suites.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_hud import Environment
from pytest_hud.suites import seeded
from pytest_hud.suites.robosuite.expert import RobosuiteExpert, expert_agent
from pytest_hud.suites.robosuite.sim import CONTROL_RATE, ROBOT_PARTS, make_env
from pytest_hud.suites.robosuite.tasks import ENVS, MAX_STEPS, OBJECTS, PROMPTS, ROBOTS
from pytest_hud.suites.seeded import GL_APT as APT  # Debian packages for headless rendering

__all__ = [
    "APT",
    "MAX_STEPS",
    "PROMPTS",
    "REQUIRES",
    "RobosuiteExpert",
    "contract",
    "door_env",
    "expert_agent",
    "lift_env",
    "make_environments",
    "stack_env",
    "two_arm_lift_env",
]

#: Python requirements of an image serving this module (the extra's pins, MuJoCo the host's:
#: robosuite 1.5.2 pins mink 0.0.5, which needs numpy<2; 1.5.1 takes a newer mink).
REQUIRES = ["robosuite==1.5.1", "mink>=0.0.10,<1", seeded.MUJOCO]

_AXES = {"eef_pos": "xyz", "eef_quat": "xyzw", "gripper_qpos": "lr"}


def contract(task: str, cameras: Sequence[str] = (), size: int = 224) -> dict[str, object]:
    """One task's robot contract, known without building a sim."""
    arms = range(len(ROBOTS[task]))
    state = [f"robot{i}_{key}.{a}" for i in arms for key, _ in ROBOT_PARTS for a in _AXES[key]]
    objects = [f"{key}.{j}" for key, n in OBJECTS[task] for j in range(n)]
    features: dict[str, object] = {
        "observation/state": seeded.state_feature(state),
        "observation/environment_state": seeded.state_feature(objects),
    }
    for cam in cameras:
        features[f"observation/images/{cam}"] = seeded.image_feature(size)
    names = [
        f"robot{i}_{n}" for i in arms for n in ("dx", "dy", "dz", "dax", "day", "daz", "gripper")
    ]
    features["action"] = seeded.action_feature(names, [-1.0] * len(names), [1.0] * len(names))
    return {"control_rate": CONTROL_RATE, "robot_type": "panda", "features": features}


def make_environments(cameras: Sequence[str] = (), size: int = 224) -> dict[str, Environment]:
    """One Environment per task (their observations differ), named as in :data:`ENVS`."""
    return seeded.serve_seeded(
        "robosuite", _environment, ENVS, PROMPTS, make_env, contract, CONTROL_RATE, cameras, size
    )


def _environment(name: str) -> Environment:
    """An Environment made in this module: ``--hud-runtime=docker`` specifies its image here."""
    return Environment(name, requires=REQUIRES, apt=APT)


_envs = make_environments(*seeded.views_from_environ("ROBOSUITE", 224))
# not named as the row packages (.lift, ...): importing one would rebind the name
lift_env = _envs["robosuite-lift"]
stack_env = _envs["robosuite-stack"]
door_env = _envs["robosuite-door"]
two_arm_lift_env = _envs["robosuite-two-arm-lift"]
