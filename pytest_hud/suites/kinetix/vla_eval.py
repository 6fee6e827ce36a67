"""vla-eval's own Kinetix benchmark class served as an env module (``env.vla_eval``): the RTC
paper's tasks exactly as vla-eval evaluates them (its observation, its action handling, its
success rule), from the Kinetix suite's image. Rows: ``.rtc`` (the eight of its twelve tasks
whose levels kinetix-env ships; catapult, cartpole_thrust, catcher_v3 and trampoline come from
the RTC repository's ``worlds/``, a download: pass ``rtc_worlds_dir`` to serve them).

    pytest --pyargs pytest_hud.suites.kinetix.rtc --hud-runtime=docker --hud-agent=...

Observation (vla-eval's symbolic mode, what RTC's policies read): ``state`` (the flat
symbolic state, 679 values for the large levels) and the task's name as the prompt; action:
6 values. ``PYTEST_HUD_KINETIX_PIXELS=1`` serves vla-eval's 125 x 125 ``images/viewport``
instead.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator

from vla_eval.benchmarks.kinetix.benchmark import (
    ACTION_DIM,
    MAX_TIMESTEPS,
    RTC_12_TASKS,
    KinetixBenchmark,
)

from pytest_hud import Environment
from pytest_hud.suites.kinetix.image import APT, PIXELS_VAR, REQUIRES

__all__ = ["ENV", "OFFLINE_TASKS", "env", "rows"]

ENV = "kinetix-vla-eval"
MODULE = "pytest_hud.suites.kinetix.vla_eval"
#: RTC tasks whose level kinetix-env ships (``l/<level>.json``): no download.
OFFLINE_TASKS = [
    t
    for t in RTC_12_TASKS
    if t["level"] not in {"catapult", "cartpole_thrust", "catcher_v3", "trampoline"}
]

_PIXELS = os.environ.get(PIXELS_VAR, "") not in ("", "0")
env = Environment(ENV, requires=REQUIRES, apt=APT)
sim = env.vla_eval(
    KinetixBenchmark,
    max_steps=MAX_TIMESTEPS,
    action_dim=ACTION_DIM,  # its action spec says "raw", without a size
    observation_type="pixels" if _PIXELS else "symbolic",
)


@env.template()
async def episode(task: dict[str, object]) -> AsyncGenerator[object, None]:
    """One vla-eval Kinetix episode (``task``: its ``name``, ``level``, ``episode_idx``)."""
    ep = await sim.reset(task=task)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])


def rows(episodes: int = 1) -> list[dict[str, object]]:
    """JSONL rows of :data:`OFFLINE_TASKS` x ``episodes`` (``episode_idx`` 0..)."""
    return [
        {"env": ENV, "id": "episode", "args": {"task": {**t, "episode_idx": k}}, "module": MODULE}
        for t in OFFLINE_TASKS
        for k in range(episodes)
    ]
