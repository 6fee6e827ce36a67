"""A GPU-shaped policy for the CartPole peer bench (bench/gpu_shaped.py): the scripted
controller behind a forward that costs a fixed latency plus a small cost per row and uses no
CPU while it "runs" (a sleep, as a GPU kernel leaves the host's cores to the sims), one
forward at a time per process (as one GPU runs one batch at a time).

``$GPU_FORWARD_MS`` (default 50) and ``$GPU_ROW_MS`` (default 0.5) set the cost. The same
:func:`forward` backs pytest-hud's model (:func:`agent`, ``--hud-agent=gpu_shaped:agent``)
and vla-eval's server (``controller_server.py --forward-ms 50 --row-ms 0.5``).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np
from cartpole_bench import controller

from pytest_hud.robot.agent.agent import RobotAgent
from pytest_hud.robot.agent.model import Model

_GPU = threading.Lock()  # one forward at a time, whoever asks


def forward(rows: int, fixed_ms: float, row_ms: float) -> float:
    """Hold the 'GPU' for ``fixed_ms + row_ms * rows`` without using a core; the seconds
    it was held."""
    with _GPU:
        start = time.perf_counter()
        time.sleep((fixed_ms + row_ms * rows) / 1e3)
        return time.perf_counter() - start


class GpuShapedModel(Model):
    """The controller's push per row, after a GPU-shaped forward of the whole batch."""

    def __init__(self, fixed_ms: float | None = None, row_ms: float | None = None) -> None:
        env = os.environ
        self.fixed_ms = float(env.get("GPU_FORWARD_MS", "50")) if fixed_ms is None else fixed_ms
        self.row_ms = float(env.get("GPU_ROW_MS", "0.5")) if row_ms is None else row_ms

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        key = "states" if "states" in batch else "observation/state"
        states = np.asarray(batch[key])
        forward(len(states), self.fixed_ms, self.row_ms)
        return controller(states)[:, None, :]  # [N, 1, 1]


def agent() -> RobotAgent:
    """``--hud-agent=gpu_shaped:agent``: a model-backed factory (served once per device
    under ``-n``)."""
    return RobotAgent(GpuShapedModel(), name="gpu-shaped")
