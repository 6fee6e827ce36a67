"""Contract v0: the JSON both sides of the robot wire share. Only ``role`` and image ``type``
shape behaviour; the rest is descriptive, never checked against arrays.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.errors import HudError
from pytest_hud.plumbing.jsonread import loads

__all__ = [
    "IMAGE_TYPES",
    "ROLES",
    "Contract",
    "ContractError",
    "Feature",
    "Spaces",
    "is_environment_state",
    "load_or_derive",
]

ROLES = ("observation", "action")
IMAGE_TYPES = ("rgb", "bgr", "gray", "depth")
_KNOWN_KEYS = {"role", "type", "names", "dtype", "shape", "stats"}
#: The last name component that marks an observation as the environment's state
#: (LeRobot's ``observation.environment_state``: object poses, goals) rather than the
#: robot's own (``observation.state``).
ENVIRONMENT_STATE = "environment_state"


def is_environment_state(name: str) -> bool:
    """``environment_state``, ``observation/environment_state``, ``x.environment_state``."""
    return re.split(r"[/.]", name)[-1] == ENVIRONMENT_STATE


class ContractError(HudError, ValueError):
    """A contract that does not follow schema v0; the message names the feature and the fix."""


@dataclass(frozen=True)
class Feature:
    """One entry of ``features``: its role plus descriptive metadata."""

    name: str
    role: str
    type: str | None = None
    names: tuple[str, ...] | None = None
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    stats: dict[str, list[float]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_image(self) -> bool:
        return self.role == "observation" and self.type in IMAGE_TYPES

    @property
    def size(self) -> int | None:
        """Element count of a flat (rank-1) feature, from shape or names."""
        if self.shape is not None:
            return int(np.prod(self.shape)) if self.shape else 1
        if self.names is not None:
            return len(self.names)
        return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, object] = {"role": self.role}
        if self.type is not None:
            out["type"] = self.type
        if self.names is not None:
            out["names"] = list(self.names)
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.shape is not None:
            out["shape"] = list(self.shape)
        if self.stats is not None:
            out["stats"] = {k: list(v) for k, v in self.stats.items()}
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, name: str, spec: object) -> Feature:
        where = f"contract feature {name!r}"
        if not isinstance(spec, Mapping):
            raise ContractError(f"{where} must be a JSON object, got {type(spec).__name__}")
        role = spec.get("role")
        if role not in ROLES:
            raise ContractError(
                f"{where} has role {role!r}; every feature needs "
                f'"role": "observation" or "role": "action"'
            )
        ftype = spec.get("type")
        if ftype is not None and not isinstance(ftype, str):
            raise ContractError(f"{where}: type must be a string such as 'rgb', got {ftype!r}")
        names = spec.get("names")
        if names is not None:
            if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
                raise ContractError(f"{where}: names must be a list of strings, got {names!r}")
            names = tuple(names)
        shape = spec.get("shape")
        if shape is not None:
            if (
                not isinstance(shape, list | tuple)
                or not shape
                or not all(isinstance(d, int) and d >= 0 for d in shape)
            ):
                raise ContractError(
                    f"{where}: shape must be a non-empty list of non-negative ints "
                    f"(scalars are [1]), got {shape!r}"
                )
            shape = tuple(shape)
        dtype = spec.get("dtype")
        if dtype is not None and not isinstance(dtype, str):
            raise ContractError(f"{where}: dtype must be a string like 'float32' or 'image'")
        stats = spec.get("stats")
        if stats is not None:
            if not isinstance(stats, Mapping) or not all(
                isinstance(v, list | tuple) for v in stats.values()
            ):
                raise ContractError(
                    f"{where}: stats must map mean/std/min/max to per-element lists"
                )
            stats = {str(k): [float(x) for x in v] for k, v in stats.items()}
        extra = {k: v for k, v in spec.items() if k not in _KNOWN_KEYS}
        return cls(name, role, ftype, names, dtype, shape, stats, extra)


@dataclass(frozen=True)
class Spaces:
    """A contract split by role: the observation space and the action space."""

    observation: dict[str, Feature]
    action: dict[str, Feature]

    @property
    def cameras(self) -> list[Feature]:
        """Image observations, in contract order."""
        return [f for f in self.observation.values() if f.is_image]

    @property
    def state(self) -> Feature | None:
        """The first observation without an image type (the state vector)."""
        return next((f for f in self.observation.values() if not f.is_image), None)

    @property
    def states(self) -> list[Feature]:
        """Every non-image observation, in contract order."""
        return [f for f in self.observation.values() if not f.is_image]

    @property
    def robot_states(self) -> list[Feature]:
        """The non-image observations that are not the environment's state."""
        return [f for f in self.states if not is_environment_state(f.name)]

    @property
    def env_states(self) -> list[Feature]:
        """Observations named ``environment_state`` (see :func:`is_environment_state`)."""
        return [f for f in self.states if is_environment_state(f.name)]

    @property
    def action_feature(self) -> Feature:
        return next(iter(self.action.values()))


