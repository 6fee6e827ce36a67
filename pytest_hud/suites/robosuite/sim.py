"""The robosuite sim: one task as a gymnasium env, in robomimic's low-dimensional layout (each arm's
end-effector position, quaternion and finger joints; the task's object observables), with the
default controller (OSC on each arm: 6-d end-effector delta, then the gripper).

robosuite places objects and perturbs the arms' start from NumPy's global RNG, so a reset
seeds it with the row's seed (robosuite's own scripts do the same). Success is the task's
``_check_success()``; the episode ends there or at :data:`MAX_STEPS`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from pytest_hud.suites.robosuite.tasks import MAX_STEPS, OBJECTS, ROBOTS
from pytest_hud.suites.sims import CheckedSteps, Observation

__all__ = [
    "CONTROL_RATE",
    "ROBOT_PARTS",
    "RobosuiteEnv",
    "flat_state",
    "make_env",
    "robosuite_kwargs",
]

#: robosuite's default control frequency.
CONTROL_RATE = 20.0
#: Each arm's part of ``observation/state`` (robomimic's low-dim keys), with sizes.
ROBOT_PARTS = (("eef_pos", 3), ("eef_quat", 4), ("gripper_qpos", 2))


def robosuite_kwargs(task: str, cameras: Sequence[str] = (), size: int = 224) -> dict[str, Any]:
    """What ``robosuite.make`` gets for ``task`` (the fidelity reference makes the same env)."""
    robots = ROBOTS[task]
    return {
        "env_name": task,
        "robots": list(robots) if len(robots) > 1 else robots[0],
        "has_renderer": False,
        "has_offscreen_renderer": bool(cameras),
        "use_camera_obs": bool(cameras),
        "camera_names": list(cameras) or "agentview",
        "camera_heights": size,
        "camera_widths": size,
        "control_freq": int(CONTROL_RATE),
        "horizon": MAX_STEPS[task],
        "ignore_done": True,
    }


def flat_state(raw: Mapping[str, np.ndarray], task: str) -> dict[str, np.ndarray]:
    """robosuite's observation dict in the suite's layout (state and environment state)."""
    parts = [
        np.asarray(raw[f"robot{i}_{key}"], np.float32).reshape(-1)
        for i in range(len(ROBOTS[task]))
        for key, _ in ROBOT_PARTS
    ]
    objects = [np.asarray(raw[key], np.float32).reshape(-1) for key, _ in OBJECTS[task]]
    return {
        "observation/state": np.concatenate(parts),
        "observation/environment_state": np.concatenate(objects),
    }


class RobosuiteEnv(CheckedSteps):
    """One robosuite task; ``reset(seed=)`` seeds the placement."""

    metadata = {"render_modes": [], "render_fps": CONTROL_RATE}

    def __init__(self, task: str, cameras: Sequence[str] = (), size: int = 224) -> None:
        if task not in ROBOTS:
            raise ValueError(f"unknown robosuite task {task!r}; known: {', '.join(ROBOTS)}")
        if cameras:
            os.environ.setdefault("MUJOCO_GL", "egl")  # read when robosuite is imported
        from pytest_hud.suites.libero.sim import _jit_only_if_cached

        _jit_only_if_cached()  # the same numba functions as LIBERO's robosuite
        import robosuite

        self.task = task
        self.cameras = tuple(cameras)
        self.max_steps = MAX_STEPS[task]
        self.sim = robosuite.make(**robosuite_kwargs(task, cameras, size))
        low, high = self.sim.action_spec
        n_state = sum(n for _, n in ROBOT_PARTS) * len(ROBOTS[task])
        n_objects = sum(n for _, n in OBJECTS[task])
        spaces: dict[str, gym.Space[object]] = {
            "observation/state": gym.spaces.Box(-np.inf, np.inf, (n_state,), np.float32),
            "observation/environment_state": gym.spaces.Box(
                -np.inf, np.inf, (n_objects,), np.float32
            ),
        }
        for cam in self.cameras:
            spaces[f"observation/images/{cam}"] = gym.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Box(low.astype(np.float32), high.astype(np.float32))
        self.steps = 0

    def _obs(self, raw: Mapping[str, np.ndarray]) -> Observation:
        obs = flat_state(raw, self.task)
        for cam in self.cameras:  # robosuite renders OpenGL's way up: flip the rows
            obs[f"observation/images/{cam}"] = np.ascontiguousarray(raw[f"{cam}_image"][::-1])
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, object]]:
        if seed is not None:
            np.random.seed(int(seed))  # robosuite's placement samplers draw from it
        raw = self.sim.reset()
        self.steps = 0
        return self._obs(raw), {"success": False}

    def _check(self) -> bool:
        return bool(self.sim._check_success())


def make_env(task: str = "Lift", cameras: Sequence[str] = (), size: int = 224) -> RobosuiteEnv:
    """The factory ``env.gym`` serves (its parameters are the build args)."""
    return RobosuiteEnv(task, cameras, size)
