"""gymnasium-robotics as a shipped suite: the Fetch tasks and FrankaKitchen, env module, rows (in
``.fetch`` / ``.kitchen``), the Fetch expert and the kitchen's (guide: docs/guides/suites.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_hud import Environment
from pytest_hud.suites import seeded
from pytest_hud.suites.gymnasium_robotics.expert import FetchExpert, expert_agent
from pytest_hud.suites.gymnasium_robotics.kitchen_expert import KitchenExpert, kitchen_agent
from pytest_hud.suites.gymnasium_robotics.sim import (
    FETCH_RATE,
    KITCHEN_RATE,
    MAX_STEPS,
    make_env,
    state_names,
)
from pytest_hud.suites.gymnasium_robotics.tasks import ENVS, KITCHEN_GOALS, PROMPTS
from pytest_hud.suites.seeded import GL_APT as APT  # Debian packages for headless rendering

__all__ = [
    "APT",
    "MAX_STEPS",
    "PROMPTS",
    "REQUIRES",
    "FetchExpert",
    "KitchenExpert",
    "contract",
    "expert_agent",
    "fetch_pick_and_place",
    "fetch_push",
    "fetch_reach",
    "franka_kitchen",
    "kitchen_agent",
    "make_environments",
]

#: Python requirements of an image serving this module (the extra's pins, MuJoCo the host's).
REQUIRES = ["gymnasium-robotics==1.4.2", seeded.MUJOCO]


def contract(task: str, cameras: Sequence[str] = (), size: int = 224) -> dict[str, object]:
    """One task's robot contract, known without building a sim."""
    kitchen = task in KITCHEN_GOALS
    features: dict[str, object] = {"observation/state": seeded.state_feature(state_names(task))}
    if not kitchen:
        features["observation/goal"] = seeded.state_feature(["x", "y", "z"])
    for cam in cameras:
        features[f"observation/images/{cam}"] = seeded.image_feature(size)
    if kitchen:
        names = [*(f"joint{i}.velocity" for i in range(1, 8)), "finger_left", "finger_right"]
    else:
        names = ["dx", "dy", "dz", "gripper"]
    features["action"] = seeded.action_feature(names, [-1.0] * len(names), [1.0] * len(names))
    rate = KITCHEN_RATE if kitchen else FETCH_RATE
    robot = "franka" if kitchen else "fetch"
    return {"control_rate": rate, "robot_type": robot, "features": features}


def make_environments(cameras: Sequence[str] = (), size: int = 224) -> dict[str, Environment]:
    """One Environment per observation layout (:data:`ENVS`), each serving its tasks."""
    what = "gymnasium-robotics"
    return seeded.serve_seeded(
        what, _environment, ENVS, PROMPTS, make_env, contract, _rate, cameras, size
    )


def _environment(name: str) -> Environment:
    """An Environment made in this module: ``--hud-runtime=docker`` specifies its image here."""
    return Environment(name, requires=REQUIRES, apt=APT)


def _rate(task: str) -> float:
    return KITCHEN_RATE if task in KITCHEN_GOALS else FETCH_RATE


_envs = make_environments(*seeded.views_from_environ("GYMNASIUM_ROBOTICS", 224))
fetch_reach = _envs["fetch-reach"]
fetch_push = _envs["fetch-push"]
fetch_pick_and_place = _envs["fetch-pick-and-place"]
franka_kitchen = _envs["franka-kitchen"]
