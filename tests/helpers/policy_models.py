"""Deterministic numpy models for the policy-server tests (importable by a server process)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pytest_hud.robot import RobotAgent
from pytest_hud.robot.agent.model import Model


class StateModel(Model):
    """``actions[n, t, a] = tanh(sum(state[n]) * (a + 1) / 4) + 0.1 t + mean(image[n]) / 2550``.

    Depends on every row's state and image, so a row that reaches the wrong forward slot
    or arrives corrupted shows. ``delay`` sleeps per forward (a fixed forward cost);
    ``boom`` raises when any row's prompt is ``"boom"``.
    """

    def __init__(self, action_size: int = 2, chunk: int = 3, delay: float = 0.0) -> None:
        self.action_size = action_size
        self.chunk = chunk
        self.delay = delay

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        prompts = batch.get("prompt") or []
        if "boom" in prompts:
            raise RuntimeError("the model blew up on purpose")
        state = np.asarray(batch["observation/state"], np.float32)
        n = state.shape[0]
        if self.delay:
            time.sleep(self.delay)
        total = state.reshape(n, -1).sum(axis=1)
        image = batch.get("observation/image")
        bias = (
            np.asarray(image, np.float32).reshape(n, -1).mean(axis=1) / 2550
            if image is not None
            else np.zeros(n, np.float32)
        )
        a = np.arange(self.action_size, dtype=np.float32)
        t = np.arange(self.chunk, dtype=np.float32)
        out = (
            np.tanh(total[:, None, None] * (a[None, None, :] + 1) / 4)
            + 0.1 * t[None, :, None]
            + bias[:, None, None]
        )
        return out.astype(np.float32)

    def expected(self, row: dict[str, Any]) -> np.ndarray:
        """The ``[T, A]`` chunk for one row, computed in this process."""
        batch = {k: (np.asarray(v)[None] if k != "prompt" else [v]) for k, v in row.items()}
        return self.infer(batch)[0]


def state_agent() -> RobotAgent:
    """For ``--agent tests/helpers/policy_models.py:state_agent``: pendulum-sized actions."""
    return RobotAgent(StateModel(action_size=1, chunk=1, delay=0.005), name="state")


def reach_agent() -> RobotAgent:
    """``--hud-agent=policy_models:reach_agent``: the scripted SO-101 reach policy (the shipped
    robot plugin's, lerobot_robot_so101_sim.agents)."""
    from lerobot_robot_so101_sim.agents import ReachModel

    return RobotAgent(ReachModel(), name="reach-scripted")


def weak_reach_agent() -> RobotAgent:
    """``--hud-agent=policy_models:weak_reach_agent``: the same policy moving at a sixth of
    the speed, so it rarely reaches the cube within a short episode."""
    from lerobot_robot_so101_sim.agents import ReachModel

    return RobotAgent(ReachModel(scale=1 / 6), name="reach-slow")


def hanging_reach_agent() -> RobotAgent:
    """The reach policy, hanging at the process's ``$HANG_AT``-th inference after writing
    ``$HANG_FILE``: a session to kill -9 in the middle of an episode."""
    from lerobot_robot_so101_sim.agents import ReachModel

    class HangingReachModel(ReachModel):
        count = 0

        def infer(self, batch):
            import os

            HangingReachModel.count += 1
            if HangingReachModel.count == int(os.environ.get("HANG_AT", "0")):
                with open(os.environ["HANG_FILE"], "w") as f:
                    f.write(str(os.getpid()))
                time.sleep(600)
            return super().infer(batch)

    return RobotAgent(HangingReachModel(), name="reach-scripted")