@dataclass(frozen=True)
class Contract:
    """Contract v0: control rate, embodiment id and the feature map."""

    features: dict[str, Feature]
    control_rate: float | None = None
    robot_type: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        actions = [f.name for f in self.features.values() if f.role == "action"]
        if len(actions) != 1:
            raise ContractError(
                f"contract v0 has exactly one action feature, found {len(actions)} "
                f'({actions or "none"}); declare a single feature with "role": "action"'
            )
        if not any(f.role == "observation" for f in self.features.values()):
            raise ContractError(
                'contract has no observation feature; add at least one with "role": "observation"'
            )
        if self.control_rate is not None and not (
            isinstance(self.control_rate, int | float)
            and math.isfinite(self.control_rate)
            and self.control_rate > 0
        ):
            raise ContractError(
                f"control_rate must be a positive number of Hz, got {self.control_rate!r}"
            )

    # -- views ---------------------------------------------------------------
    def spaces(self) -> Spaces:
        obs = {n: f for n, f in self.features.items() if f.role == "observation"}
        act = {n: f for n, f in self.features.items() if f.role == "action"}
        return Spaces(obs, act)

    @property
    def action_name(self) -> str:
        return self.spaces().action_feature.name

    def payload_bytes(self, role: str) -> int | None:
        """Upper bound on the array bytes of one frame of ``role`` features (None: unknown).

        Counted generously so a receiver can cap frames at it: 4 bytes per image
        element (a float CHW tensor from an adapter), 8 per other element.
        """
        total = 0
        for f in self.features.values():
            if f.role != role:
                continue
            count = f.size if not f.shape else math.prod(f.shape)
            if count is None:
                return None
            total += count * (4 if f.type in IMAGE_TYPES else 8)
        return total

    @property
    def fps(self) -> float | None:
        return self.control_rate

    # -- (de)serialisation ---------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, object] = {}
        if self.control_rate is not None:
            out["control_rate"] = self.control_rate
        if self.robot_type is not None:
            out["robot_type"] = self.robot_type
        out["features"] = {n: f.to_dict() for n, f in self.features.items()}
        out.update(self.extra)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: object) -> Contract:
        if isinstance(data, Contract):
            return data
        if not isinstance(data, Mapping):
            raise ContractError(f"a contract is a JSON object, got {type(data).__name__}")
        feats = data.get("features")
        if not isinstance(feats, Mapping) or not feats:
            raise ContractError(
                'contract needs a non-empty "features" object mapping names to feature specs'
            )
        features = {str(n): Feature.from_dict(str(n), s) for n, s in feats.items()}
        rate = data.get("control_rate")
        robot_type = data.get("robot_type")
        if robot_type is not None and not isinstance(robot_type, str):
            raise ContractError(f"robot_type must be a string, got {robot_type!r}")
        extra = {
            k: v for k, v in data.items() if k not in {"features", "control_rate", "robot_type"}
        }
        return cls(features, rate, robot_type, extra)

    @classmethod
    def from_json(cls, text: str) -> Contract:
        try:
            return cls.from_dict(loads(text))
        except json.JSONDecodeError as exc:
            raise ContractError(f"contract is not valid JSON: {exc}") from exc

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.to_json() + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Contract:
        path = Path(path)
        try:
            return cls.from_json(path.read_text())
        except ContractError as exc:
            raise ContractError(f"{path}: {exc}") from exc

    # -- derivation ----------------------------------------------------------
    @classmethod
    def derive(
        cls,
        observation: Mapping[str, object],
        action_space: object,
        *,
        control_rate: float | None = None,
        robot_type: str | None = None,
        action_name: str = "action",
    ) -> Contract:
        """Build a contract from one flat observation and a gymnasium action space."""
        features: dict[str, Feature] = {}
        for name, value in observation.items():
            features[name] = _observation_feature(name, np.asarray(value))
        if action_name in features:
            raise ContractError(
                f"observation key {action_name!r} collides with the action feature's name; "
                "rename the observation or pass action_name="
            )
        features[action_name] = _action_feature(action_name, action_space)
        return cls(features, control_rate, robot_type)


