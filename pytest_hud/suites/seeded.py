"""What the seeded suites share (:mod:`.robosuite`, :mod:`.gymnasium_robotics`, :mod:`.gym_hil`):
rows are (task, seed), one template per task, a contract known without building a sim and the
camera variables. Tasks whose observations differ
(FetchReach has no block, each robosuite task its own objects) are served by Environments of
their own in one module, each named as its rows' ``env``.

A sim of these suites is a gymnasium env whose factory takes ``task`` (a build arg, so one
substrate rebuilds only when the task changes) and whose ``reset(seed=)`` makes the episode a
function of the seed; success comes through ``info["success"]``, latched by the bridge.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pytest_hud import Environment, Task

__all__ = [
    "GL_APT",
    "MUJOCO",
    "action_feature",
    "cameras_from_environ",
    "image_feature",
    "render_cameras",
    "seed_rows",
    "serve_tasks",
    "state_feature",
]

#: Debian packages for headless MuJoCo rendering (EGL and OSMesa with Mesa, libGL that
#: PyOpenGL loads, GLib for opencv): the list MetaWorld and LIBERO declare, so their images
#: share one apt download.
GL_APT = ["libegl1", "libegl-mesa0", "libgl1-mesa-dri", "libgbm1", "libosmesa6"]
GL_APT += ["libgl1", "libglib2.0-0"]
#: The MuJoCo the main stack runs the seeded suites on (MetaWorld 3.1.1 pins it), pinned in
#: their images too: unpinned, an image takes the newest, and on mujoco 4.0.1 robosuite 1.5.1
#: and gymnasium-robotics 1.4.2 build no env (their joint-type assertions fail), gym-hil takes
#: 3.8 (its bound is <3.9), another physics than the host's.
MUJOCO = "mujoco==3.3.0"


def state_feature(names: Sequence[str]) -> dict[str, object]:
    """A flat float32 observation whose elements are ``names``."""
    return {"role": "observation", "dtype": "float32", "shape": [len(names)], "names": list(names)}


def image_feature(size: int) -> dict[str, object]:
    """A ``size`` x ``size`` RGB camera."""
    return {
        "role": "observation",
        "type": "rgb",
        "dtype": "image",
        "names": ["height", "width", "channel"],
        "shape": [size, size, 3],
    }


def action_feature(
    names: Sequence[str], low: Sequence[float], high: Sequence[float]
) -> dict[str, object]:
    """The one action feature, its bounds as ``stats``."""
    return {
        "role": "action",
        "dtype": "float32",
        "shape": [len(names)],
        "names": list(names),
        "stats": {"min": [float(v) for v in low], "max": [float(v) for v in high]},
    }


def cameras_from_environ(var: str) -> tuple[str, ...]:
    """The comma-separated camera names in ``$var`` (none by default: state only)."""
    return tuple(c.strip() for c in os.environ.get(var, "").split(",") if c.strip())


def render_cameras(renderer: Any, data: Any, cameras: Sequence[str]) -> dict[str, np.ndarray]:
    """One frame per named MuJoCo camera, as ``observation/images/<camera>``."""
    out = {}
    for cam in cameras:
        renderer.update_scene(data, camera=cam)
        out[f"observation/images/{cam}"] = renderer.render().copy()
    return out


def serve_tasks(
    environment: Environment,
    prompts: Mapping[str, str],
    factory: Callable[..., Any],
    *,
    contract: Mapping[str, Any],
    fps: float,
    make_kwargs: Mapping[str, Any],
    rendering: bool,
    what: str,
) -> Environment:
    """``environment`` serving ``factory``'s sim and one template per task of ``prompts``
    (its rows' ids). The suite's own module constructs the Environment: the file that does
    is the env module ``--hud-runtime=docker`` specifies the image from."""
    if rendering:
        from pytest_hud.doctor import preflight

        preflight()  # one RenderError with the fix, before any sim spawns
    sim = environment.gym(factory, make_kwargs=dict(make_kwargs), contract=contract, fps=fps)
    for task, prompt in prompts.items():
        environment.template(task)(_episode(sim, task, prompt, what))
    return environment


def _episode(sim: Any, task: str, prompt: str, what: str) -> Any:
    async def episode(seed: int = 0) -> AsyncGenerator[Any, Any]:
        ep = await sim.reset(task=task, seed=seed)
        yield {"prompt": prompt, "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    episode.__doc__ = f"{what} {task}: {prompt}."
    episode.__name__ = episode.__qualname__ = task.replace("-", "_").replace(" ", "_")
    return episode


def seed_rows(
    module: str, tasks: Sequence[str], seeds: int, env_of: Mapping[str, str]
) -> list[Task]:
    """``tasks`` x seeds ``0..seeds-1``, each row in its task's env (``env_of``) and carrying
    its ``module`` column."""
    if seeds < 1:
        raise ValueError(f"seeds: expected at least 1, got {seeds}")
    unknown = [t for t in tasks if t not in env_of]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown} in {module}; known: {', '.join(env_of)}")
    return [
        Task(env_of[t], t, {"seed": s}, metadata={"module": module})
        for t in tasks
        for s in range(seeds)
    ]
