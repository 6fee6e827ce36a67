"""The ManiSkill3 sim: one tabletop task on SAPIEN's CPU physics (PhysX), state observations,
the Panda's joint-position controller (what ManiSkill's motion-planning solutions drive).

SAPIEN opens a Vulkan device even without cameras: on a CPU that is Mesa's lavapipe, and
Debian 12's (Mesa 22.3) lists llvmpipe as unsupported; Mesa >= 24 works (Debian's
bookworm-backports has 25.0). ManiSkill is imported inside :func:`make_env` only.
"""

from __future__ import annotations

import os
from typing import Any, cast

import gymnasium as gym
import numpy as np

__all__ = ["ACTION_SIZE", "CONTROL_MODE", "CONTROL_RATE", "ManiSkillEnv", "make_env"]

#: 7 arm joint targets (absolute, radians) + the gripper in [-1, 1].
ACTION_SIZE = 8
CONTROL_MODE = "pd_joint_pos"
#: ManiSkill's tabletop tasks: sim 100 Hz, control 20 Hz.
CONTROL_RATE = 20.0


def _numpy(value: Any) -> np.ndarray:
    """A ManiSkill tensor (batched, one env) as a flat float32 array."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, np.float32).reshape(-1)


class ManiSkillEnv(gym.Env):  # type: ignore[type-arg]
    """One ManiSkill task; ``reset(seed=k)`` is ManiSkill's own seeded episode k.

    Observations: ``observation/state`` (ManiSkill's ``obs_mode="state"`` vector: the
    robot's joints and the task's extras) and ``observation/env_state`` (the simulator's
    full state, ``env.get_state()``: every actor's pose and velocity, what a privileged
    planner reads). ``info["success"]`` is ManiSkill's ``evaluate()``; the episode ends
    when ManiSkill terminates it (success, or a failure) or at the step limit.
    """

    metadata = {"render_modes": [], "render_fps": CONTROL_RATE}

    def __init__(self, task: str, max_steps: int | None = None) -> None:
        from pytest_hud.suites.maniskill.tasks import MAX_STEPS

        os.environ.setdefault("DISPLAY", "")  # no window: SAPIEN's GLFW stays off
        import mani_skill.envs  # noqa: F401  (registers the tasks)

        self.task = task
        self.max_steps = int(max_steps or MAX_STEPS[task])
        self.sim: Any = gym.make(
            task,
            obs_mode="state",
            control_mode=CONTROL_MODE,
            render_mode=None,
            sim_backend="physx_cpu",
            num_envs=1,
            max_episode_steps=self.max_steps,
        )
        #: ManiSkill's BaseEnv under gymnasium's wrappers (get_state, the action space)
        self.maniskill: Any = cast(Any, self.sim).unwrapped
        obs, _ = self.sim.reset(seed=0)
        state_size = _numpy(obs).size
        env_state_size = _numpy(self.maniskill.get_state()).size
        self.observation_space = gym.spaces.Dict(
            {
                "observation/state": gym.spaces.Box(-np.inf, np.inf, (state_size,), np.float32),
                "observation/env_state": gym.spaces.Box(
                    -np.inf, np.inf, (env_state_size,), np.float32
                ),
            }
        )
        space = self.maniskill.single_action_space
        self.action_space = gym.spaces.Box(
            np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
        )

    def _obs(self, obs: Any) -> dict[str, np.ndarray]:
        return {
            "observation/state": _numpy(obs),
            "observation/env_state": _numpy(self.maniskill.get_state()),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, object]]:
        obs, _ = self.sim.reset(seed=seed)
        return self._obs(obs), {"success": False}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, object]]:
        act = np.asarray(action, np.float32).reshape(-1)
        if act.shape != (ACTION_SIZE,):
            raise ValueError(
                f"ManiSkill's Panda under {CONTROL_MODE} takes {ACTION_SIZE} values (7 joint "
                f"targets, the gripper); got shape {np.shape(action)}"
            )
        obs, reward, terminated, truncated, info = self.sim.step(act[None])
        success = bool(_numpy(info["success"])[0])
        return (
            self._obs(obs),
            float(_numpy(reward)[0]),
            bool(_numpy(terminated)[0]),
            bool(_numpy(truncated)[0]),
            {"success": success},
        )

    def close(self) -> None:
        self.sim.close()


def make_env(task: str = "PickCube-v1", max_steps: int | None = None) -> ManiSkillEnv:
    """The factory ``env.gym`` serves (its parameters are the build args)."""
    return ManiSkillEnv(task, max_steps)
