"""MetaWorld v3 as a shipped suite: env module, rows (in ``.mt1`` / ``.mt10`` / ``.mt50``) and
expert (guide: docs/guides/suites.md).
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Sequence

from pytest_hud import Environment
from pytest_hud.robot import RobotEndpoint
from pytest_hud.runtime.environment import TemplateFn
from pytest_hud.suites.metaworld.expert import MetaWorldExpert, expert_agent
from pytest_hud.suites.metaworld.sim import CONTROL_RATE, MAX_STEPS, STATE_SIZE, make_env
from pytest_hud.suites.metaworld.tasks import ENV, MT10, MT50, PROMPTS

__all__ = [
    "APT",
    "CAMERAS_VAR",
    "MAX_STEPS",
    "MT10",
    "MT50",
    "PROMPTS",
    "REQUIRES",
    "SIZE_VAR",
    "MetaWorldExpert",
    "contract",
    "env",
    "expert_agent",
    "make_environment",
]

#: Python requirements of an image serving this module (``packaging``: gymnasium's
#: MuJoCo renderer imports it without declaring it).
REQUIRES = ["metaworld==3.1.1", "packaging"]
#: Debian packages for headless rendering: EGL (Mesa; PyOpenGL's EGL platform also loads
#: libGL, without which ``MUJOCO_GL=egl`` fails on ``glGetError``) and OSMesa. The same
#: list as the LIBERO suite's (GLib is opencv's there), so their images share one apt
#: download.
APT = ["libegl1", "libegl-mesa0", "libgl1-mesa-dri", "libgbm1", "libosmesa6"]
APT += ["libgl1", "libglib2.0-0"]

CAMERAS_VAR = "PYTEST_HUD_METAWORLD_CAMERAS"
SIZE_VAR = "PYTEST_HUD_METAWORLD_SIZE"


def contract(cameras: Sequence[str] = (), size: int = 224) -> dict[str, object]:
    """The robot contract, known without building a sim (so booting builds nothing)."""
    features: dict[str, object] = {
        "observation/state": {"role": "observation", "dtype": "float32", "shape": [STATE_SIZE]},
    }
    for cam in cameras:
        features[f"observation/images/{cam}"] = {
            "role": "observation",
            "type": "rgb",
            "dtype": "image",
            "names": ["height", "width", "channel"],
            "shape": [size, size, 3],
        }
    features["action"] = {
        "role": "action",
        "dtype": "float32",
        "shape": [4],
        "names": ["dx", "dy", "dz", "gripper"],
        "stats": {"min": [-1.0] * 4, "max": [1.0] * 4},
    }
    return {"control_rate": CONTROL_RATE, "robot_type": "sawyer", "features": features}


def make_environment(cameras: Sequence[str] = (), size: int = 224, name: str = ENV) -> Environment:
    """An Environment serving every MetaWorld v3 task, one template per task name."""
    cameras = tuple(cameras)
    if cameras:
        from pytest_hud.doctor import preflight

        preflight()  # one RenderError with the fix, before any sim spawns
    environment = Environment(name, requires=REQUIRES, apt=APT)
    sim = environment.gym(
        make_env,
        make_kwargs={"cameras": cameras, "size": size},
        contract=contract(cameras, size),
        fps=CONTROL_RATE,
    )
    for task in PROMPTS:
        environment.template(task)(_episode(sim, task))
    return environment


def _episode(sim: RobotEndpoint, task: str) -> TemplateFn:
    prompt = PROMPTS[task]

    async def episode(variation: int | None = None, seed: int = 0) -> AsyncGenerator[object, None]:
        ep = await sim.reset(task=task, variation=variation, seed=seed)
        yield {"prompt": prompt, "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    episode.__doc__ = f"MetaWorld {task}: {prompt} (success from info['success'])."
    episode.__name__ = episode.__qualname__ = task.replace("-", "_")
    return episode


def _cameras_from_environ() -> tuple[str, ...]:
    return tuple(c.strip() for c in os.environ.get(CAMERAS_VAR, "").split(",") if c.strip())


env = make_environment(_cameras_from_environ(), int(os.environ.get(SIZE_VAR) or 224))
