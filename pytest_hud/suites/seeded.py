"""What the seeded suites share (:mod:`.robosuite`, :mod:`.gymnasium_robotics`, :mod:`.gym_hil`):
rows are (task, seed), one template per task (:func:`seeded_episode`, which the Kinetix and
ManiSkill suites' templates are too), a contract known without building a sim and the camera
variables. Tasks whose observations differ (FetchReach has no block, each robosuite task its
own objects) are served by Environments of their own in one module, each named as its rows'
``env``.

A sim of these suites is a gymnasium env whose factory takes ``task`` (a build arg, so one
substrate rebuilds only when the task changes) and whose ``reset(seed=)`` makes the episode a
function of the seed; success comes through ``info["success"]``, latched by the bridge.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pytest_hud import Environment
from pytest_hud.robot import RobotEndpoint
from pytest_hud.runtime.environment import TemplateFn

__all__ = [
    "GL_APT",
    "MUJOCO",
    "action_feature",
    "image_feature",
    "render_cameras",
    "seeded_episode",
    "serve_seeded",
    "state_feature",
    "views_from_environ",
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


def views_from_environ(suite: str, size: int) -> tuple[tuple[str, ...], int]:
    """The cameras a suite's env module serves and their size, from ``PYTEST_HUD_<suite>_CAMERAS``
    (comma-separated names; none by default: state only) and ``PYTEST_HUD_<suite>_SIZE`` (else
    ``size``)."""
    names = os.environ.get(f"PYTEST_HUD_{suite}_CAMERAS", "").split(",")
    return tuple(c.strip() for c in names if c.strip()), int(
        os.environ.get(f"PYTEST_HUD_{suite}_SIZE") or size
    )


def render_cameras(renderer: Any, data: Any, cameras: Sequence[str]) -> dict[str, np.ndarray]:
    """One frame per named MuJoCo camera, as ``observation/images/<camera>``."""
    out = {}
    for cam in cameras:
        renderer.update_scene(data, camera=cam)
        out[f"observation/images/{cam}"] = renderer.render().copy()
    return out


def serve_seeded(
    what: str,
    new: Callable[[str], Environment],
    envs: Mapping[str, str],
    prompts: Mapping[str, str],
    factory: Callable[..., object],
    contract: Callable[[str, tuple[str, ...], int], Mapping[str, object]],
    fps: float | Callable[[str], float],
    cameras: Sequence[str],
    size: int,
    *,
    renders: bool = False,
) -> dict[str, Environment]:
    """The suite ``what``'s Environments, one per env of ``envs`` (task -> the env serving it,
    the rows' ``env`` column), each made by ``new(name)`` and serving ``factory``'s sim (built
    with ``cameras`` of ``size`` pixels) with one template per task of ``prompts`` (its rows'
    ids); an env's contract and rate (``fps``, or a function of the task) are those of its
    first task. ``new`` is a function of the suite's own module: the file that constructs an
    Environment is the env module ``--hud-runtime=docker`` specifies the image from.
    ``renders``: the sim renders at build, cameras or not."""
    cameras = tuple(cameras)
    if cameras or renders:
        from pytest_hud.doctor import preflight

        preflight()  # one RenderError with the fix, before any sim spawns
    out: dict[str, Environment] = {}
    for name in dict.fromkeys(envs.values()):
        tasks = [t for t, e in envs.items() if e == name]
        environment = new(name)
        sim = environment.gym(
            factory,
            make_kwargs={"cameras": cameras, "size": size},
            contract=contract(tasks[0], cameras, size),
            fps=fps(tasks[0]) if callable(fps) else fps,
        )
        for task in tasks:
            doc = f"{what} {task}: {prompts[task]}."
            fn = task.replace("-", "_").replace(" ", "_")
            environment.template(task)(seeded_episode(sim, prompts[task], doc, fn, task=task))
        out[name] = environment
    return out


def seeded_episode(
    sim: RobotEndpoint, prompt: str, doc: str, name: str, **build: str
) -> TemplateFn:
    """A template's function: an episode of ``sim`` reset with its ``build`` args (the task
    or level: one substrate rebuilds only when they change) and the row's ``seed``, prompted
    with ``prompt`` and graded by the sim; ``doc`` and ``name`` are its docstring and name."""

    async def episode(seed: int = 0) -> AsyncGenerator[object, None]:
        ep = await sim.reset(seed=seed, **build)
        yield {"prompt": prompt, "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    episode.__doc__ = doc
    episode.__name__ = episode.__qualname__ = name
    return episode
