"""Kinetix as a shipped suite: env module, rows (in ``.s`` / ``.m`` / ``.l``: the hand-made
levels kinetix-env ships) and a scripted expert (guide: docs/guides/suites.md).
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from typing import Any

from pytest_hud import Environment
from pytest_hud.suites.kinetix.expert import KinetixExpert, expert_agent
from pytest_hud.suites.kinetix.image import APT, PIXELS_VAR, REQUIRES
from pytest_hud.suites.kinetix.sim import CONTROL_RATE, MAX_STEPS, make_env
from pytest_hud.suites.kinetix.tasks import ENV, LEVELS, PROMPTS, SIZES, rows

__all__ = [
    "APT",
    "LEVELS",
    "MAX_STEPS",
    "PIXELS_VAR",
    "PROMPTS",
    "REQUIRES",
    "SIZES",
    "KinetixExpert",
    "env",
    "expert_agent",
    "make_environment",
    "rows",
]


def make_environment(pixels: bool = False, name: str = ENV) -> Environment:
    """An Environment serving every shipped Kinetix level, one template per level."""
    environment = Environment(name, requires=REQUIRES, apt=APT)
    # the contract comes from the sim's spaces: the state's size differs by level size
    # (140, 247, 679 values), the action is the same 6-d box everywhere
    sim = environment.gym(
        make_env, make_kwargs={"pixels": pixels}, fps=CONTROL_RATE, robot_type="kinetix"
    )
    for level in LEVELS:
        environment.template(level)(_episode(sim, level))
    return environment


def _episode(sim: Any, level: str) -> Any:
    prompt = PROMPTS[level]

    async def episode(seed: int = 0) -> AsyncGenerator[Any, Any]:
        ep = await sim.reset(level=level, seed=seed)
        yield {"prompt": prompt, "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    episode.__doc__ = f"{prompt} (success: Kinetix's GoalR when the episode ends)."
    episode.__name__ = episode.__qualname__ = level
    return episode


env = make_environment(os.environ.get(PIXELS_VAR, "") not in ("", "0"))
