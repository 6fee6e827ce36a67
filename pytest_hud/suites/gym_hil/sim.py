"""The gym-hil sim: PandaPickCube as gym-hil registers it (end-effector actions, the gripper
penalty in ``info``), with the cube placed by the row's seed.

gym-hil draws a random cube position from NumPy's global RNG (``random_block_position=True``;
off, the cube is always at one spot and every seed gives the same episode), so a reset seeds
that RNG with the row's seed: the same seed, the same cube, in any process. Success is gym-hil's
own ``info["succeed"]`` (the cube lifted 10 cm: its sparse reward of 1); gym-hil ends the
episode there, when the cube leaves the table's bounds, or at its 100-step limit. Its
1-second pause at every reset (for a human operator) is off. gym-hil builds a MuJoCo renderer
even without cameras, so a GL backend must work (``MUJOCO_GL=egl`` unless set).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from pytest_hud.suites.gym_hil.tasks import PROMPTS
from pytest_hud.suites.sims import GymWrapped, Observation

__all__ = ["CAMERAS", "CONTROL_RATE", "MAX_STEPS", "STATE_NAMES", "HilEnv", "make_env"]

#: gym-hil's registered step limit and its control rate (control_dt 0.1 s).
MAX_STEPS = 100
CONTROL_RATE = 10.0
#: gym-hil's two cameras (what ``image_obs=True`` renders).
CAMERAS = ("front", "wrist")
#: gym-hil's ``agent_pos``: joint positions and velocities, the gripper command, the TCP.
STATE_NAMES: tuple[str, ...] = (
    *(f"joint{i}.pos" for i in range(1, 8)),
    *(f"joint{i}.vel" for i in range(1, 8)),
    "gripper",
    "tcp.x",
    "tcp.y",
    "tcp.z",
)
ENV_STATE_NAMES = ("cube.x", "cube.y", "cube.z")


class HilEnv(GymWrapped):
    """One gym-hil task; ``reset(seed=)`` places the cube from the seed."""

    metadata = {"render_modes": [], "render_fps": CONTROL_RATE}

    def __init__(self, task: str, cameras: Sequence[str] = (), size: int = 128) -> None:
        if task not in PROMPTS:
            raise ValueError(f"unknown gym-hil task {task!r}; known: {', '.join(PROMPTS)}")
        unknown = [c for c in cameras if c not in CAMERAS]
        if unknown:
            raise ValueError(f"gym-hil has no camera {unknown}; cameras: {list(CAMERAS)}")
        os.environ.setdefault("MUJOCO_GL", "egl")  # read when mujoco is imported
        import gym_hil

        self.task = task
        self.cameras = tuple(cameras)
        self.sim = gym.make(
            f"gym_hil/{task}",
            disable_env_checker=True,
            reset_delay_seconds=0.0,
            random_block_position=True,
            render_spec=gym_hil.GymRenderingSpec(height=size, width=size),
        )
        spaces: dict[str, gym.Space[object]] = {
            "observation/state": gym.spaces.Box(-np.inf, np.inf, (len(STATE_NAMES),), np.float32),
            "observation/environment_state": gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
        }
        for cam in self.cameras:
            spaces[f"observation/images/{cam}"] = gym.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = self.sim.action_space
        self.last_info = {}

    def _obs(self, raw: Mapping[str, np.ndarray]) -> Observation:
        obs = {
            "observation/state": np.asarray(raw["agent_pos"], np.float32),
            "observation/environment_state": np.asarray(raw["environment_state"], np.float32),
        }
        if self.cameras:
            raw_env: Any = self.sim.unwrapped
            frames = dict(zip(CAMERAS, raw_env.render(), strict=True))
            obs.update({f"observation/images/{c}": frames[c].copy() for c in self.cameras})
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[Observation, dict[str, object]]:
        if seed is not None:
            np.random.seed(int(seed))  # gym-hil places the cube from the global RNG
        return super().reset(seed=seed, options=options)

    def _success(self, info: dict[str, object], terminated: bool, truncated: bool) -> bool:
        return bool(info.get("succeed", False))


def make_env(
    task: str = "PandaPickCube-v0", cameras: Sequence[str] = (), size: int = 128
) -> HilEnv:
    """The factory ``env.gym`` serves (its parameters are the build args)."""
    return HilEnv(task, cameras, size)
