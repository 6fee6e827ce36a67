"""GymBridge: serve any gymnasium-style env over openpi/0. Success is latched from info, else
judged on the *final* total reward.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from pytest_hud.errors import BridgeError
from pytest_hud.robot.contract import Contract, load_or_derive
from pytest_hud.robot.sim.bridge import RobotBridge
from pytest_hud.robot.sim.vector import build_env, check_mode

__all__ = ["SUCCESS_KEYS", "GymBridge", "flatten_observation", "gym_target"]

SUCCESS_KEYS = ("success", "is_success", "task_success")
STATE_KEY = "observation/state"


def gym_target(target: object) -> tuple[str | Callable[..., object], dict[str, object]]:
    """Normalise a gym target to something the sim process can rebuild.

    An env instance made through the registry becomes its spec id plus the
    kwargs it was made with; ids and factories pass through.
    """
    if isinstance(target, str) or (callable(target) and not isinstance(target, gym.Env)):
        return target, {}
    spec = getattr(target, "spec", None)
    if isinstance(target, gym.Env | gym.vector.VectorEnv) and spec is not None:
        env_id = spec.id
        entry = spec.entry_point
        if isinstance(entry, str) and ":" not in env_id:
            top = entry.split(":")[0].split(".")[0]
            if top != "gymnasium":  # the sim process must import the package that registers it
                env_id = f"{top}:{env_id}"
        return env_id, dict(spec.kwargs or {})
    raise TypeError(
        f"env.gym() takes a factory callable, a gymnasium registry id, or an env made with "
        f"gymnasium.make(); got {target!r} (an env without a registry spec cannot be rebuilt "
        "in the sim process: pass its factory function instead)"
    )


def flatten_observation(obs: object, prefix: str = "") -> dict[str, np.ndarray]:
    """Nested dict observations flattened to ``a/b`` keys; a bare array is the state."""
    if isinstance(obs, Mapping):
        out: dict[str, np.ndarray] = {}
        for key, value in obs.items():
            name = f"{prefix}/{key}" if prefix else str(key)
            out.update(flatten_observation(value, name))
        return out
    return {prefix or STATE_KEY: np.asarray(obs)}


def _wire_array(arr: np.ndarray, batched_rank: int) -> np.ndarray:
    """Images stay uint8; state-like arrays go out as float32 (scalars as [1])."""
    if arr.dtype == np.uint8 and arr.ndim - batched_rank >= 2:
        return arr
    if arr.ndim == batched_rank:
        arr = arr[..., None]
    return arr.astype(np.float32, copy=False)


class GymBridge(RobotBridge):
    """A RobotBridge around a gymnasium env; ``num_envs > 1`` serves a VectorEnv's copies."""

    def __init__(
        self,
        target: object,
        *,
        make_kwargs: Mapping[str, object] | None = None,
        num_envs: int = 1,
        fps: float | None = None,
        prompt: str | None = None,
        contract: str | Path | Mapping[str, object] | Contract | None = None,
        success_threshold: float | None = None,
        robot_type: str | None = None,
        step_slots_alone: bool | None = None,
        vectorization_mode: str = "sync",
        score_key: str | None = None,
    ) -> None:
        self.target, extra = gym_target(target)
        self.score_key = score_key
        self.step_slots_alone = step_slots_alone
        self.vectorization_mode = check_mode(vectorization_mode, step_slots_alone is True)
        self.make_kwargs = {**extra, **(make_kwargs or {})}
        self.num_envs = int(num_envs)
        self.fps = fps
        self.prompt_text = prompt
        self.contract_source = contract
        self.success_threshold = success_threshold
        self.robot_type = robot_type
        self.env: Any = None
        self._vector = False
        self._build_args: dict[str, object] | None = None
        self._params = self._factory_params()
        self._obs: dict[str, np.ndarray] = {}
        n = self.num_envs
        self._done = np.zeros(n, bool)
        self._success = np.zeros(n, bool)
        self._terminated = np.zeros(n, bool)
        self._truncated = np.zeros(n, bool)
        self._total = np.zeros(n, np.float64)
        self._steps = np.zeros(n, np.int64)
        self._reward = np.zeros(n, np.float32)
        self._best = np.full(n, np.nan)  # the episode's best info[score_key] (partial credit)

    # -- building ------------------------------------------------------------------
    def _factory_params(self) -> set[str] | None:
        """Parameter names of a factory (None: accepts anything); registry ids have none."""
        if isinstance(self.target, str):
            return set()
        try:
            sig = inspect.signature(self.target)
        except (TypeError, ValueError):
            return set()
        if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            return None
        return {n for n in sig.parameters if n not in ("seed", "num_envs")}

    def _split(self, task_args: dict[str, object]) -> tuple[dict[str, object], dict[str, object]]:
        build: dict[str, object] = {}
        episodic: dict[str, object] = {}
        for key, value in task_args.items():
            is_build = key != "seed" and (self._params is None or key in self._params)
            (build if is_build else episodic)[key] = value
        return build, episodic

    def _build(self, build_args: dict[str, object]) -> None:
        if self.env is not None and build_args == self._build_args:
            return
        self._close_env()
        kwargs = {**self.make_kwargs, **build_args}
        env = build_env(self.target, kwargs, self.num_envs, self.vectorization_mode)
        self._vector = isinstance(env, gym.vector.VectorEnv)
        got = int(env.num_envs) if self._vector else 1
        if got != self.num_envs:
            env.close()
            raise BridgeError(
                f"the factory built {got} env copies but num_envs={self.num_envs}; "
                "pass num_envs= matching what the factory returns"
            )
        self.env, self._build_args = env, dict(build_args)

    def _close_env(self) -> None:
        if self.env is not None:
            try:
                self.env.close()
            finally:
                self.env = None

    @property
    def action_space(self) -> gym.Space[object]:
        assert self.env is not None
        return self.env.single_action_space if self._vector else self.env.action_space

    def _set_obs(self, obs: object) -> None:
        rank = 1 if self._vector else 0
        flat = flatten_observation(obs)
        out = {k: _wire_array(v, rank) for k, v in flat.items()}
        if not self._vector:
            out = {k: v[None] for k, v in out.items()}
        self._obs = out

    # -- the RobotBridge hooks ---------------------------------------------------------
    def ensure_contract(self) -> Contract:
        src = self.contract_source
        if isinstance(src, Contract | Mapping):
            return Contract.from_dict(src)

        def derive() -> Contract:
            if self.env is None:
                self._build({})
                self._reset_all({}, 0)
            sample = {k: v[0] for k, v in self._obs.items()}
            return Contract.derive(
                sample, self.action_space, control_rate=self._fps(), robot_type=self.robot_type
            )

        return load_or_derive(src, derive)

    def _fps(self) -> float | None:
        if self.fps is not None:
            return float(self.fps)
        meta = getattr(self.env, "metadata", None) or {}
        rate = meta.get("render_fps")
        return float(rate) if rate else None

    def reset(self, **task_args: object) -> str:
        build, episodic = self._split(task_args)
        self._build(build)
        seed = episodic.pop("seed", None)
        self._reset_all(episodic, seed)
        return self._prompt(task_args)

    def _reset_all(self, options: dict[str, object], seed: object) -> None:
        obs, _ = self.env.reset(seed=seed, options=options or None)
        self._set_obs(obs)
        self._done[:] = False
        self._success[:] = False
        self._terminated[:] = False
        self._truncated[:] = False
        self._total[:] = 0.0
        self._steps[:] = 0
        self._reward[:] = 0.0
        self._best[:] = np.nan

    def can_reset_slot(self) -> bool:
        return self.num_envs > 1

    def reset_slot(self, index: int, **task_args: object) -> str:
        build, episodic = self._split(task_args)
        if self.env is None or build != self._build_args:
            raise BridgeError(
                f"slot {index} asks for build args {build}, but the shared sim was built with "
                f"{self._build_args}; concurrent episodes on one vectorized sim must share them"
            )
        if not self._vector:
            raise BridgeError("a single env has one slot; it cannot reset a slot alone")
        seed = episodic.pop("seed", None)
        seeds: list[object] = [None] * self.num_envs
        seeds[index] = seed
        mask = np.zeros(self.num_envs, bool)
        mask[index] = True
        obs, _ = self.env.reset(seed=seeds, options={**episodic, "reset_mask": mask})
        self._set_obs(obs)
        self._done[index] = False
        self._success[index] = False
        self._terminated[index] = False
        self._truncated[index] = False
        self._total[index] = 0.0
        self._steps[index] = 0
        self._reward[index] = 0.0
        self._best[index] = np.nan
        return self._prompt(task_args)

    def _prompt(self, task_args: dict[str, object]) -> str:
        if self.prompt_text is not None:
            return self.prompt_text.format(**task_args)
        env = self.env.envs[0] if self._vector and hasattr(self.env, "envs") else self.env
        for attr in ("task_description", "task"):
            value = getattr(getattr(env, "unwrapped", env), attr, None)
            if isinstance(value, str) and value:
                return value
        task = task_args.get("task")
        if isinstance(task, str):
            return task
        name = self.target if isinstance(self.target, str) else self.target.__name__
        return str(name)

    def _cast(self, actions: np.ndarray) -> np.ndarray:
        space = self.action_space
        n = len(actions)
        if isinstance(space, gym.spaces.Discrete):
            out = np.rint(actions[:, 0]).astype(np.int64)
            out = np.clip(out, space.start, space.start + space.n - 1)
        elif isinstance(space, gym.spaces.Box):
            out = actions.reshape((n, *space.shape)).astype(space.dtype, copy=False)
        else:
            out = np.rint(actions).astype(np.int64).reshape((n, *(space.shape or ())))
        return out if self._vector else out[0]

    def step(self, actions: np.ndarray) -> None:
        act = self._cast(actions)
        if not self._vector:
            if self._done[0]:
                return
            obs, reward, term, trunc, info = self.env.step(act)
            rewards = np.array([reward], np.float64)
            terms, truncs = np.array([bool(term)]), np.array([bool(trunc)])
            succ = _success_single(info)
        else:
            obs, reward, term, trunc, info = self.env.step(act)
            rewards = np.asarray(reward, np.float64)
            terms, truncs = np.asarray(term, bool), np.asarray(trunc, bool)
            succ = _success_vector(info, self.num_envs)
        self._set_obs(obs)
        self._score(slice(None), info, self.num_envs if self._vector else None)
        self._record(slice(None), rewards, terms, truncs, succ)

    def can_step_slots(self) -> bool:
        """A SyncVectorEnv's copies (independent envs) step each when its agent acts, with
        no barrier, unless ``step_slots_alone=False``: the same episodes either way
        (tests/robot/test_pipelining.py), and a BatchedModel may then run the rollouts in
        halves, one half stepping while the other's forward runs, where it measures that
        to be faster (robot/agent/split.py). A vector env of another kind (async, or with
        vector-level wrappers) keeps the barrier."""
        return self.step_slots_alone is not False and type(self.env) is gym.vector.SyncVectorEnv

    def step_slots(self, indices: list[int], actions: np.ndarray) -> None:
        """Step the copies ``indices`` alone, as SyncVectorEnv.step would have (it calls
        each copy's ``step``), without stepping the others."""
        acts = self._cast(actions)
        envs = self.env.envs
        for j, i in enumerate(indices):
            if self._done[i]:
                continue
            obs, reward, term, trunc, info = envs[i].step(acts[j])
            for key, value in flatten_observation(obs).items():
                rows = self._obs[key]
                if not rows.flags.writeable:
                    rows = self._obs[key] = rows.copy()
                rows[i] = _wire_array(value, 0)
            succ = _success_single(info)
            self._score([i], info, None)
            self._record(
                [i],
                np.array([reward], np.float64),
                np.array([bool(term)]),
                np.array([bool(trunc)]),
                succ,
            )

    def _score(self, at: slice | list[int], info: object, n: int | None) -> None:
        """Keep the best ``info[score_key]`` of the live slots ``at`` (``n``: a vector env's
        info, one value per copy)."""
        if self.score_key is None or not isinstance(info, Mapping) or self.score_key not in info:
            return
        value: np.ndarray = np.asarray(info[self.score_key], np.float64).reshape(-1)
        if n is not None:
            mask = np.asarray(info.get(f"_{self.score_key}", np.ones(n, bool)), bool).reshape(-1)
            value = np.where(mask, value, np.nan)
        live = ~self._done[at]
        self._best[at] = np.where(live, np.fmax(self._best[at], value), self._best[at])

    def _record(
        self,
        at: slice | list[int],
        rewards: np.ndarray,
        terms: np.ndarray,
        truncs: np.ndarray,
        succ: np.ndarray | None,
    ) -> None:
        """Account one step of the slots ``at`` (a slice or indices); finished slots keep
        their totals."""
        live = ~self._done[at]
        self._reward[at] = np.where(live, rewards, 0.0)
        self._total[at] += np.where(live, rewards, 0.0)
        self._steps[at] += live
        if succ is not None:
            self._success[at] |= live & succ
        self._terminated[at] |= live & terms
        self._truncated[at] |= live & truncs & ~terms
        self._done[at] |= live & (terms | truncs)

    def get_observation(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        return self._obs, self._done.copy(), self._reward.copy()

    def _judged(self, i: int) -> bool:
        """Success from info (latched), else the threshold on the final total."""
        if self._success[i]:
            return True
        threshold = self.success_threshold
        return threshold is not None and bool(self._total[i] >= threshold)

    def result_slots(self) -> list[dict[str, Any]]:
        out = []
        for i in range(self.num_envs):
            success = self._judged(i)
            best = float(self._best[i])
            score = float(np.clip(best, 0.0, 1.0)) if not np.isnan(best) else float(success)
            out.append(
                {
                    "score": score,
                    "success": success,
                    "total_reward": float(self._total[i]),
                    "steps": int(self._steps[i]),
                    "terminated": bool(self._terminated[i]),
                    "truncated": bool(self._truncated[i]),
                }
            )
        return out

    def close(self) -> None:
        self._close_env()


def _success_single(info: object) -> np.ndarray | None:
    if isinstance(info, Mapping):
        for key in SUCCESS_KEYS:
            if key in info:
                return np.array([bool(np.asarray(info[key]).any())])
    return None


def _success_vector(info: object, n: int) -> np.ndarray | None:
    if isinstance(info, Mapping):
        for key in SUCCESS_KEYS:
            if key in info:
                value = np.asarray(info[key]).reshape(-1)
                mask = np.asarray(info.get(f"_{key}", np.ones(n, bool)), bool).reshape(-1)
                if value.size == n:
                    return value.astype(bool) & mask
    return None
