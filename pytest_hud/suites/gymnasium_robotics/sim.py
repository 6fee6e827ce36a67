"""The gymnasium-robotics sim: one Fetch task or FrankaKitchen goal as a gymnasium env (build args
in :func:`make_env`, the seed per reset), with success as the benchmark defines it.

Fetch: ``info["is_success"]`` at the episode's last step (50 steps; gymnasium-robotics never ends
a Fetch episode early, and the standard evaluation reads the final step). FrankaKitchen: every
task of the goal completed (``info["tasks_to_complete"]`` empty; the env then terminates), or
its 280-step limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from pytest_hud.suites.gymnasium_robotics.tasks import FETCH, KITCHEN_GOALS
from pytest_hud.suites.seeded import render_cameras
from pytest_hud.suites.sims import GymWrapped, Observation

__all__ = [
    "FETCH_NAMES",
    "FETCH_RATE",
    "KITCHEN_NAMES",
    "KITCHEN_RATE",
    "MAX_STEPS",
    "RoboticsEnv",
    "make_env",
]

#: gymnasium-robotics' own step limits (their registered TimeLimit).
FETCH_STEPS = 50
KITCHEN_STEPS = 280
MAX_STEPS = {**dict.fromkeys(FETCH, FETCH_STEPS), **dict.fromkeys(KITCHEN_GOALS, KITCHEN_STEPS)}
#: Control rates: Fetch 20 substeps x 2 ms; the kitchen 40 x 2 ms.
FETCH_RATE = 25.0
KITCHEN_RATE = 12.5

_XYZ = ("x", "y", "z")
#: Fetch's ``observation`` vector, element by element (gymnasium-robotics' documented order).
FETCH_NAMES: tuple[str, ...] = tuple(
    f"{part}.{axis}"
    for part, axes in (
        ("grip_pos", _XYZ),
        ("object_pos", _XYZ),
        ("object_rel_pos", _XYZ),
        ("gripper_state", ("right", "left")),
        ("object_rot", _XYZ),
        ("object_velp", _XYZ),
        ("object_velr", _XYZ),
        ("grip_velp", _XYZ),
        ("gripper_vel", ("right", "left")),
    )
    for axis in axes
)
#: FetchReach has no object: the gripper's parts only.
REACH_NAMES: tuple[str, ...] = tuple(
    n
    for n in FETCH_NAMES
    if n.split(".")[0] in ("grip_pos", "gripper_state", "grip_velp", "gripper_vel")
)
#: The kitchen's 59-d observation: robot joints (9) and velocities (9), then the objects' joint
#: positions (21) and velocities (20).
KITCHEN_NAMES: tuple[str, ...] = (
    *(f"robot_qpos.{i}" for i in range(9)),
    *(f"robot_qvel.{i}" for i in range(9)),
    *(f"object_qpos.{i}" for i in range(21)),
    *(f"object_qvel.{i}" for i in range(20)),
)


def state_names(task: str) -> tuple[str, ...]:
    """The names of a task's ``observation/state`` elements."""
    if task in KITCHEN_GOALS:
        return KITCHEN_NAMES
    return REACH_NAMES if task == "FetchReach-v4" else FETCH_NAMES


class RoboticsEnv(GymWrapped):
    """One Fetch task or kitchen goal; ``reset(seed=)`` seeds gymnasium-robotics' own RNG."""

    def __init__(self, task: str, cameras: Sequence[str] = (), size: int = 224) -> None:
        import gymnasium_robotics

        if task not in MAX_STEPS:
            raise ValueError(
                f"unknown gymnasium-robotics task {task!r}; known: {', '.join(MAX_STEPS)}"
            )
        gym.register_envs(gymnasium_robotics)
        self.task = task
        self.kitchen = task in KITCHEN_GOALS
        kwargs: dict[str, Any] = {"disable_env_checker": True}
        if self.kitchen:
            kwargs["tasks_to_complete"] = list(KITCHEN_GOALS[task])
            self.sim = gym.make("FrankaKitchen-v1", **kwargs)
        else:
            self.sim = gym.make(task, **kwargs)
        raw: Any = self.sim.unwrapped
        self.model, self.data = (
            (raw.robot_env.model, raw.robot_env.data) if self.kitchen else (raw.model, raw.data)
        )
        self.cameras = tuple(cameras)
        known = {self.model.camera(i).name for i in range(self.model.ncam)}
        unknown = [c for c in self.cameras if c not in known]
        if unknown:
            raise ValueError(f"{task} has no camera {unknown}; cameras: {sorted(known)}")
        if self.cameras:
            import mujoco

            self.model.vis.global_.offwidth = max(self.model.vis.global_.offwidth, size)
            self.model.vis.global_.offheight = max(self.model.vis.global_.offheight, size)
            self.renderer = mujoco.Renderer(self.model, size, size)
        n = len(state_names(task))
        spaces: dict[str, gym.Space[object]] = {
            "observation/state": gym.spaces.Box(-np.inf, np.inf, (n,), np.float32)
        }
        if not self.kitchen:
            spaces["observation/goal"] = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        for cam in self.cameras:
            spaces[f"observation/images/{cam}"] = gym.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Box(-1.0, 1.0, self.sim.action_space.shape, np.float32)
        self.metadata = {
            "render_modes": [],
            "render_fps": KITCHEN_RATE if self.kitchen else FETCH_RATE,
        }
        self.last_info = {}

    def _obs(self, raw: Mapping[str, np.ndarray]) -> Observation:
        obs = {"observation/state": np.asarray(raw["observation"], np.float32)}
        if not self.kitchen:
            obs["observation/goal"] = np.asarray(raw["desired_goal"], np.float32)
        if self.renderer is not None:
            obs.update(render_cameras(self.renderer, self.data, self.cameras))
        return obs

    def _action(self, action: np.ndarray) -> np.ndarray:
        return np.asarray(action, self.sim.action_space.dtype).reshape(self.sim.action_space.shape)

    def _success(self, info: dict[str, object], terminated: bool, truncated: bool) -> bool:
        if self.kitchen:
            return not info["tasks_to_complete"]
        return (terminated or truncated) and bool(info["is_success"])  # the final step decides


def make_env(
    task: str = "FetchReach-v4", cameras: Sequence[str] = (), size: int = 224
) -> RoboticsEnv:
    """The factory ``env.gym`` serves (its parameters are the build args)."""
    return RoboticsEnv(task, cameras, size)
