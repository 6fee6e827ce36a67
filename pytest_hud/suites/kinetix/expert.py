"""``kinetix-expert``: one constant control per level, read from the prompt. A hand-made Kinetix
level is solved open-loop when its one way to win is "fire this thruster" or "turn these motors
one way"; the table holds, per level, the control among seven constant ones (all off, all on, the
thrusters, each thruster alone, the motors either way) that solves it from
the level's stored start. Levels that need feedback (aiming, balancing) get all-off and fail:
the expert's rate is what it really solves (docs/guides/suites.md).
"""

from __future__ import annotations

import numpy as np

from pytest_hud.robot import ContractError, Model, RobotAgent, Spaces
from pytest_hud.robot.agent.model import Batch
from pytest_hud.suites.kinetix.sim import ACTION_SIZE
from pytest_hud.suites.kinetix.tasks import level_for_prompt

__all__ = ["CONTROLS", "SCRIPTS", "KinetixExpert", "expert_agent"]

#: The constant controls tried on every level: 4 motors in [-1, 1], 2 thrusters in [0, 1].
CONTROLS: dict[str, tuple[float, ...]] = {
    "off": (0, 0, 0, 0, 0, 0),
    "all": (1, 1, 1, 1, 1, 1),
    "thrusters": (0, 0, 0, 0, 1, 1),
    "thruster_0": (0, 0, 0, 0, 1, 0),
    "thruster_1": (0, 0, 0, 0, 0, 1),
    "motors": (1, 1, 1, 1, 0, 0),
    "motors_back": (-1, -1, -1, -1, 0, 0),
}
#: level -> the control that solves it (measured on kinetix-env 3.0.2, 256 steps, seed 0;
#: searched: the 10 small levels and the first 8 medium ones, no large one).
SCRIPTS: dict[str, str] = {
    "s_h0_weak_thrust": "thruster_0",
    "s_h1_thrust_over_ball": "thruster_0",
    "s_h2_one_wheel_car": "motors",
    "s_h5_rotate_fall": "motors",
    "s_h6_unicycle_right": "motors_back",
    "s_h7_unicycle_left": "motors",
    "m_arm_hard": "motors",
    "m_h11_thrust_left_easy": "thrusters",
}


class KinetixExpert(Model):
    """``infer(batch) -> [N, 1, 6]``: the level's constant control, the level read from
    the row's prompt."""

    def bind(self, spaces: Spaces) -> None:
        action = spaces.action_feature
        if action is None or action.size != ACTION_SIZE:
            got = action.size if action is not None else "none"
            raise ContractError(
                f"kinetix-expert sends Kinetix's {ACTION_SIZE}-d continuous action; the env "
                f"takes {got}. Fix: run it on pytest_hud.suites.kinetix rows"
            )

    def infer(self, batch: Batch) -> np.ndarray:
        actions = [CONTROLS[SCRIPTS.get(level_for_prompt(str(p)), "off")] for p in batch["prompt"]]
        return np.asarray(actions, np.float32)[:, None, :]


def expert_agent() -> RobotAgent:
    """The ``kinetix-expert`` agent (``--hud-agent=kinetix-expert`` once installed, or
    ``--hud-agent=pytest_hud.suites.kinetix:expert_agent``)."""
    return RobotAgent(KinetixExpert(), name="kinetix-expert")
