"""The dataset's feature schema, built from the contract at the first episode, and how an
observation plus action becomes a frame. ``check()`` refuses cameras lerobot's encoder crashes
on.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pytest_hud.errors import DatasetError
from pytest_hud.robot.contract import Feature, Spaces
from pytest_hud.robot.record.grade import NEXT_FEATURES, empty_outcome

__all__ = ["MIN_VIDEO_HEIGHT", "MIN_VIDEO_WIDTH", "DatasetError", "camera_key"]

#: Smallest frame lerobot 0.4.4's default encoder (libsvtav1) takes without failing.
MIN_VIDEO_WIDTH = 25
MIN_VIDEO_HEIGHT = 4
STATE_KEY = "observation.state"
ENV_STATE_KEY = "observation.environment_state"
#: File-size limit (MB) that makes lerobot start new files for every episode.
_PER_EPISODE_FILES_MB = 1e-6
_TRUE = {"1", "true", "yes", "on"}
_ERRORED = "the episode errored"


def camera_key(name: str) -> str:
    """The ``observation.images.<camera>`` suffix of image feature ``name`` (see module doc)."""
    parts = [p for p in re.split(r"[/.]", name) if p]
    leaf = re.sub(r"[^A-Za-z0-9_-]+", "_", parts[-1] if parts else "").strip("_")
    if not leaf:
        raise DatasetError(
            f"image feature {name!r} gives no camera name; "
            f"pass DatasetWriter(camera_keys={{{name!r}: 'cam'}})"
        )
    return leaf


# -- the schema ---------------------------------------------------------------------
@dataclass(frozen=True)
class _Camera:
    feature: str
    key: str
    type: str
    shape: tuple[int, int, int] | None  # stored (H, W, 3)


@dataclass(frozen=True)
class _Schema:
    """How one contract maps onto the dataset's features."""

    cameras: tuple[_Camera, ...]
    states: tuple[Feature, ...]
    state_sizes: tuple[int | None, ...]
    state_dtype: str
    action: Feature
    action_size: int | None
    fps: int
    robot_type: str | None
    video: bool
    #: Observations named ``environment_state`` -> ``observation.environment_state``.
    env_states: tuple[Feature, ...] = ()
    env_sizes: tuple[int | None, ...] = ()

    @property
    def resolved(self) -> bool:
        return (
            all(c.shape is not None for c in self.cameras)
            and None not in self.state_sizes
            and None not in self.env_sizes
            and self.action_size is not None
        )

    def vectors(self) -> list[tuple[str, tuple[Feature, ...], tuple[int | None, ...]]]:
        """``(dataset key, features, sizes)`` of each non-image vector the frames carry."""
        out = [(STATE_KEY, self.states, self.state_sizes)] if self.states else []
        if self.env_states:
            out.append((ENV_STATE_KEY, self.env_states, self.env_sizes))
        return out

    def features(self) -> dict[str, dict[str, object]]:
        """The lerobot ``features`` dict (needs a resolved schema)."""
        out: dict[str, dict[str, object]] = {}
        for cam in self.cameras:
            out[cam.key] = {
                "dtype": "video" if self.video else "image",
                "shape": tuple(cam.shape or ()),
                "names": ["height", "width", "channels"],
            }
        for key, features, sizes in self.vectors():
            out[key] = {
                "dtype": self.state_dtype,
                "shape": (sum(s or 0 for s in sizes),),
                "names": _vector_names(features, sizes),
            }
        names = self.action.names
        out["action"] = {
            "dtype": "float32",
            "shape": (self.action_size or 0,),
            "names": list(names) if names and len(names) == self.action_size else None,
        }
        out.update(NEXT_FEATURES)
        return out

    def keys(self) -> list[str]:
        vectors = [key for key, _, _ in self.vectors()]
        return [c.key for c in self.cameras] + vectors + ["action", *NEXT_FEATURES]

    def resolve(self, data: Mapping[str, object], action: object) -> _Schema:
        """Fill the shapes the contract left out from the first observation and action."""
        cameras = []
        for cam in self.cameras:
            shape = _stored_shape(cam, _field(data, cam.feature))
            if cam.shape is not None and cam.shape != shape:
                raise DatasetError(
                    f"camera {cam.feature!r}: the contract declares shape {list(cam.shape)} "
                    f"but the env sends {list(_field(data, cam.feature).shape)}; fix the contract"
                )
            cam = replace(cam, shape=shape)
            if self.video:
                _check_video_size(cam)
            cameras.append(cam)
        seen = int(np.asarray(action).size)
        if self.action_size is not None and seen != self.action_size:
            raise DatasetError(
                f"action {self.action.name!r}: the contract declares {self.action_size} values "
                f"but the agent sent {seen}"
            )
        return replace(
            self,
            cameras=tuple(cameras),
            state_sizes=_seen_sizes(self.states, self.state_sizes, data),
            env_sizes=_seen_sizes(self.env_states, self.env_sizes, data),
            action_size=seen,
        )

    def frame(self, data: Mapping[str, object], action: object) -> dict[str, np.ndarray]:
        """One lerobot frame (without ``task``) from an observation and the executed action."""
        out: dict[str, np.ndarray] = {}
        for cam in self.cameras:
            img = _rgb(cam, _field(data, cam.feature))
            if img.shape != cam.shape:
                raise DatasetError(
                    f"camera {cam.feature!r} changed shape mid-recording: "
                    f"{list(img.shape)} after {list(cam.shape or ())}"
                )
            out[cam.key] = img
        for key, features, sizes in self.vectors():
            parts = [
                np.asarray(_field(data, f.name), dtype=self.state_dtype).reshape(-1)
                for f in features
            ]
            state = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
            if state.size != sum(s or 0 for s in sizes):
                raise DatasetError(
                    f"state {[f.name for f in features]} changed size mid-recording: "
                    f"{state.size} values after {sum(s or 0 for s in sizes)}"
                )
            out[key] = state
        act = np.array(action, dtype=np.float32).reshape(-1)
        if act.size != self.action_size:
            raise DatasetError(
                f"action changed size mid-recording: {act.size} values after {self.action_size}"
            )
        out["action"] = act
        out.update(empty_outcome())  # the env's answer: the recorder's outcome()
        return out


