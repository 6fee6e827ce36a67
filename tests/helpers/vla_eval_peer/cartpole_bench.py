"""A vla-eval StepBenchmark over gymnasium's CartPole (CPU, state only) and the scripted
controller both sides of the interop tests and bench/peer_vla_eval.py run.

A task's ``goal`` is the reward total that counts as success within ``max_steps``: the
controller balances every episode to ``max_steps``, so a goal above that fails (a FAIL
row, not an ERROR). ``camera=True`` adds a tiny ``images/top`` frame that shows which way
the pole falls (white: push right, black: push left), so a policy that reads only the
camera can balance it; ``camera=N`` makes that frame N x N, the sign in its top-left
corner over a fixed textured scene (it compresses about as well as a rendered one, so an
image codec costs what it would on a real camera).
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
from vla_eval.benchmarks.base import StepBenchmark, StepResult
from vla_eval.specs import IMAGE_RGB, LANGUAGE, DimSpec

PROMPT = "balance the pole"


def controller(states: np.ndarray) -> np.ndarray:
    """Push the cart toward the side the pole falls to: ``[N, 4]`` states -> ``[N, 1]``."""
    states = np.asarray(states, np.float64).reshape(len(states), -1)
    push = states[:, 2] + 0.5 * states[:, 3] + 0.01 * states[:, 1] > 0
    return push.astype(np.float32)[:, None]


SIGN = 4  # the frame's top-left SIGN x SIGN pixels show the push


@functools.cache
def scene(size: int) -> np.ndarray:
    """A fixed ``[size, size, 3]`` textured background (gradients and grain)."""
    y, x = np.mgrid[0:size, 0:size]
    img = np.stack([(x * 1.1) % 256, (y * 0.9) % 256, ((x + y) * 0.5) % 256], -1)
    grain = np.random.default_rng(0).integers(-8, 9, img.shape)
    return np.clip(img + grain, 0, 255).astype(np.uint8)


def frame(state: np.ndarray, size: int = SIGN) -> np.ndarray:
    """The camera: an RGB frame whose top-left corner is white where the controller would
    push right, black where it would push left."""
    push = controller(np.asarray(state, np.float32)[None])[0, 0]
    img = scene(size).copy()
    img[:SIGN, :SIGN] = 255 if push > 0.5 else 0
    return img


def read_frame(image: np.ndarray) -> np.ndarray:
    """What a camera-only policy decides from :func:`frame`: ``[1]`` push."""
    sign = np.asarray(image)[:SIGN, :SIGN]
    return np.array([1.0 if sign.mean() > 127 else 0.0], np.float32)


class CartPoleBenchmark(StepBenchmark):
    render_backends = frozenset({"cpu", "gpu"})

    def __init__(
        self,
        goals: tuple[float, ...] = (50.0, 1e9),
        max_steps: int = 100,
        camera: bool | int = False,
    ) -> None:
        super().__init__()
        self.goals = [float(g) for g in goals]
        self.max_steps = int(max_steps)
        self.camera = camera
        self.env = gym.make("CartPole-v1")
        self.total = 0.0

    @classmethod
    def configure_render(cls, mode: str) -> dict[str, str]:
        return {}

    def get_tasks(self) -> list[dict[str, Any]]:
        return [{"name": f"goal{i}", "goal": g} for i, g in enumerate(self.goals)]

    def reset(self, task: dict[str, Any]) -> Any:
        self.total = 0.0
        seed = 1000 * int(task["name"].removeprefix("goal")) + int(task.get("episode_idx", 0))
        obs, _ = self.env.reset(seed=seed)
        return obs

    def step(self, action: dict[str, Any]) -> StepResult:
        push = int(np.asarray(action["actions"]).reshape(-1)[0] > 0.5)
        obs, reward, term, _trunc, info = self.env.step(push)
        self.total += float(reward)
        return StepResult(obs=obs, reward=float(reward), done=bool(term), info=info)

    def make_obs(self, raw_obs: Any, task: dict[str, Any]) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "states": np.asarray(raw_obs, np.float32),
            "task_description": PROMPT,
        }
        if self.camera:
            size = SIGN if self.camera is True else int(self.camera)
            obs["images"] = {"top": frame(np.asarray(raw_obs), size)}
        return obs

    def get_step_result(self, step_result: StepResult) -> dict[str, Any]:
        goal = self._task.get("goal", 0.0) if self._task else 0.0
        return {"success": self.total >= goal, "total_reward": self.total}

    def get_metadata(self) -> dict[str, Any]:
        return {"max_steps": self.max_steps}

    def get_action_spec(self) -> dict[str, DimSpec]:
        return {"push": DimSpec("push", 1, "binary_push_right", (0, 1))}

    def get_observation_spec(self) -> dict[str, DimSpec]:
        spec = {"state": DimSpec("state", 4, "cartpole_x_dx_theta_dtheta"), "language": LANGUAGE}
        return {**spec, "top": IMAGE_RGB} if self.camera else spec

    def cleanup(self) -> None:
        self.env.close()
