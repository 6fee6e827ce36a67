"""``maniskill-expert``: ManiSkill's motion-planning solutions as an agent. From the episode's
first observation (the simulator's full state, ``observation/env_state``, and the seed the
scene was built with, ``observation/episode_seed``) it plans the whole episode and sends it
as one action chunk; if the episode is still running when the chunk ends (a plan that
missed), it plans again from where the arm is.
"""

from __future__ import annotations

import numpy as np

from pytest_hud.robot import ContractError, Model, RobotAgent, Spaces
from pytest_hud.robot.agent.model import Batch
from pytest_hud.suites.maniskill.planner import plan
from pytest_hud.suites.maniskill.sim import ENV_STATE_KEY, SEED_KEY, seed_of
from pytest_hud.suites.maniskill.tasks import task_for_prompt

__all__ = ["ManiSkillExpert", "expert_agent"]


class ManiSkillExpert(Model):
    """``infer(batch) -> [N, T, 8]``: each row's motion plan, padded with its last action
    to the batch's longest."""

    def bind(self, spaces: Spaces) -> None:
        planned_from = {ENV_STATE_KEY, SEED_KEY}
        if not planned_from <= set(spaces.observation) or spaces.action_feature.size != 8:
            raise ContractError(
                f"maniskill-expert plans from {sorted(planned_from)} and sends the Panda's 8 "
                f"joint-position targets; got observations {list(spaces.observation)} and a "
                f"{spaces.action_feature.size}-d action. Fix: run it on "
                "pytest_hud.suites.maniskill rows"
            )

    def infer(self, batch: Batch) -> np.ndarray:
        plans = []
        rows = zip(batch["prompt"], batch[ENV_STATE_KEY], batch[SEED_KEY], strict=True)
        for prompt, state, seed in rows:
            actions, _ = plan(task_for_prompt(prompt), np.asarray(state), seed_of(seed))
            if not len(actions):
                raise RuntimeError(f"ManiSkill's solution for {prompt!r} planned no motion")
            plans.append(actions)
        longest = max(len(p) for p in plans)
        padded = [np.concatenate([p, np.repeat(p[-1:], longest - len(p), 0)]) for p in plans]
        return np.stack(padded).astype(np.float32)


def expert_agent() -> RobotAgent:
    """The ``maniskill-expert`` agent (``--hud-agent=maniskill-expert`` once installed, or
    ``--hud-agent=pytest_hud.suites.maniskill:expert_agent``)."""
    return RobotAgent(ManiSkillExpert(), name="maniskill-expert")