def _vector_names(features: Sequence[Feature], sizes: Sequence[int | None]) -> list[str] | None:
    """One vector's dimension names: a lone feature's own, several concatenated
    (``<feature>_<i>`` for a feature without names)."""
    if len(features) == 1:
        names = features[0].names
        return list(names) if names and len(names) == sizes[0] else None
    out: list[str] = []
    for feature, size in zip(features, sizes, strict=True):
        if feature.names and len(feature.names) == size:
            out.extend(feature.names)
        else:
            out.extend(f"{feature.name}_{i}" for i in range(size or 0))
    return out


def _seen_sizes(
    features: Sequence[Feature], declared: Sequence[int | None], data: Mapping[str, object]
) -> tuple[int, ...]:
    """Each state feature's size in the first observation (must match the contract's)."""
    sizes = []
    for feature, size in zip(features, declared, strict=True):
        seen = int(np.asarray(_field(data, feature.name)).size)
        if size is not None and size != seen:
            raise DatasetError(
                f"state {feature.name!r}: the contract declares {size} values but the env "
                f"sends {seen}; fix the contract"
            )
        sizes.append(seen)
    return tuple(sizes)


def _field(data: Mapping[str, object], name: str) -> Any:
    try:
        return data[name]
    except KeyError:
        raise DatasetError(
            f"the contract declares observation {name!r} but the env's observation has only "
            f"{sorted(data)}"
        ) from None


def _stored_shape(cam: _Camera, value: Any) -> tuple[int, int, int]:
    shape = np.shape(value)
    if len(shape) == 2 or (len(shape) == 3 and shape[-1] in (1, 3)):
        return (int(shape[0]), int(shape[1]), 3)
    raise DatasetError(
        f"camera {cam.feature!r} sends shape {list(shape)}; recording needs HxW, HxWx1 or HxWx3"
    )


