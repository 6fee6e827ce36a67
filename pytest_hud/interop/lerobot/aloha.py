"""gym-aloha with its top camera rendered at the size its config asks for.

gym-aloha 0.1.5's tasks render three cameras at a fixed 480x640 on every step (``top``,
``angle``, ``vis``), whatever ``observation_height`` / ``observation_width`` say; on a CPU
(MuJoCo through EGL/OSMesa) that is most of a step's cost. The env here is gym-aloha's own
(same physics, task, reward and ``is_success``) whose task renders only ``top``, the camera
lerobot's ALOHA config reads, at the configured size. Importing this module registers it
as ``pytest_hud_aloha/<the gym-aloha id>``; :func:`.envs.make_config` points LeRobot's
``aloha`` config there when a camera size is given, so ``make_env`` (and lerobot-eval's
rollout over that config) build it.

It overrides gym-aloha's private ``_make_env_task``, the only place the task is built (why
that cannot be avoided: :mod:`.compat`); importing it checks that the installed gym-aloha
is a release with that method (:func:`.compat.require_gym_aloha`).
"""

from __future__ import annotations

import collections
from typing import Any

import gymnasium as gym
from gym_aloha.env import AlohaEnv

from pytest_hud.interop.lerobot import compat

compat.require_gym_aloha()

__all__ = ["NAMESPACE", "SizedAlohaEnv"]

NAMESPACE = "pytest_hud_aloha"
_TASKS = {"AlohaInsertion-v0": "insertion", "AlohaTransferCube-v0": "transfer_cube"}


class SizedAlohaEnv(AlohaEnv):
    """gym-aloha's env, its task rendering only the top camera at the observation size."""

    def _make_env_task(self, task_name: str) -> Any:
        env = super()._make_env_task(task_name)
        task, height, width = env.task, self.observation_height, self.observation_width

        def get_observation(physics: Any) -> collections.OrderedDict:
            obs: collections.OrderedDict = collections.OrderedDict()
            obs["qpos"] = task.get_qpos(physics)
            obs["qvel"] = task.get_qvel(physics)
            obs["env_state"] = task.get_env_state(physics)
            obs["images"] = {"top": physics.render(height=height, width=width, camera_id="top")}
            return obs

        task.get_observation = get_observation
        return env


for _id, _task in _TASKS.items():
    if f"{NAMESPACE}/{_id}" not in gym.registry:
        gym.register(
            id=f"{NAMESPACE}/{_id}",
            entry_point=f"{__name__}:SizedAlohaEnv",
            max_episode_steps=300,
            nondeterministic=True,
            kwargs={"obs_type": "pixels", "task": _task},
        )
