"""ManiSkill3 as a shipped suite: env module, rows (``.tabletop``: PickCube, PushCube, StackCube,
PegInsertionSide x 50 seeds) and ManiSkill's motion-planning expert (guide:
docs/guides/suites.md).
"""

from __future__ import annotations

from pytest_hud import Environment
from pytest_hud.suites.maniskill.expert import ManiSkillExpert, expert_agent
from pytest_hud.suites.maniskill.sim import CONTROL_RATE, make_env
from pytest_hud.suites.maniskill.tasks import ENV, MAX_STEPS, PROMPTS, rows
from pytest_hud.suites.seeded import seeded_episode

__all__ = [
    "APT",
    "MAX_STEPS",
    "PROMPTS",
    "REQUIRES",
    "ManiSkillExpert",
    "env",
    "expert_agent",
    "make_environment",
    "rows",
]

#: Python requirements of an image or venv serving this module (its tabletop tasks build
#: from primitives and the Panda's URDF in the package: no asset download).
REQUIRES = ["mani-skill==3.0.1"]
#: Debian packages: the Vulkan loader and Mesa's lavapipe (SAPIEN opens a Vulkan device
#: even without cameras). Debian 12's Mesa 22.3 is too old for SAPIEN 3: a host with
#: bookworm-backports' Mesa 25 (scripts/setup) downloads that one into the image.
APT = ["libvulkan1", "mesa-vulkan-drivers"]


def make_environment(name: str = ENV) -> Environment:
    """An Environment serving the four tasks, one template per task."""
    environment = Environment(name, requires=REQUIRES, apt=APT)
    sim = environment.gym(make_env, fps=CONTROL_RATE, robot_type="panda")
    for task, prompt in PROMPTS.items():
        doc = f"ManiSkill {task}: {prompt} (success from the task's evaluate())."
        name = task.replace("-", "_")
        environment.template(task)(seeded_episode(sim, prompt, doc, name, task=task))
    return environment


env = make_environment()
