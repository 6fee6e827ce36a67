"""``num_envs`` copies of a gym-style env as one VectorEnv, stepped in this process (``"sync"``)
or one worker process per copy (``"async"``, whose slots cannot step alone).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import gymnasium as gym

__all__ = ["MODES", "build_env", "check_mode"]

MODES = ("sync", "async")


def check_mode(mode: str, step_slots_alone: bool) -> str:
    """``mode`` if usable; a ValueError naming the fix otherwise."""
    if mode not in MODES:
        raise ValueError(
            f"vectorization_mode is one of {', '.join(map(repr, MODES))}, got {mode!r}"
        )
    if mode == "async" and step_slots_alone:
        raise ValueError(
            "step_slots_alone steps a SyncVectorEnv's copies one by one in the sim process; "
            'it cannot with vectorization_mode="async": drop one of the two'
        )
    return mode


def build_env(target: Any, kwargs: dict[str, Any], num_envs: int, mode: str) -> Any:
    """The env (a VectorEnv of ``num_envs`` copies when > 1) from a registry id or a
    factory; a factory that takes ``num_envs`` builds its own vector env."""
    if isinstance(target, str):
        if num_envs > 1:
            return gym.make_vec(target, num_envs=num_envs, vectorization_mode=mode, **kwargs)
        return gym.make(target, **kwargs)
    if "num_envs" in _signature_names(target):
        return target(**kwargs, num_envs=num_envs)
    if num_envs == 1:
        return target(**kwargs)
    if mode == "async":
        return gym.vector.AsyncVectorEnv([functools.partial(target, **kwargs)] * num_envs)
    env = target(**kwargs)
    if isinstance(env, gym.vector.VectorEnv):  # its width is checked by the caller
        return env
    envs = [env, *(target(**kwargs) for _ in range(num_envs - 1))]
    return gym.vector.SyncVectorEnv([functools.partial(_same, e) for e in envs])


def _signature_names(fn: Callable[..., object]) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def _same(env: object) -> Any:
    return env
