"""The Kinetix sim: one hand-made level as a gymnasium env over kinetix-env's JAX functions.

The episode follows vla-eval's Kinetix benchmark (the RTC evaluation): the level file's stored
state at every reset, ``PRNGKey(seed)`` split once for the reset and once per step, continuous
actions (motors in [-1, 1], thrusters in [0, 1]), 256 steps. Success is Kinetix's own: the
episode ends with green touching blue (``info["GoalR"]``, its ``returned_episode_solved``).
JAX is imported inside :func:`make_env` only; compiled steps are shared by every level of one
size (the same static parameters) and cached on disk across processes.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = [
    "ACTION_NAMES",
    "ACTION_SIZE",
    "CACHE_VAR",
    "CONTROL_RATE",
    "IMAGE_SIZE",
    "MAX_STEPS",
    "KinetixEnv",
    "make_env",
]

#: 4 motor bindings + 2 thruster bindings, Kinetix's unified continuous action.
ACTION_SIZE = 6
ACTION_NAMES = ["motor_0", "motor_1", "motor_2", "motor_3", "thruster_0", "thruster_1"]
#: The RTC paper's (and vla-eval's) episode length; Kinetix's own default too.
MAX_STEPS = 256
#: dt 1/60 s x frame_skip 2 in every shipped level.
CONTROL_RATE = 30.0
#: Kinetix's pixel observation: a 500 x 500 screen downscaled 4 times.
IMAGE_SIZE = 125
#: Where JAX keeps compiled steps across processes (default ~/.cache/pytest-hud/jax).
CACHE_VAR = "PYTEST_HUD_KINETIX_JAX_CACHE"


def _jax() -> Any:
    """JAX on the CPU unless told otherwise, with its persistent compilation cache on: a
    level's step takes long to compile (docs/performance.md), and every new process (a
    subprocess or container runtime's substrate) would compile it again."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    cache = os.environ.get(CACHE_VAR) or str(Path.home() / ".cache" / "pytest-hud" / "jax")
    try:
        Path(cache).mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    except OSError:  # a read-only home (a container): compile in memory only
        pass
    return jax


@functools.cache
def _level(path: str) -> tuple[Any, Any, Any]:
    """(state, static params, env params) of a shipped level (``"s/h0_weak_thrust.json"``)."""
    from kinetix.util.saving import load_from_json_file

    return load_from_json_file(path)


#: (static params, env params) as JSON -> the jitted functions of that kind of level
_BUILT: dict[str, tuple[Any, Any, Any]] = {}


def _functions(static: Any, params: Any, pixels: bool) -> tuple[Any, Any, Any]:
    """Jitted ``reset(rng, params, state)``, ``step(rng, state, action, params)`` and
    ``observe(state)`` for one kind of level: every level with the same static and env
    parameters (the shipped ones of a size, mostly) shares them."""
    key = json.dumps([dataclass_dict(static), dataclass_dict(params), pixels], sort_keys=True)
    if key in _BUILT:
        return _BUILT[key]
    jax = _jax()
    from kinetix.environment import env as kenv
    from kinetix.environment.spaces import ActionType, ObservationType, PixelObservations

    env = kenv.make_kinetix_env(
        ActionType.CONTINUOUS, ObservationType.SYMBOLIC_FLAT, None, params, static, auto_reset=False
    )
    render = PixelObservations(params, static).get_obs if pixels else None

    def observe(state: Any) -> Any:
        symbolic = env.get_obs(state)
        return (symbolic, render(state)) if render is not None else (symbolic,)

    def reset(rng: Any, env_params: Any, level_state: Any) -> Any:
        _, state = env.reset(rng, env_params, override_reset_state=level_state)
        return state

    built = _BUILT[key] = (jax.jit(reset), jax.jit(env.step), jax.jit(observe))
    return built


class KinetixEnv(gym.Env):  # type: ignore[type-arg]
    """One Kinetix level; ``reset(seed=k)`` starts from the level's stored state with
    ``PRNGKey(k)`` (vla-eval's ``episode_idx``), ``step`` takes the 6-d continuous action."""

    metadata = {"render_modes": [], "render_fps": CONTROL_RATE}

    def __init__(self, level: str, pixels: bool = False, max_steps: int = MAX_STEPS) -> None:
        from pytest_hud.suites.kinetix.tasks import level_file

        self.level = level
        self.pixels = pixels
        self.max_steps = int(max_steps)
        self.jax = _jax()
        state, static, params = _level(level_file(level))
        self.level_state = state
        self.params = params.replace(max_timesteps=self.max_steps)
        self._reset, self._step, self._observe = _functions(static, self.params, pixels)
        self.state: Any = None
        self.rng: Any = None
        self.steps = 0
        state_size = int(np.asarray(self._observe(state)[0]).size)
        spaces: dict[str, gym.Space[object]] = {
            "observation/state": gym.spaces.Box(-np.inf, np.inf, (state_size,), np.float32)
        }
        if pixels:
            shape = (IMAGE_SIZE, IMAGE_SIZE, 3)
            spaces["observation/images/viewport"] = gym.spaces.Box(0, 255, shape, np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)
        low = np.array([-1.0] * 4 + [0.0] * 2, np.float32)
        self.action_space = gym.spaces.Box(low, np.ones(ACTION_SIZE, np.float32))

    def _obs(self) -> dict[str, np.ndarray]:
        parts = self._observe(self.state)
        obs = {"observation/state": np.asarray(parts[0], np.float32)}
        if self.pixels:
            image = np.asarray(parts[1])  # H x W x 3 float in [0, 1], as vla-eval converts it
            obs["observation/images/viewport"] = (np.clip(image, 0.0, 1.0) * 255).astype(np.uint8)
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, object]]:
        jax = self.jax
        rng = jax.random.PRNGKey(int(seed or 0))
        self.rng, reset_rng = jax.random.split(rng)
        self.state = self._reset(reset_rng, self.params, self.level_state)
        self.steps = 0
        return self._obs(), {"success": False, "level": self.level}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, object]]:
        jax = self.jax
        act = np.asarray(action, np.float32).reshape(-1)
        if act.shape != (ACTION_SIZE,):
            raise ValueError(
                f"Kinetix takes a {ACTION_SIZE}-d action (4 motors, 2 thrusters); "
                f"got shape {np.shape(action)}"
            )
        self.rng, step_rng = jax.random.split(self.rng)
        _, self.state, reward, done, info = self._step(step_rng, self.state, act, self.params)
        self.steps += 1
        success = bool(info["GoalR"])
        ended = bool(done)
        truncated = ended and self.steps >= self.max_steps and not success
        terminated = ended and not truncated
        return self._obs(), float(reward), terminated, truncated, {"success": success}

    def close(self) -> None:
        self.state = None


def dataclass_dict(obj: Any) -> dict[str, Any]:
    """A (flax) dataclass's fields as plain JSON values, for a cache key."""
    import dataclasses

    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        out[f.name] = value if isinstance(value, int | float | bool | str) else repr(value)
    return out


def make_env(
    level: str = "s_h0_weak_thrust", pixels: bool = False, max_steps: int = MAX_STEPS
) -> KinetixEnv:
    """The factory ``env.gym`` serves (its parameters are the build args; the contract
    comes from the default level's env, built before any row's)."""
    return KinetixEnv(level, pixels, max_steps)
