"""gym-aloha rendering only its ``top`` camera at the configured size (upstream renders three
fixed-size cameras every step). Overrides the private ``_make_env_task`` (:mod:`.compat`).
"""

from __future__ import annotations

import collections
from typing import Any

import gymnasium as gym
from gym_aloha.env import AlohaEnv

from pytest_hud.robot import lerobot_version as compat

compat.require_gym_aloha()

__all__ = ["NAMESPACE", "SizedAlohaEnv"]

NAMESPACE = "pytest_hud_aloha"
_TASKS = {"AlohaInsertion-v0": "insertion", "AlohaTransferCube-v0": "transfer_cube"}


class SizedAlohaEnv(AlohaEnv):
    """gym-aloha's env, its task rendering only the top camera at the observation size."""

    def _make_env_task(self, task_name: str) -> object:
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
