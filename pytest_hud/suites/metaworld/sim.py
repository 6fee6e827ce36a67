"""The MetaWorld sim: one v3 task as a gymnasium env (build args in :func:`make_env`, variation
and seed per reset). Cameras are off unless asked for.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from pytest_hud.suites.sims import Observation, SuiteSim

__all__ = ["CONTROL_RATE", "GOALS_SEED", "MAX_STEPS", "STATE_SIZE", "MetaWorldEnv", "make_env"]

#: metaworld's ``max_path_length``: it truncates the episode at this step.
MAX_STEPS = 500
STATE_SIZE = 39
#: metaworld's render_fps (frame_skip 5 x 2.5 ms).
CONTROL_RATE = 80.0
#: Seed of the 50 train goals per task (``metaworld.MT1(task, seed=GOALS_SEED)``).
GOALS_SEED = 0
#: Cameras whose image metaworld renders upside down.
_FLIPPED = frozenset({"corner2"})


@functools.cache
def _train_tasks(task: str) -> tuple[Any, tuple[Any, ...]]:
    """The task's env class and its 50 train goals (cached: goal generation is 0.7 s)."""
    import metaworld

    if task not in metaworld.MT1.ENV_NAMES:
        raise ValueError(
            f"unknown MetaWorld task {task!r}: expected a v3 task name such as 'reach-v3' "
            f"(metaworld {getattr(metaworld, '__version__', '?')} knows "
            f"{len(metaworld.MT1.ENV_NAMES)})"
        )
    bench = metaworld.MT1(task, seed=GOALS_SEED)
    return bench.train_classes[task], tuple(bench.train_tasks)


class MetaWorldEnv(SuiteSim):
    """One MetaWorld task; ``reset(seed=, options={"variation": k})`` picks train goal k.

    Without a variation the seed picks one (as metaworld's task sampler does from its
    seeded RNG, but reproducible per seed instead of per reset count). Success ends
    the episode when ``stop_on_success`` (metaworld's own evaluation does the same);
    ``info["success"]`` is passed through for the bridge to latch.
    """

    metadata = {"render_modes": [], "render_fps": CONTROL_RATE}

    def __init__(
        self,
        task: str,
        cameras: Sequence[str] = (),
        size: int = 224,
        stop_on_success: bool = True,
    ) -> None:
        cls, self.train_tasks = _train_tasks(task)
        self.task = task
        self.sim = cls()
        self.cameras = tuple(cameras)
        self.stop_on_success = stop_on_success
        self.variation = -1
        #: The last step's info (what metaworld said, before the bridge latched it).
        self.last_info: dict[str, object] = {}
        known = {self.sim.model.camera(i).name for i in range(self.sim.model.ncam)}
        unknown = [c for c in self.cameras if c not in known]
        if unknown:
            raise ValueError(f"MetaWorld has no camera {unknown}; cameras: {sorted(known)}")
        if self.cameras:
            import mujoco

            self.renderer = mujoco.Renderer(self.sim.model, size, size)
        spaces: dict[str, gym.Space[object]] = {
            "observation/state": gym.spaces.Box(-np.inf, np.inf, (STATE_SIZE,), np.float32)
        }
        for cam in self.cameras:
            spaces[f"observation/images/{cam}"] = gym.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = self.sim.action_space

    def _obs(self, state: np.ndarray) -> Observation:
        obs = {"observation/state": np.asarray(state, np.float32)}
        for cam in self.cameras:
            self.renderer.update_scene(self.sim.data, camera=cam)
            image = self.renderer.render()
            obs[f"observation/images/{cam}"] = (
                image[::-1, ::-1].copy() if cam in _FLIPPED else image
            )
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, object]]:
        variation = (options or {}).get("variation")
        if variation is None:
            variation = int(np.random.default_rng(seed).integers(len(self.train_tasks)))
        if not 0 <= int(variation) < len(self.train_tasks):
            raise ValueError(
                f"variation {variation}: expected 0..{len(self.train_tasks) - 1} "
                f"(one of {self.task}'s train goals)"
            )
        self.variation = int(variation)
        self.sim.set_task(self.train_tasks[self.variation])
        if seed is not None:
            self.sim.seed(int(seed))
        state, info = self.sim.reset()
        self.last_info = info
        return self._obs(state), {**info, "variation": self.variation}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, object]]:
        state, reward, terminated, truncated, info = self.sim.step(action)
        if self.stop_on_success and info.get("success"):
            terminated = True
        self.last_info = info
        return self._obs(state), float(reward), bool(terminated), bool(truncated), info


def make_env(
    task: str = "reach-v3",
    cameras: Sequence[str] = (),
    size: int = 224,
    stop_on_success: bool = True,
) -> MetaWorldEnv:
    """The factory ``env.gym`` serves (its parameters are the build args)."""
    return MetaWorldEnv(task, cameras, size, stop_on_success)