def _rgb(cam: _Camera, value: object) -> np.ndarray:
    img = np.asarray(value)
    if img.dtype != np.uint8:
        if np.issubdtype(img.dtype, np.floating):
            img = (np.clip(img, 0.0, 1.0) * 255.0).round().astype(np.uint8)
        else:
            raise DatasetError(f"camera {cam.feature!r} sends {img.dtype} pixels; expected uint8")
    if img.ndim == 2:
        img = img[..., None]
    if img.shape[-1] == 1:
        return np.repeat(img, 3, axis=-1)
    if cam.type == "bgr":
        return np.ascontiguousarray(img[..., ::-1])
    return img.copy()


def _declared_camera_shape(feature: Feature) -> tuple[int, int, int] | None:
    shape = feature.shape
    if shape is None:
        return None
    if len(shape) == 2 or (len(shape) == 3 and shape[-1] in (1, 3)):
        return (int(shape[0]), int(shape[1]), 3)
    raise DatasetError(
        f"camera {feature.name!r} declares shape {list(shape)}; recording needs [H, W], "
        "[H, W, 1] or [H, W, 3]"
    )


def _check_video_size(cam: _Camera) -> None:
    if cam.shape is None:
        return
    height, width = cam.shape[:2]
    if width < MIN_VIDEO_WIDTH or height < MIN_VIDEO_HEIGHT:
        raise DatasetError(
            f"camera {cam.feature!r} is {width}x{height} (WxH): too small for lerobot's video "
            f"encoder (libsvtav1 needs at least {MIN_VIDEO_WIDTH}x{MIN_VIDEO_HEIGHT}; smaller "
            "frames crash the process); record it as images with DatasetWriter(video=False)"
        )


def _fps(rate: float | None) -> int:
    if rate is None:
        raise DatasetError(
            "recording needs an fps: the contract has no control_rate; pass DatasetWriter(fps=...)"
        )
    if not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
        raise DatasetError(f"fps must be a positive number, got {rate!r}")
    if abs(rate - round(rate)) > 1e-6:
        raise DatasetError(
            f"LeRobot datasets need an integer fps; the control rate is {rate}: "
            "pass DatasetWriter(fps=...)"
        )
    return round(rate)


def _build_schema(
    spaces: Spaces,
    *,
    fps: float | None,
    robot_type: str | None,
    video: bool,
    camera_keys: Mapping[str, str],
    warn: Any = None,
) -> _Schema:
    cameras: list[_Camera] = []
    owners: dict[str, str] = {}
    for feature in spaces.cameras:
        if feature.type == "depth":
            if warn is not None:
                warn(feature.name)
            continue
        key = "observation.images." + (camera_keys.get(feature.name) or camera_key(feature.name))
        if key in owners:
            raise DatasetError(
                f"camera features {owners[key]!r} and {feature.name!r} both map to dataset key "
                f"{key!r} (the key is the last '/'- or '.'-separated part of the name); rename "
                f"one in the contract or pass DatasetWriter(camera_keys={{{feature.name!r}: ...}})"
            )
        owners[key] = feature.name
        cam = _Camera(feature.name, key, feature.type or "rgb", _declared_camera_shape(feature))
        if video:
            _check_video_size(cam)
        cameras.append(cam)
    states = tuple(spaces.robot_states)
    env_states = tuple(spaces.env_states)
    dtype = "float64" if any(f.dtype == "float64" for f in spaces.states) else "float32"
    action = spaces.action_feature
    return _Schema(
        cameras=tuple(cameras),
        states=states,
        state_sizes=tuple(f.size for f in states),
        state_dtype=dtype,
        action=action,
        action_size=action.size,
        fps=_fps(fps),
        robot_type=robot_type,
        video=video,
        env_states=env_states,
        env_sizes=tuple(f.size for f in env_states),
    )


def _comparable(features: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple]:
    """A feature dict reduced to what must match to append (key: dtype, shape, names)."""
    from_lerobot = {"timestamp", "frame_index", "episode_index", "index", "task_index"}
    out = {}
    for key, ft in features.items():
        if key in from_lerobot:
            continue
        names = ft.get("names")
        out[key] = (
            ft.get("dtype"),
            tuple(ft.get("shape") or ()),
            tuple(names) if isinstance(names, list | tuple) else names,
        )
    return out


def _describe(diff: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in diff.items())
