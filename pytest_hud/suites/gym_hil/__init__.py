"""gym-hil (LeRobot's human-in-the-loop MuJoCo env) as a shipped suite: env module, rows (in
``.pick_cube``) and a scripted expert (guide: docs/guides/suites.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_hud import Environment
from pytest_hud.suites import seeded
from pytest_hud.suites.gym_hil.expert import HilExpert, expert_agent
from pytest_hud.suites.gym_hil.sim import (
    CONTROL_RATE,
    ENV_STATE_NAMES,
    MAX_STEPS,
    STATE_NAMES,
    make_env,
)
from pytest_hud.suites.gym_hil.tasks import ENV, PROMPTS
from pytest_hud.suites.seeded import GL_APT as APT  # Debian packages for headless rendering

__all__ = [
    "APT",
    "MAX_STEPS",
    "PROMPTS",
    "REQUIRES",
    "HilExpert",
    "contract",
    "env",
    "expert_agent",
    "make_hil_environment",
]

#: Python requirements of an image serving this module (the extra's pins, MuJoCo the host's).
REQUIRES = ["gym-hil==0.1.14", seeded.MUJOCO]


def contract(cameras: Sequence[str] = (), size: int = 128) -> dict[str, object]:
    """The robot contract, known without building a sim."""
    features: dict[str, object] = {
        "observation/state": seeded.state_feature(STATE_NAMES),
        "observation/environment_state": seeded.state_feature(ENV_STATE_NAMES),
    }
    for cam in cameras:
        features[f"observation/images/{cam}"] = seeded.image_feature(size)
    features["action"] = seeded.action_feature(
        ["dx", "dy", "dz", "gripper"], [-1.0, -1.0, -1.0, 0.0], [1.0, 1.0, 1.0, 2.0]
    )
    return {"control_rate": CONTROL_RATE, "robot_type": "panda", "features": features}


def make_hil_environment(cameras: Sequence[str] = (), size: int = 128) -> Environment:
    """An Environment serving gym-hil's tasks, one template per task."""
    envs = seeded.serve_seeded(
        "gym-hil",
        _environment,
        dict.fromkeys(PROMPTS, ENV),
        PROMPTS,
        make_env,
        lambda task, cameras, size: contract(cameras, size),
        CONTROL_RATE,
        cameras,
        size,
        renders=True,  # gym-hil builds a renderer, cameras or not
    )
    return envs[ENV]


def _environment(name: str) -> Environment:
    """An Environment made in this module: ``--hud-runtime=docker`` specifies its image here."""
    return Environment(name, requires=REQUIRES, apt=APT)


env = make_hil_environment(*seeded.views_from_environ("GYM_HIL", 128))
