"""gym-hil (LeRobot's human-in-the-loop MuJoCo env) as a shipped suite: env module, rows (in
``.pick_cube``) and a scripted expert (guide: docs/guides/suites.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pytest_hud import Environment
from pytest_hud.suites.gym_hil.expert import HilExpert, expert_agent
from pytest_hud.suites.gym_hil.sim import (
    CONTROL_RATE,
    ENV_STATE_NAMES,
    MAX_STEPS,
    STATE_NAMES,
    make_env,
)
from pytest_hud.suites.gym_hil.tasks import ENV, PROMPTS
from pytest_hud.suites.seeded import (
    GL_APT,
    MUJOCO,
    action_feature,
    cameras_from_environ,
    image_feature,
    serve_tasks,
    state_feature,
)

__all__ = [
    "APT",
    "CAMERAS_VAR",
    "MAX_STEPS",
    "PROMPTS",
    "REQUIRES",
    "SIZE_VAR",
    "HilExpert",
    "contract",
    "env",
    "expert_agent",
    "make_hil_environment",
]

#: Python requirements of an image serving this module (the extra's pins, MuJoCo the host's).
REQUIRES = ["gym-hil==0.1.14", MUJOCO]
#: Debian packages for headless rendering: gym-hil builds a renderer even without cameras.
APT = list(GL_APT)

CAMERAS_VAR = "PYTEST_HUD_GYM_HIL_CAMERAS"
SIZE_VAR = "PYTEST_HUD_GYM_HIL_SIZE"


def contract(cameras: Sequence[str] = (), size: int = 128) -> dict[str, object]:
    """The robot contract, known without building a sim."""
    features: dict[str, object] = {
        "observation/state": state_feature(STATE_NAMES),
        "observation/environment_state": state_feature(ENV_STATE_NAMES),
    }
    for cam in cameras:
        features[f"observation/images/{cam}"] = image_feature(size)
    features["action"] = action_feature(
        ["dx", "dy", "dz", "gripper"], [-1.0, -1.0, -1.0, 0.0], [1.0, 1.0, 1.0, 2.0]
    )
    return {"control_rate": CONTROL_RATE, "robot_type": "panda", "features": features}


def make_hil_environment(cameras: Sequence[str] = (), size: int = 128) -> Environment:
    """An Environment serving gym-hil's tasks, one template per task."""
    cameras = tuple(cameras)
    return serve_tasks(
        Environment(ENV, requires=REQUIRES, apt=APT),
        PROMPTS,
        make_env,
        contract=contract(cameras, size),
        fps=CONTROL_RATE,
        make_kwargs={"cameras": cameras, "size": size},
        rendering=True,  # gym-hil renders at build, cameras or not
        what="gym-hil",
    )


env = make_hil_environment(cameras_from_environ(CAMERAS_VAR), int(os.environ.get(SIZE_VAR) or 128))
