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

__all__ = [
    "ACTION_SIZE",
    "CONTROL_MODE",
    "CONTROL_RATE",
    "ENV_STATE_KEY",
    "SEED_KEY",
    "ManiSkillEnv",
    "make_env",
    "planner_observation",
    "seed_of",
]

#: 7 arm joint targets (absolute, radians) + the gripper in [-1, 1].
ACTION_SIZE = 8
CONTROL_MODE = "pd_joint_pos"
#: ManiSkill's tabletop tasks: sim 100 Hz, control 20 Hz.
CONTROL_RATE = 20.0
#: The simulator's full state (``get_state()``): every actor's pose and velocity.
ENV_STATE_KEY = "observation/env_state"
#: ManiSkill's episode seed: PegInsertionSide builds its scene from it at each reset (the
#: peg's and hole's sizes: ``reconfiguration_freq=1``), which ``get_state()`` lacks; a
#: private copy reset with it has that scene (as ManiSkill's trajectory replay does).
SEED_KEY = "observation/episode_seed"
#: The seed goes out as two 16-bit halves: the wire's float32 carries each exactly
#: (ManiSkill draws seeds below 2**31).
_HALF = 1 << 16


def _numpy(value: Any) -> np.ndarray:
    """A ManiSkill tensor (batched, one env) as a flat float32 array."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, np.float32).reshape(-1)


def planner_observation(maniskill: Any) -> dict[str, np.ndarray]:
    """What the expert plans from, read off ManiSkill's BaseEnv: its full state and the
    episode's seed (:data:`SEED_KEY`)."""
    seed = int(maniskill._episode_seed[0])
    return {
        ENV_STATE_KEY: _numpy(maniskill.get_state()),
        SEED_KEY: np.asarray(divmod(seed, _HALF), np.float32),
    }


def seed_of(observed: Any) -> int:
    """The episode seed a :data:`SEED_KEY` observation carries."""
    high, low = (round(float(v)) for v in np.asarray(observed).reshape(-1))
    return high * _HALF + low


class ManiSkillEnv(gym.Env):  # type: ignore[type-arg]
    """One ManiSkill task; ``reset(seed=k)`` is ManiSkill's own seeded episode k.

    Observations: ``observation/state`` (ManiSkill's ``obs_mode="state"`` vector: the
    robot's joints and the task's extras), ``observation/env_state`` (the simulator's
    full state, ``env.get_state()``: every actor's pose and velocity) and
    ``observation/episode_seed`` (the seed, which builds the peg task's scene): what a
    privileged planner reads. ``info["success"]`` is ManiSkill's ``evaluate()``; the
    episode ends when ManiSkill terminates it (success, or a failure) or at the step limit.
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
        self.observation_space = gym.spaces.Dict(
            {
                key: gym.spaces.Box(-np.inf, np.inf, value.shape, np.float32)
                for key, value in self._obs(obs).items()
            }
        )
        space = self.maniskill.single_action_space
        self.action_space = gym.spaces.Box(
            np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
        )

    def _obs(self, obs: Any) -> dict[str, np.ndarray]:
        return {"observation/state": _numpy(obs), **planner_observation(self.maniskill)}

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
