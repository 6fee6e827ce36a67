"""Each seeded suite's benchmark run by its own evaluation loop, with the suite's expert: what
the fidelity tests compare pytest-hud's episodes with (tests/suites/test_suite_*.py) and
bench/suite_loops.py times beside it. Each function takes a task and its seeds, builds the
benchmark's env once (as the benchmark's own scripts do) and returns ``(steps, summed reward,
success)`` per seed, success as the benchmark defines it.

- robosuite: ``robosuite.make`` with the suite's arguments, NumPy's global RNG seeded, then
  ``reset`` and ``step`` until the task's ``_check_success()`` or the step limit.
- gymnasium-robotics: ``gym.make``, ``reset(seed=)``, step until the env ends the episode;
  Fetch's success is the final step's ``is_success``, the kitchen's ``tasks_to_complete``
  empty.
- gym-hil: lerobot-eval's ``rollout`` over LeRobot's ``make_env`` (LeRobot has no env type
  for gym-hil: the config a ``lerobot_env_*`` plugin would register is registered here).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Episode = tuple[int, float, bool]
#: The kitchen expert's model copy, kept across calls as the agent keeps it across episodes.
_ARMS: dict[str, Any] = {}


def robosuite_episodes(task: str, seeds: Sequence[int]) -> list[Episode]:
    import robosuite

    from pytest_hud.suites.robosuite import RobosuiteExpert
    from pytest_hud.suites.robosuite.sim import flat_state, robosuite_kwargs
    from pytest_hud.suites.robosuite.tasks import MAX_STEPS

    expert = RobosuiteExpert()
    env = robosuite.make(**robosuite_kwargs(task))
    out = []
    try:
        for seed in seeds:
            np.random.seed(seed)
            obs = env.reset()
            steps, total, success = 0, 0.0, False
            while not success and steps < MAX_STEPS[task]:
                flat = {k: v.astype(np.float64) for k, v in flat_state(obs, task).items()}
                state, objects = flat["observation/state"], flat["observation/environment_state"]
                action = expert.act(task, state, objects).astype(np.float32)
                obs, reward, _, _ = env.step(action.astype(np.float64))
                steps, total = steps + 1, total + float(reward)
                success = bool(env._check_success())
            out.append((steps, total, success))
    finally:
        env.close()
    return out


def fetch_episodes(task: str, seeds: Sequence[int]) -> list[Episode]:
    import gymnasium as gym
    import gymnasium_robotics

    from pytest_hud.robot.contract import Contract
    from pytest_hud.suites.gymnasium_robotics import FetchExpert, contract

    gym.register_envs(gymnasium_robotics)
    expert = FetchExpert()
    expert.bind(Contract.from_dict(contract(task)).spaces())
    env = gym.make(task, disable_env_checker=True)
    out = []
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            steps, total = 0, 0.0
            while True:
                state = np.asarray(obs["observation"], np.float32).astype(np.float64)
                goal = np.asarray(obs["desired_goal"], np.float32).astype(np.float64)
                action = expert.act(task, state, goal).astype(np.float32)
                obs, reward, terminated, truncated, info = env.step(action)
                steps, total = steps + 1, total + float(reward)
                if terminated or truncated:
                    out.append((steps, total, bool(info["is_success"])))
                    break
    finally:
        env.close()
    return out


def kitchen_episodes(task: str, seeds: Sequence[int]) -> list[Episode]:
    import gymnasium as gym
    import gymnasium_robotics

    from pytest_hud.suites.gymnasium_robotics.kitchen_expert import KitchenArm, kitchen_action
    from pytest_hud.suites.gymnasium_robotics.tasks import KITCHEN_GOALS

    gym.register_envs(gymnasium_robotics)
    goals = KITCHEN_GOALS[task]
    env = gym.make("FrankaKitchen-v1", tasks_to_complete=list(goals), disable_env_checker=True)
    if "arm" not in _ARMS:  # the model copy loads once, as the agent's does
        _ARMS["arm"] = KitchenArm()
    arm = _ARMS["arm"]
    out = []
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            steps, total = 0, 0.0
            while True:
                state = np.asarray(obs["observation"], np.float32).astype(np.float64)
                action = kitchen_action(arm, goals, state).astype(np.float32)
                obs, reward, terminated, truncated, info = env.step(action)
                steps, total = steps + 1, total + float(reward)
                if terminated or truncated:
                    out.append((steps, total, not info["tasks_to_complete"]))
                    break
    finally:
        env.close()
    return out


def _hil_policy() -> Any:
    """gym-hil-expert as the torch module lerobot-eval's ``rollout`` drives."""
    import torch

    from pytest_hud.suites.gym_hil.expert import pick

    class Policy(torch.nn.Module):
        def reset(self) -> None:
            pass

        def select_action(self, batch: dict[str, Any]) -> Any:
            state = batch["observation.state"].numpy().astype(np.float64)
            cube = batch["observation.environment_state"].numpy().astype(np.float64)
            rows = [pick(s[15:18], float(s[14]), c) for s, c in zip(state, cube, strict=True)]
            return torch.from_numpy(np.stack(rows).astype(np.float32))

    return Policy()


