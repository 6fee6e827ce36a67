"""The controller as a native pytest-hud agent (the same function the server runs)."""

from __future__ import annotations

from typing import Any

import numpy as np
from cartpole_bench import controller

from pytest_hud.robot.agent.agent import RobotAgent
from pytest_hud.robot.agent.model import Model


class BalanceModel(Model):
    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        key = "states" if "states" in batch else "observation/state"
        return controller(np.asarray(batch[key]))[:, None, :]


def balance() -> RobotAgent:
    return RobotAgent(BalanceModel(), name="balance")
