"""``metaworld-expert``: metaworld's stateless scripted policies as one Model; a row's task comes
from its prompt, so the contract stays what any policy sees.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_hud.robot import ContractError, Model, RobotAgent, Spaces
from pytest_hud.robot.agent.model import Batch
from pytest_hud.suites.metaworld.tasks import task_for_prompt

__all__ = ["STATE_KEY", "MetaWorldExpert", "expert_agent"]

STATE_KEY = "observation/state"


class MetaWorldExpert(Model):
    """``infer(batch) -> [N, 1, 4]``: one scripted action per row, the task read from
    the row's prompt."""

    def __init__(self) -> None:
        self._policies: dict[str, object] = {}

    def bind(self, spaces: Spaces) -> None:
        state = spaces.observation.get(STATE_KEY)
        if state is None or state.size != 39:
            got = f"size {state.size}" if state is not None else f"{list(spaces.observation)}"
            raise ContractError(
                f"metaworld-expert reads a 39-d {STATE_KEY!r} (MetaWorld v3's state); got "
                f"{got}. Fix: run it on pytest_hud.suites.metaworld rows"
            )

    def _policy(self, prompt: str) -> Any:
        task = task_for_prompt(prompt)
        policy = self._policies.get(task)
        if policy is None:
            from metaworld.policies import ENV_POLICY_MAP

            factory: Any = ENV_POLICY_MAP[task]  # typed as the abstract base class
            policy = self._policies[task] = factory()
        return policy

    def infer(self, batch: Batch) -> np.ndarray:
        states = np.asarray(batch[STATE_KEY], np.float64)
        prompts = batch["prompt"]
        actions = [self._policy(p).get_action(s) for p, s in zip(prompts, states, strict=True)]
        return np.stack(actions).astype(np.float32)[:, None, :]


def expert_agent() -> RobotAgent:
    """The ``metaworld-expert`` agent (``--hud-agent=metaworld-expert`` once installed, or
    ``--hud-agent=pytest_hud.suites.metaworld:expert_agent``)."""
    return RobotAgent(MetaWorldExpert(), name="metaworld-expert")
