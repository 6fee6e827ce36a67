"""Kinetix as a shipped suite: env module, rows (in ``.s`` / ``.m`` / ``.l``: the hand-made
levels kinetix-env ships) and a scripted expert (guide: docs/guides/suites.md).
"""

from __future__ import annotations

import os

from pytest_hud import Environment
from pytest_hud.suites.kinetix.expert import KinetixExpert, expert_agent
from pytest_hud.suites.kinetix.image import APT, PIXELS_VAR, REQUIRES
from pytest_hud.suites.kinetix.sim import CONTROL_RATE, MAX_STEPS, make_env
from pytest_hud.suites.kinetix.tasks import ENV, LEVELS, PROMPTS, SIZES, rows
from pytest_hud.suites.seeded import seeded_episode

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
        doc = f"{PROMPTS[level]} (success: Kinetix's GoalR when the episode ends)."
        environment.template(level)(seeded_episode(sim, PROMPTS[level], doc, level, level=level))
    return environment


env = make_environment(os.environ.get(PIXELS_VAR, "") not in ("", "0"))
