"""What the suites' sims share: each is a gymnasium env around the library's own env
(``self.sim``), observations shaped by its ``_obs``, success in the step's ``info["success"]``
(latched by the bridge), closed with the cameras' MuJoCo renderer if it made one.

Two kinds of library env are wrapped. A gymnasium one (:class:`GymWrapped`: gym-hil,
gymnasium-robotics, MetaWorld) steps with gymnasium's five values and says its own success in
``info``; the last step's info is kept as the library gave it (``last_info``). A robosuite one
(:class:`CheckedSteps`: robosuite, LIBERO) steps with gym's old four values, never ends an
episode itself and is asked for its success after each step; the wrapper ends the episode there
or cuts it at the task's step limit.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["CheckedSteps", "GymWrapped", "Observation", "SuiteSim"]

#: What a suite's sim observes: ``observation/...`` keys to arrays.
Observation = dict[str, np.ndarray]


class SuiteSim(gym.Env):  # type: ignore[type-arg]
    """A gymnasium env around a library's env, ``sim``; ``renderer`` is the MuJoCo renderer
    of its cameras (None: none asked for, or the library renders)."""

    sim: Any
    renderer: Any = None

    def _obs(self, raw: Any) -> Observation:
        """The observation from what the library's env gave."""
        raise NotImplementedError

    def close(self) -> None:
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None
        self.sim.close()


class GymWrapped(SuiteSim):
    """A gymnasium env in a gymnasium env: reset and step pass through, the library's info
    kept as ``last_info``, success decided by :meth:`_success` from it."""

    #: The last reset's or step's info, as the library gave it.
    last_info: dict[str, object]

    def _action(self, action: np.ndarray) -> np.ndarray:
        """The action as the library's env takes it."""
        return np.asarray(action, np.float32)

    def _success(self, info: dict[str, object], terminated: bool, truncated: bool) -> bool:
        """Whether the step that gave ``info`` succeeded."""
        raise NotImplementedError

    def reset(
        self, *, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[Observation, dict[str, object]]:
        raw, info = self.sim.reset(seed=seed)
        self.last_info = info
        return self._obs(raw), {"success": False}

    def step(self, action: np.ndarray) -> tuple[Observation, float, bool, bool, dict[str, object]]:
        raw, reward, terminated, truncated, info = self.sim.step(self._action(action))
        self.last_info = info
        success = self._success(info, bool(terminated), bool(truncated))
        return (
            self._obs(raw),
            float(reward),
            bool(terminated),
            bool(truncated),
            {"success": success},
        )


class CheckedSteps(SuiteSim):
    """A robosuite env in a gymnasium env: each step is checked for success (:meth:`_check`),
    which ends the episode, and an episode is cut at ``max_steps``."""

    #: Steps taken since the last reset, and the limit the episode is cut at.
    steps: int = 0
    max_steps: int

    def _action(self, action: np.ndarray) -> np.ndarray:
        """The action as the library's env takes it (float64, flat)."""
        return np.asarray(action, np.float64).reshape(-1)

    def _check(self) -> bool:
        """Whether the library's env is at its task's success now."""
        raise NotImplementedError

    def step(self, action: np.ndarray) -> tuple[Observation, float, bool, bool, dict[str, object]]:
        raw, reward, _, _ = self.sim.step(self._action(action))
        self.steps += 1
        success = bool(self._check())
        truncated = not success and self.steps >= self.max_steps
        return self._obs(raw), float(reward), success, truncated, {"success": success}
