"""Any LeRobot env config served as a pytest-hud sim, built by LeRobot's own factory, with
observations, actions, success and episode ends exactly as lerobot-eval's rollout sees them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from pytest_hud.errors import HudError
from pytest_hud.robot import lerobot_version as compat

if TYPE_CHECKING:
    from lerobot.envs.configs import EnvConfig

    from pytest_hud.robot.lerobot_version import VectorEnv

__all__ = [
    "NEEDS",
    "LeRobotEnvError",
    "LeRobotVectorEnv",
    "make_config",
    "make_lerobot_env",
    "make_vector_env",
]

#: Env type -> what it needs besides lerobot. The first three run here.
_NEED: dict[str, str] = {
    "pusht": "gym-pusht",
    "aloha": "gym-aloha and a MuJoCo GL backend (MUJOCO_GL=egl)",
    "metaworld": "metaworld and a MuJoCo GL backend",
    "libero": "hf-libero, whose scene assets are downloaded from the Hugging Face Hub at first use",
    "libero_plus": "LIBERO-plus and its assets from the Hub",
    "robocasa": "robocasa + robosuite and their kitchen assets",
    "vlabench": "VLABench and its assets",
    "isaaclab_arena": "NVIDIA Isaac Lab (a CUDA GPU)",
    "robotwin": "RoboTwin 2.0 on SAPIEN (a GPU renderer)",
    "robomme": "RoboMME and its assets",
    "gym_manipulator": "a real robot or gym-hil",
    "hub": "an EnvHub repo (its env.py, trust_remote_code=True)",
    "genesis": "genesis-world and lerobot-genesis (a third-party plugin)",
}
#: How to install an env type's needs where it is not lerobot's extra of the type's name.
_INSTALL: dict[str, str] = {
    "isaaclab_arena": "see lerobot's isaaclab_arena docs",
    "gym_manipulator": "pip install 'lerobot[hilserl]'",
    "hub": "pass hub_path='user/repo'",
    "genesis": "pip install 'pytest-hud[genesis]'",
}
#: Env type -> (what it needs besides lerobot, how to install it).
NEEDS: dict[str, tuple[str, str]] = {
    env_type: (need, _INSTALL.get(env_type, f"pip install 'lerobot[{env_type}]'"))
    for env_type, need in _NEED.items()
}
#: Third-party env plugins LeRobot's own discovery misses (it imports installed packages
#: named ``lerobot_env_*``): env type -> the modules that register it with LeRobot.
PLUGINS: dict[str, tuple[str, ...]] = {
    "genesis": ("lerobot_genesis.config", "lerobot_genesis.tasks"),
}
#: Config fields that, when given, also go to the gym env as keyword arguments.
_SIZE_FIELDS = ("observation_height", "observation_width")


class LeRobotEnvError(HudError, ValueError):
    """A LeRobot env that cannot be built: unknown type or field, or a missing package."""


def make_config(env_type: str, **fields: object) -> EnvConfig:
    """The ``EnvConfig`` LeRobot registers as ``env_type``, with ``fields`` set."""
    os.environ.setdefault("MUJOCO_GL", "egl")  # MuJoCo envs render headless on the CPU
    from lerobot.envs.configs import EnvConfig

    compat.require_supported()
    if env_type not in EnvConfig.get_known_choices():
        _register_plugins(env_type)
    known = sorted(EnvConfig.get_known_choices())
    if env_type not in known:
        raise LeRobotEnvError(
            f"lerobot {'.'.join(map(str, compat.lerobot_version()))} has no env type "
            f"{env_type!r}; expected one of {known}"
        )
    cls = EnvConfig.get_choice_class(env_type)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - names)
    if unknown:
        raise LeRobotEnvError(
            f"LeRobot's {env_type!r} env config has no field {unknown}; its fields: {sorted(names)}"
        )
    config = cls(**fields)
    forward = {k: fields[k] for k in _SIZE_FIELDS if k in fields}
    if not forward:
        return config
    if env_type == "aloha":  # gym-aloha renders 480x640 whatever it is told: .aloha
        return _forwarding(config, forward, package="pytest_hud.interop.lerobot.aloha")
    return _forwarding(config, forward)


def _register_plugins(env_type: str) -> None:
    """Import the third-party env plugins: LeRobot's own discovery (``lerobot_env_*``
    packages), then :data:`PLUGINS`' modules for ``env_type``."""
    with contextlib.suppress(ImportError):  # LeRobot < 0.5 has no plugin discovery
        from lerobot.utils.import_utils import register_third_party_plugins

        register_third_party_plugins()
    for module in PLUGINS.get(env_type, ()):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise _missing(env_type, exc) from exc


