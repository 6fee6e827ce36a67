"""The controller as a native pytest-hud agent (the same function the server runs)."""

from __future__ import annotations

from typing import Any

import numpy as np
from cartpole_bench import controller

from pytest_hud.robot.agent.agent import RobotAgent
from pytest_hud.robot.agent.ensembler import Ensembler
from pytest_hud.robot.agent.model import Model

#: The chunk the chunked agents and ``controller_server.py --chunk`` return, and how
#: their Ensembler runs it: a new chunk every 2 ticks, the newest chunk's action.
CHUNK = 4
ENSEMBLE: dict[str, Any] = {"mode": "newest", "query_every": 2}


class BalanceModel(Model):
    def __init__(self, chunk: int = 1) -> None:
        self.chunk = chunk

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        key = "states" if "states" in batch else "observation/state"
        push = controller(np.asarray(batch[key]))[:, None, :]
        return np.repeat(push, self.chunk, axis=1)  # [N, chunk, 1]: the push held


def balance() -> RobotAgent:
    return RobotAgent(BalanceModel(), name="balance")


def balance_chunked() -> RobotAgent:
    """Chunks of ``CHUNK`` through an Ensembler: what a vla-eval server returning the same
    chunks must match row for row."""
    return RobotAgent(BalanceModel(CHUNK), ensembler=Ensembler(**ENSEMBLE), name="balance-chunked")