def _register_hil() -> None:
    """What a ``lerobot_env_*`` plugin for gym-hil would register: an env config and a gym
    id whose info carries ``is_success`` (gym-hil says ``succeed``; rollout reads the
    former)."""
    from dataclasses import dataclass as config_dataclass

    from lerobot.envs.configs import EnvConfig

    if "hil" in EnvConfig.get_known_choices():
        return
    import gymnasium as gym

    class IsSuccess(gym.Wrapper):  # type: ignore[type-arg]
        def step(self, action: Any) -> Any:
            obs, reward, terminated, truncated, info = self.env.step(action)
            return obs, reward, terminated, truncated, {**info, "is_success": info["succeed"]}

    def make(**kwargs: Any) -> Any:
        import gym_hil  # noqa: F401

        return IsSuccess(gym.make("gym_hil/PandaPickCube-v0", **kwargs))

    gym.register("gym_hil_eval/PandaPickCube-v0", entry_point=make, max_episode_steps=100)

    @EnvConfig.register_subclass("hil")
    @config_dataclass
    class HilEnv(EnvConfig):
        task: str | None = "PandaPickCube-v0"
        fps: int = 10

        @property
        def package_name(self) -> str:
            return "gym_hil"

        @property
        def gym_id(self) -> str:
            return f"gym_hil_eval/{self.task}"

        @property
        def gym_kwargs(self) -> dict[str, Any]:
            return {"reset_delay_seconds": 0.0, "random_block_position": True}


def gym_hil_episodes(task: str, seeds: Sequence[int]) -> list[Episode]:
    """One ``rollout`` call per seed (the suite's seeding: NumPy's global RNG, then
    ``reset(seed=)``); ``task`` is PandaPickCube-v0, the one gym-hil row."""
    from lerobot.envs.configs import EnvConfig
    from lerobot.envs.factory import make_env, make_env_pre_post_processors
    from lerobot.scripts.lerobot_eval import rollout

    _register_hil()
    config = EnvConfig.get_choice_class("hil")(task=task)
    [vec] = [v for tasks in make_env(config, n_envs=1).values() for v in tasks.values()]
    env_pre, env_post = make_env_pre_post_processors(config, None)
    policy = _hil_policy()
    out = []
    try:
        for seed in seeds:
            np.random.seed(seed)
            data = rollout(vec, policy, env_pre, env_post, lambda b: b, lambda a: a, seeds=[seed])
            done = data["done"][0].numpy()
            length = int(np.argmax(done)) + 1
            reward = float(data["reward"][0, :length].sum())
            out.append((length, reward, bool(data["success"][0, :length].any())))
    finally:
        vec.close()
    return out