def _forwarding(
    config: EnvConfig, extra: Mapping[str, object], package: str | None = None
) -> EnvConfig:
    """``config`` whose ``gym_kwargs`` also carry ``extra`` (its type name unchanged);
    ``package``: the gym env comes from the module of that name, which registers it under
    its ``NAMESPACE`` with the same id."""
    base = type(config)
    name = config.type
    namespace = importlib.import_module(package).NAMESPACE if package else None

    class Forwarding(base):  # type: ignore[misc, valid-type]
        @property
        def type(self) -> str:
            return name

        @property
        def gym_kwargs(self) -> dict:
            return {**super().gym_kwargs, **extra}

        if package is not None:

            @property
            def package_name(self) -> str:
                return package

            @property
            def gym_id(self) -> str:
                return f"{namespace}/{self.task}"

    Forwarding.__name__ = Forwarding.__qualname__ = f"{base.__name__}Sized"
    config.__class__ = Forwarding
    return config


def make_vector_env(
    env_type: str, num_envs: int = 1, *, use_async_envs: bool = False, **fields: Any
) -> tuple[EnvConfig, VectorEnv]:
    """``(config, vector env)``: LeRobot's ``env_type`` config with ``fields`` and its one
    task's vector env of ``num_envs`` copies, built by LeRobot's ``make_env`` (the plugin's
    sim and the lerobot-eval reference build it here alike). An ``episode_length`` given
    below the env's own limit caps its episodes also where LeRobot's config declares the
    field but its env keeps its own length (MetaWorld's 500 steps)."""
    config = make_config(env_type, **fields)
    from lerobot.envs.factory import make_env

    try:
        suites = make_env(config, n_envs=num_envs, use_async_envs=use_async_envs)
    except ModuleNotFoundError as exc:
        raise _missing(env_type, exc) from exc
    vectors = [vec for tasks in suites.values() for vec in tasks.values()]
    if len(vectors) != 1:
        for vec in vectors:
            vec.close()
        raise LeRobotEnvError(
            f"LeRobot's {env_type!r} config with task={config.task!r} builds {len(vectors)} "
            "task envs; serve one task per env module (set task= to a single task)"
        )
    [vec] = vectors
    cap = fields.get("episode_length")
    if cap is not None and int(cap) < compat.episode_limit(vec):
        compat.cap_episodes(vec, int(cap))
    return config, vec


def make_lerobot_env(env_type: str, num_envs: int = 1, **fields: Any) -> LeRobotVectorEnv:
    """``num_envs`` copies of LeRobot's ``env_type`` env (GymBridge's factory)."""
    config, vec = make_vector_env(env_type, num_envs, **fields)
    from lerobot.envs.factory import make_env_pre_post_processors

    pre, post = make_env_pre_post_processors(config, None)
    return LeRobotVectorEnv(vec, pre, post, fps=float(config.fps), env_type=env_type)


def _missing(env_type: str, exc: ModuleNotFoundError) -> LeRobotEnvError:
    """The one error for an env whose package is not installed (at build or first reset)."""
    need, how = NEEDS.get(env_type, (exc.name or "a package", "see LeRobot's docs"))
    return LeRobotEnvError(
        f"LeRobot's {env_type!r} env needs {need}, which is not installed "
        f"({exc.name or exc}); fix: {how}"
    )