def _observation_feature(name: str, arr: np.ndarray) -> Feature:
    if arr.dtype == np.uint8 and arr.ndim == 3 and arr.shape[-1] in (1, 3):
        ftype = "rgb" if arr.shape[-1] == 3 else "gray"
        return Feature(
            name, "observation", ftype, ("height", "width", "channel"), "image", tuple(arr.shape)
        )
    if arr.dtype == np.uint8 and arr.ndim == 2:
        return Feature(name, "observation", "gray", ("height", "width"), "image", tuple(arr.shape))
    if arr.ndim == 0:
        return Feature(name, "observation", None, None, "float32", (1,))
    if arr.ndim == 1:
        return Feature(name, "observation", None, None, "float32", tuple(arr.shape))
    raise ContractError(
        f"observation {name!r} has shape {arr.shape} and dtype {arr.dtype}: not an HWC uint8 "
        "image nor a 1-D state; flatten it, or pass an explicit contract"
    )


def _discrete_action(
    name: str, low: list[float], high: list[float], extra: dict[str, Any] | None = None
) -> Feature:
    """An int64 action feature of ``len(low)`` discrete values within ``low..high``."""
    stats = {"min": low, "max": high}
    return Feature(name, "action", "discrete", None, "int64", (len(low),), stats, extra or {})


def _action_feature(name: str, space: object) -> Feature:
    import gymnasium as gym

    if isinstance(space, gym.spaces.Box):
        shape = tuple(int(d) for d in space.shape) or (1,)
        stats = None
        low = np.asarray(space.low, np.float64).reshape(-1)
        high = np.asarray(space.high, np.float64).reshape(-1)
        if np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
            stats = {"min": low.tolist(), "max": high.tolist()}
        return Feature(name, "action", None, None, str(np.dtype(space.dtype)), shape, stats)
    if isinstance(space, gym.spaces.Discrete):
        first, last = [float(space.start)], [float(space.start + space.n - 1)]
        return _discrete_action(name, first, last, {"n": int(space.n)})
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).reshape(-1)
        return _discrete_action(name, [0.0] * len(nvec), (nvec - 1).astype(float).tolist())
    if isinstance(space, gym.spaces.MultiBinary):
        n = int(np.prod(space.shape))
        return Feature(
            name, "action", "binary", None, "int8", (n,), {"min": [0.0] * n, "max": [1.0] * n}
        )
    raise ContractError(
        f"cannot derive an action feature from {space!r}: use a Box, Discrete, MultiDiscrete "
        "or MultiBinary action space, or pass an explicit contract"
    )


def load_or_derive(path: str | Path | None, derive: Callable[[], Contract]) -> Contract:
    """Load ``path`` if it exists (so hand edits stick), else derive and write it there."""
    if path is not None and Path(path).exists():
        return Contract.load(path)
    contract = derive()
    if path is not None:
        contract.save(path)
    return contract