class LeRobotVectorEnv(gym.vector.VectorEnv):
    """LeRobot's vector env as lerobot-eval's rollout drives it (see the module doc)."""

    def __init__(
        self,
        env: VectorEnv,
        preprocessor: Any,
        postprocessor: Any,
        *,
        fps: float,
        env_type: str = "",
    ) -> None:
        from lerobot.envs.utils import preprocess_observation

        self.env = env
        self.env_type = env_type
        self.num_envs = int(env.num_envs)
        self.single_action_space = env.single_action_space
        self.action_space = env.action_space
        self.single_observation_space = env.single_observation_space
        self.observation_space = env.observation_space
        self.metadata = {**(getattr(env, "metadata", None) or {}), "render_fps": fps}
        self._preprocess_observation = preprocess_observation
        self._pre = preprocessor if _steps(preprocessor) else None
        self._post = postprocessor if _steps(postprocessor) else None
        self.max_episode_steps = compat.episode_limit(env)
        self.task_description = self._tasks()[0]
        self._steps = np.zeros(self.num_envs, np.int64)

    def _tasks(self) -> list[str]:
        """The task text lerobot-eval adds to each observation (``task_description`` or
        ``task`` of the copies, else empty)."""
        for attr in ("task_description", "task"):
            try:
                return [str(t) for t in self.env.call(attr)]
            except (AttributeError, NotImplementedError):
                continue
        return [""] * self.num_envs

    def _observation(self, raw: Mapping[str, object]) -> dict[str, np.ndarray]:
        obs = self._preprocess_observation(dict(raw))
        if self._pre is not None:
            obs["task"] = self._tasks()
            obs = self._pre(obs)
        out: dict[str, np.ndarray] = {}
        for key, value in obs.items():
            if not hasattr(value, "numpy") or key == "task":
                continue
            arr = value.detach().cpu().numpy()
            if arr.ndim == 4:  # (B, C, H, W) in [0, 1], made from uint8: back to uint8 HWC
                arr = np.rint(arr.transpose(0, 2, 3, 1) * 255.0).clip(0, 255).astype(np.uint8)
            out[key.replace(".", "/")] = arr
        return out

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,  # a list: a seed (or none) per copy
        options: dict[str, object] | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, object]]:
        options = dict(options or {})
        mask = options.get("reset_mask")
        try:  # some envs (vlabench, robotwin) import their package at the first reset
            obs, info = self.env.reset(
                seed=seed, options={**compat.new_rollout_options(), **options}
            )
        except ModuleNotFoundError as exc:
            raise _missing(self.env_type, exc) from exc
        self._steps[np.asarray(mask, bool) if mask is not None else slice(None)] = 0
        return self._observation(obs), info

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, object]]:
        if self._post is not None:
            import torch

            actions = self._post({"action": torch.as_tensor(actions)})["action"].numpy()
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self._steps += 1
        truncated = np.asarray(truncated, bool) | (self._steps >= self.max_episode_steps)
        return self._observation(obs), reward, terminated, truncated, _success_info(info)

    def close(self, **kwargs: object) -> None:
        self.env.close()


def _steps(pipeline: object) -> bool:
    return bool(getattr(pipeline, "steps", None))


def _success_info(info: Mapping[str, object]) -> dict[str, object]:
    """``is_success`` per copy as lerobot-eval's rollout reads it: from ``final_info`` when
    some copy ended (and was reset in the same step), else from the step's own info."""
    final = info.get("final_info")
    if isinstance(final, Mapping):  # lerobot-eval then reads only final_info
        value = np.asarray(final.get("is_success", False), bool)
        ended = np.asarray(info.get("_final_info", True), bool)
        value = np.broadcast_to(value & ended, ended.shape if ended.ndim else value.shape)
        return {"is_success": value, "_is_success": np.ones_like(value, bool)}
    if "is_success" in info:
        return {"is_success": info["is_success"], "_is_success": info.get("_is_success", True)}
    return {}
