"""Record rollouts into one LeRobot v3 dataset; merge per-worker datasets into one.

``DatasetWriter`` turns every executed tick of every rollout (the observation the
agent acted on, the action it sent) into a frame of ONE LeRobot v3 dataset, written
by lerobot itself (``LeRobotDataset.create`` / ``add_frame`` / ``save_episode`` /
``finalize``). Append ``writer.observer`` to ``RobotAgent.observers``; lerobot is
imported on first use.

Destination (constructor arguments win over the environment):

* ``RECORD_DIR``: the dataset root (default ``./data``, resolved against the working
  directory when the writer is made). A folder holding ``meta/info.json`` is an
  existing dataset: new episodes are APPENDED to it (lerobot's resume path) when its
  fps, robot type and features match, else it is refused. Any other non-empty folder
  is refused; pick another with ``--hud-record=OTHER_DIR`` / ``RECORD_DIR``.
* ``HF_REPO``: push the finalized dataset there (``user/name``; a bare namespace
  gets the root folder's name); needs a token (``HF_TOKEN``). ``HF_PRIVATE=1``:
  push it private.

The schema comes from the contract, created at the first episode:

* every image feature (type rgb/bgr/gray) -> ``observation.images.<camera>``, a video
  (``video=False``: PNG images in the parquet). ``<camera>`` is the LAST component of
  the feature name split at ``/`` and ``.``, with anything outside ``[A-Za-z0-9_-]``
  replaced by ``_``: ``pixels`` -> ``observation.images.pixels``, ``pixels/top`` ->
  ``observation.images.top``, ``observation/image`` -> ``observation.images.image``.
  Two cameras with one key are an error naming both (``camera_keys={feature: key}``
  overrides the rule). Frames are stored RGB HxWx3: bgr is flipped, gray repeated.
  Depth cameras are not recorded (lerobot videos are 8-bit RGB); a warning says so.
* the non-image observations -> ``observation.state``: the lone state as is; several
  are flattened and CONCATENATED in contract order, their ``names`` concatenated
  (a feature without names contributes ``<feature>_<i>``). float32 (float64 if a state
  declares it).
* the action -> ``action``, float32: exactly what ``RobotClient`` sent on the wire.
* the run's prompt -> each frame's ``task``; ``control_rate`` -> fps (``fps=``
  overrides; lerobot needs an integer); ``robot_type`` -> robot type; ``names`` label
  the dimensions; shapes the contract leaves out come from the first observation.

Episodes are committed whole: each rollout buffers its own frames in memory, so
concurrent rollouts (BatchedAgent) never interleave. ``end(ok=True)`` assigns the
next episode index and queues the episode on ONE writer thread (add_frame for each
frame, save_episode, finalize), so the event loop never waits on PNG/AV1 encoding;
called outside an event loop it waits for the commit. It returns
``{"dataset": {"root", "episode_index", "frames"}}`` (the index is final; the episode
is on disk once ``flush()`` / ``finalize()`` returns). An errored episode is discarded
(``episode_index: None``). A failed commit stops the writer: the next ``end()``,
``flush()`` or ``finalize()`` raises it. ``finalize()`` (idempotent; also run at exit)
waits for queued commits and pushes.

Crash safety: lerobot 0.4.4 writes parquet files whose footer only lands on
``finalize()``; an unfinalized dataset does not read back. The writer therefore
finalizes after EVERY episode, with lerobot's file-size limits set tiny
(``update_chunk_settings``) so the next episode starts new data / episode-metadata /
video files instead of overwriting the closed ones: every committed episode is
readable even if the process is killed. ``finalize()`` restores lerobot's default
limits in ``meta/info.json``; ``merge_datasets`` repacks files to the usual sizes.

Cameras: lerobot 0.4.4 encodes with libsvtav1 (SVT-AV1 3.0 in PyAV's wheel), which
rejects frames under 4 pixels high and KILLS THE PROCESS (SIGFPE) for frames under 25
pixels wide (measured: 8x8, 16x16, 24x64 crash; 32x32, 64x25, 4x25 work), so
``check()`` and the first observation refuse smaller cameras up front.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import warnings
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.robot.contract import Contract, Feature, Spaces

__all__ = [
    "MIN_VIDEO_HEIGHT",
    "MIN_VIDEO_WIDTH",
    "DatasetError",
    "DatasetWriter",
    "camera_key",
    "merge_datasets",
]

#: Smallest frame lerobot 0.4.4's default encoder (libsvtav1) takes without failing.
MIN_VIDEO_WIDTH = 25
MIN_VIDEO_HEIGHT = 4
#: File-size limit (MB) that makes lerobot start new files for every episode.
_PER_EPISODE_FILES_MB = 1e-6
_TRUE = {"1", "true", "yes", "on"}
_ERRORED = "the episode errored"


class DatasetError(ValueError):
    """Recording cannot start or continue; the message names the feature or folder."""


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

    @property
    def resolved(self) -> bool:
        return (
            all(c.shape is not None for c in self.cameras)
            and None not in self.state_sizes
            and self.action_size is not None
        )

    def state_names(self) -> list[str] | None:
        if len(self.states) == 1:
            names = self.states[0].names
            return list(names) if names and len(names) == self.state_sizes[0] else None
        out: list[str] = []
        for feature, size in zip(self.states, self.state_sizes, strict=True):
            if feature.names and len(feature.names) == size:
                out.extend(feature.names)
            else:
                out.extend(f"{feature.name}_{i}" for i in range(size or 0))
        return out

    def features(self) -> dict[str, dict[str, Any]]:
        """The lerobot ``features`` dict (needs a resolved schema)."""
        out: dict[str, dict[str, Any]] = {}
        for cam in self.cameras:
            out[cam.key] = {
                "dtype": "video" if self.video else "image",
                "shape": tuple(cam.shape or ()),
                "names": ["height", "width", "channels"],
            }
        if self.states:
            out["observation.state"] = {
                "dtype": self.state_dtype,
                "shape": (sum(s or 0 for s in self.state_sizes),),
                "names": self.state_names(),
            }
        names = self.action.names
        out["action"] = {
            "dtype": "float32",
            "shape": (self.action_size or 0,),
            "names": list(names) if names and len(names) == self.action_size else None,
        }
        return out

    def keys(self) -> list[str]:
        return (
            [c.key for c in self.cameras]
            + (["observation.state"] if self.states else [])
            + ["action"]
        )

    def resolve(self, data: Mapping[str, Any], action: Any) -> _Schema:
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
        sizes = []
        for feature, size in zip(self.states, self.state_sizes, strict=True):
            seen = int(np.asarray(_field(data, feature.name)).size)
            if size is not None and size != seen:
                raise DatasetError(
                    f"state {feature.name!r}: the contract declares {size} values but the env "
                    f"sends {seen}; fix the contract"
                )
            sizes.append(seen)
        seen = int(np.asarray(action).size)
        if self.action_size is not None and seen != self.action_size:
            raise DatasetError(
                f"action {self.action.name!r}: the contract declares {self.action_size} values "
                f"but the agent sent {seen}"
            )
        return replace(self, cameras=tuple(cameras), state_sizes=tuple(sizes), action_size=seen)

    def frame(self, data: Mapping[str, Any], action: Any) -> dict[str, np.ndarray]:
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
        if self.states:
            parts = [
                np.asarray(_field(data, f.name), dtype=self.state_dtype).reshape(-1)
                for f in self.states
            ]
            state = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
            if state.size != sum(self.state_sizes):  # type: ignore[arg-type]
                raise DatasetError(
                    f"state {[f.name for f in self.states]} changed size mid-recording: "
                    f"{state.size} values after {sum(self.state_sizes)}"  # type: ignore[arg-type]
                )
            out["observation.state"] = state
        act = np.array(action, dtype=np.float32).reshape(-1)
        if act.size != self.action_size:
            raise DatasetError(
                f"action changed size mid-recording: {act.size} values after {self.action_size}"
            )
        out["action"] = act
        return out


def _field(data: Mapping[str, Any], name: str) -> Any:
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


def _rgb(cam: _Camera, value: Any) -> np.ndarray:
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
    states = tuple(spaces.states)
    dtype = "float64" if any(f.dtype == "float64" for f in states) else "float32"
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


def _describe(diff: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in diff.items())


# -- the destination ----------------------------------------------------------------
def _read_info(root: Path) -> dict[str, Any] | None:
    """``meta/info.json`` of an existing dataset at ``root`` (None: no dataset there)."""
    info = root / "meta" / "info.json"
    if not info.is_file():
        return None
    try:
        data = json.loads(info.read_text())
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{info} is not readable JSON ({exc}); record elsewhere") from exc
    if not isinstance(data, dict) or "features" not in data:
        raise DatasetError(f"{info} is not a LeRobot dataset's info.json; record elsewhere")
    return data


def _is_empty_dataset(root: Path, info: Mapping[str, Any]) -> bool:
    """Created but nothing committed (a crash before the first episode)."""
    if info.get("total_episodes"):
        return False
    return not any((root / "data").glob("*/*.parquet"))


def _probe_writable(root: Path, flag: str) -> bool:
    """Make sure ``root`` can hold a dataset; returns whether this call created it."""
    created = not root.exists()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as exc:
        raise DatasetError(
            f"the dataset folder {root} is not writable ({exc.strerror or exc}); "
            f"point {flag} at a writable folder"
        ) from None
    return created


# -- the writer ---------------------------------------------------------------------
def _running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _lerobot_dataset() -> Any:
    """``LeRobotDataset`` (imported on first use), with SVT-AV1's banner silenced."""
    os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its config per video otherwise
    try:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
    except ImportError as exc:
        raise DatasetError(
            f"recording datasets needs lerobot ({exc}); pip install 'lerobot[dataset]'"
        ) from exc
    return LeRobotDataset


def _quiet() -> Any:
    try:
        from lerobot.utils.utils import SuppressProgressBars
    except ImportError:  # pragma: no cover - other lerobot versions
        return contextlib.nullcontext()
    return SuppressProgressBars()


class DatasetWriter:
    """One LeRobot v3 dataset fed by every rollout of this process (see the module doc)."""

    #: Named in errors: how users point recording elsewhere.
    flag = "--hud-record=OTHER_DIR (or RECORD_DIR)"

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        repo_id: str | None = None,
        fps: float | None = None,
        video: bool = True,
        push: str | bool | None = None,
        camera_keys: Mapping[str, str] | None = None,
    ) -> None:
        base = root if root is not None else os.environ.get("RECORD_DIR") or "data"
        self.root = Path(base).expanduser().absolute()
        self.fps = fps
        self.video = video
        self.camera_keys = dict(camera_keys or {})
        if push is None or push is True:
            target = os.environ.get("HF_REPO") or None
            if push is True and not target:
                raise DatasetError("push=True needs a target: set HF_REPO (user/name)")
        else:
            target = push or None
        if target and "/" not in target:
            target = f"{target}/{_safe_name(self.root.name)}"
        self.push_repo: str | None = target
        self.private = os.environ.get("HF_PRIVATE", "").strip().lower() in _TRUE
        self.repo_id = target or repo_id or f"local/{_safe_name(self.root.name)}"

        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: list[concurrent.futures.Future[None]] = []
        self._prepared = False
        self._created_root = False
        self._restart = False
        self._existing: dict[str, Any] | None = None  # info.json of a dataset to append to
        self._fixed: _Schema | None = None  # the schema every episode must match
        self._next_index = 0
        self._ds: Any = None  # the LeRobotDataset (writer thread only)
        self._error: BaseException | None = None
        self._finalized = False
        self._result: Path | None = None
        self._default_fps: float | None = None
        self._default_robot_type: str | None = None
        self._warned: set[str] = set()
        self.episodes = 0  # committed so far (on disk)
        atexit.register(_finalize_at_exit, weakref.ref(self))

    def __repr__(self) -> str:
        return f"<DatasetWriter {self.root} episodes={self._next_index}>"

    # -- before the run ------------------------------------------------------------
    def check(self, contract: Contract | Mapping[str, Any]) -> None:
        """Everything that can be refused before a run starts: lerobot present, the
        schema (camera keys, sizes, fps), the folder, appending, the push token."""
        contract = Contract.from_dict(contract)
        self._default_fps = contract.control_rate
        self._default_robot_type = contract.robot_type
        schema = self._schema(contract.spaces(), contract.control_rate, contract.robot_type)
        with self._lock:
            self._prepare(schema)

    def _schema(self, spaces: Spaces, rate: float | None, robot_type: str | None) -> _Schema:
        return _build_schema(
            spaces,
            fps=self.fps if self.fps is not None else rate,
            robot_type=robot_type,
            video=self.video,
            camera_keys=self.camera_keys,
            warn=self._warn_depth,
        )

    def _warn_depth(self, name: str) -> None:
        if name not in self._warned:
            self._warned.add(name)
            warnings.warn(
                f"DatasetWriter: depth camera {name!r} is not recorded "
                "(LeRobot videos are 8-bit RGB)",
                stacklevel=4,
            )

    def _prepare(self, schema: _Schema) -> None:
        """Check the folder once, then this schema against the dataset's (under the lock)."""
        if self._error is not None:
            raise self._error
        if self._finalized:
            raise DatasetError(f"the dataset writer for {self.root} is already finalized")
        if not self._prepared:
            _lerobot_dataset()  # fail early without lerobot; import it before steps run
            if self.push_repo:
                _require_token(self.push_repo)
            if self.root.exists() and not self.root.is_dir():
                raise DatasetError(
                    f"the dataset folder {self.root} is a file; point {self.flag} at a folder"
                )
            info = _read_info(self.root) if self.root.is_dir() else None
            if info is not None and _is_empty_dataset(self.root, info):
                if {p.name for p in self.root.iterdir()} - {"meta", "images"}:
                    raise DatasetError(
                        f"{self.root} holds a LeRobot dataset without episodes next to other "
                        f"files; record elsewhere with {self.flag}"
                    )
                info = None  # created, nothing committed (a crashed run): start over in place
                self._restart = True
            elif info is None and self.root.is_dir() and any(self.root.iterdir()):
                raise DatasetError(
                    f"the dataset folder {self.root} exists, is not empty and is not a LeRobot "
                    f"dataset (no meta/info.json); record elsewhere with {self.flag}"
                )
            if info is not None:
                if info.get("codebase_version") != "v3.0":
                    raise DatasetError(
                        f"{self.root} holds a LeRobot {info.get('codebase_version')} dataset; "
                        f"only v3.0 can be appended to: record elsewhere with {self.flag}"
                    )
                if not os.access(self.root, os.W_OK | os.X_OK):
                    raise DatasetError(f"the dataset folder {self.root} is not writable")
                self._next_index = int(info.get("total_episodes") or 0)
            else:
                self._created_root = _probe_writable(self.root, self.flag)
            self._existing = info
            self._prepared = True
        self._match(schema)

    def _match(self, schema: _Schema) -> None:
        """Refuse a schema that cannot go into this dataset."""
        if self._existing is not None:
            info = self._existing
            diff: dict[str, Any] = {}
            if info.get("fps") != schema.fps:
                diff["fps"] = f"{info.get('fps')} (dataset) vs {schema.fps} (contract)"
            if info.get("robot_type") != schema.robot_type:
                diff["robot_type"] = f"{info.get('robot_type')!r} vs {schema.robot_type!r}"
            theirs = _comparable(info["features"])
            ours = _comparable(schema.features())
            if sorted(theirs) != sorted(ours):
                diff["features"] = f"{sorted(theirs)} vs {sorted(ours)}"
            elif schema.resolved:
                changed = [k for k in ours if ours[k] != theirs[k]]
                if changed:
                    diff["features"] = "; ".join(f"{k}: {theirs[k]} vs {ours[k]}" for k in changed)
            if diff:
                raise DatasetError(
                    f"cannot append to the existing dataset at {self.root}: {_describe(diff)}; "
                    f"record elsewhere with {self.flag}"
                )
        elif self._fixed is not None:
            fixed = self._fixed
            if (fixed.fps, fixed.robot_type, fixed.keys()) != (
                schema.fps,
                schema.robot_type,
                schema.keys(),
            ) or (schema.resolved and fixed.features() != schema.features()):
                raise DatasetError(
                    f"this rollout's contract does not match the dataset being recorded at "
                    f"{self.root} (fps {fixed.fps}, features {fixed.keys()}; this one: fps "
                    f"{schema.fps}, {schema.keys()}); record different envs into different "
                    "folders"
                )

    # -- the observer --------------------------------------------------------------
    def observer(self, run: Any, spaces: Spaces) -> _EpisodeRecorder:
        """An ``ObserverFactory``: ``agent.observers.append(writer.observer)``."""
        rate, robot_type = _run_contract(run)
        if rate is None:
            rate = self._default_fps
        if robot_type is None:
            robot_type = self._default_robot_type
        schema = self._schema(spaces, rate, robot_type)
        with self._lock:
            self._prepare(schema)
        return _EpisodeRecorder(self, schema, _task_text(run))

    def _resolved(self, schema: _Schema) -> None:
        with self._lock:
            self._match(schema)

    def _commit(self, schema: _Schema, frames: list[dict[str, np.ndarray]], task: str) -> dict:
        count = len(frames)  # the writer thread empties the list once written
        with self._lock:
            if self._error is not None:
                raise self._error
            if self._finalized:
                raise DatasetError(f"the dataset at {self.root} was finalized mid-episode")
            self._match(schema)
            if self._fixed is None:
                self._fixed = schema
            index = self._next_index
            self._next_index += 1
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix="hud-dataset"
                )
            future = self._executor.submit(self._write, schema, frames, task, index)
            self._pending = [f for f in self._pending if not f.done()] + [future]
        if not _running_loop():
            future.result()
        return {"dataset": {"root": str(self.root), "episode_index": index, "frames": count}}

    def _write(
        self, schema: _Schema, frames: list[dict[str, np.ndarray]], task: str, index: int
    ) -> None:
        """Writer thread: one whole episode, then finalize so it reads back after a crash."""
        ds = None
        if self._error is not None:  # an earlier commit failed: the indices no longer hold
            frames.clear()
            raise self._error
        try:
            ds = self._dataset(schema)
            with _quiet():
                for frame in frames:
                    ds.add_frame({**frame, "task": task})
                _scalarize(ds, frames[0])
                ds.save_episode()
                ds.finalize()
            if ds.meta.total_episodes != index + 1:
                raise DatasetError(
                    f"lerobot committed episode {ds.meta.total_episodes - 1}, expected {index}"
                )
            self.episodes += 1
        except BaseException as exc:
            error = exc if isinstance(exc, DatasetError) else None
            self._error = error or DatasetError(
                f"recording episode {index} into {self.root} failed: {type(exc).__name__}: {exc}"
            )
            if ds is not None:
                with contextlib.suppress(Exception):
                    ds.clear_episode_buffer()
            raise self._error from exc
        finally:
            frames.clear()

    def _dataset(self, schema: _Schema) -> Any:
        if self._ds is not None:
            return self._ds
        dataset = _lerobot_dataset()
        if self._existing is not None:
            try:
                ds = dataset(self.repo_id, root=self.root)
            except Exception as exc:
                raise DatasetError(
                    f"cannot reopen the existing dataset at {self.root} to append "
                    f"({type(exc).__name__}: {exc}); record elsewhere with {self.flag}"
                ) from exc
        else:
            if self._restart:
                for leftover in ("meta", "images"):  # an empty dataset from a crashed run
                    shutil.rmtree(self.root / leftover, ignore_errors=True)
            if self.root.is_dir() and not any(self.root.iterdir()):
                self.root.rmdir()  # lerobot creates the root itself
            ds = dataset.create(
                repo_id=self.repo_id,
                fps=schema.fps,
                features=schema.features(),
                root=self.root,
                robot_type=schema.robot_type,
                use_videos=self.video and bool(schema.cameras),
            )
        ds.meta.update_chunk_settings(
            data_files_size_in_mb=_PER_EPISODE_FILES_MB,
            video_files_size_in_mb=_PER_EPISODE_FILES_MB,
        )
        self._ds = ds
        return ds

    # -- the end -------------------------------------------------------------------
    def flush(self) -> None:
        """Wait for every queued episode to be on disk (re-raises a failed commit)."""
        with self._lock:
            pending = list(self._pending)
        concurrent.futures.wait(pending)
        if self._error is not None:
            raise self._error

    def finalize(self) -> Path | None:
        """Wait for queued commits, close the dataset, push it if asked. Idempotent.

        Returns the dataset root, or None when nothing was recorded."""
        with self._lock:
            if self._finalized:
                if self._error is not None:
                    raise self._error
                return self._result
            self._finalized = True
            pending = list(self._pending)
            executor, self._executor = self._executor, None
        concurrent.futures.wait(pending)
        if executor is not None:
            executor.shutdown(wait=True)
        if self._error is not None:
            raise self._error
        ds = self._ds
        if ds is None:
            if self._created_root:
                with contextlib.suppress(OSError):
                    self.root.rmdir()  # only if still empty
            return None
        from lerobot.datasets.utils import (
            DEFAULT_DATA_FILE_SIZE_IN_MB,
            DEFAULT_VIDEO_FILE_SIZE_IN_MB,
        )

        ds.meta.update_chunk_settings(
            data_files_size_in_mb=DEFAULT_DATA_FILE_SIZE_IN_MB,
            video_files_size_in_mb=DEFAULT_VIDEO_FILE_SIZE_IN_MB,
        )
        ds.finalize()
        self._result = self.root
        if self.push_repo:
            try:
                ds.push_to_hub(private=self.private)
            except Exception as exc:
                self._error = DatasetError(
                    f"pushing {self.root} to the Hugging Face Hub as {self.push_repo} failed "
                    f"({type(exc).__name__}: {exc}); the local dataset is complete"
                )
                raise self._error from exc
        return self._result

    async def afinalize(self) -> Path | None:
        """``finalize`` off the event loop."""
        return await asyncio.to_thread(self.finalize)


def _scalarize(ds: Any, frame: Mapping[str, np.ndarray]) -> None:
    """Hand lerobot one-element features as 0-d arrays.

    lerobot 0.4.4 stores a ``(1,)`` feature as a scalar column and encodes each value
    with ``float(value)``, which NumPy >= 2.4 refuses for a ``(1,)`` array; add_frame
    validates ``(1,)``, so the buffered values are reshaped between the two."""
    for key, value in frame.items():
        if value.dtype != np.uint8 and value.shape == (1,):
            ds.episode_buffer[key] = [np.asarray(v).reshape(()) for v in ds.episode_buffer[key]]


def _finalize_at_exit(ref: weakref.ReferenceType[DatasetWriter]) -> None:
    writer = ref()
    if writer is None or writer._finalized:
        return
    try:
        writer.finalize()
    except Exception as exc:  # at exit there is no one left to raise to
        print(f"pytest-hud: finalizing the dataset at {writer.root} failed: {exc}", file=sys.stderr)


class _EpisodeRecorder:
    """One episode's frames, buffered until the episode ends."""

    def __init__(self, writer: DatasetWriter, schema: _Schema, task: str) -> None:
        self.writer = writer
        self.schema = schema
        self.task = task
        self.frames: list[dict[str, np.ndarray]] = []
        self._checked = False

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        if not self._checked:
            self.schema = self.schema.resolve(data, action)
            self.writer._resolved(self.schema)
            self._checked = True
        self.frames.append(self.schema.frame(data, action))

    def end(self, ok: bool) -> dict[str, Any]:
        root = str(self.writer.root)
        if not ok:
            self.frames = []
            return {"dataset": {"root": root, "episode_index": None, "discarded": _ERRORED}}
        if not self.frames:
            return {"dataset": {"root": root, "episode_index": None, "discarded": "no frames"}}
        frames, self.frames = self.frames, []
        return self.writer._commit(self.schema, frames, self.task)


def _run_contract(run: Any) -> tuple[float | None, str | None]:
    """control_rate and robot_type of the contract the run's robot capability carries."""
    try:
        cap = run.robot if run is not None else None
    except Exception:
        cap = None
    if not isinstance(cap, Mapping):
        return None, None
    raw = (cap.get("params") or {}).get("contract") or cap.get("contract")
    if not raw:
        return None, None
    contract = Contract.from_dict(raw)
    return contract.control_rate, contract.robot_type


def _task_text(run: Any) -> str:
    prompt = getattr(run, "prompt", "") or ""
    if prompt:
        return str(prompt)
    task = getattr(run, "task", None)
    return str(getattr(task, "key", "") or "") if task is not None else ""


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "dataset"


def _require_token(repo: str) -> None:
    try:
        from huggingface_hub import get_token
    except ImportError as exc:  # pragma: no cover - lerobot depends on it
        raise DatasetError(f"pushing to {repo} needs huggingface_hub ({exc})") from exc
    if not get_token():
        raise DatasetError(
            f"HF_REPO={repo} asks to push the dataset but there is no Hugging Face token: "
            "set HF_TOKEN (or unset HF_REPO)"
        )


# -- merging ------------------------------------------------------------------------
def merge_datasets(
    parts: Sequence[str | Path],
    out: str | Path,
    order: Sequence[int] | None = None,
    *,
    repo_id: str | None = None,
) -> Path:
    """Merge datasets (e.g. one per xdist worker) into one at ``out`` with lerobot's
    ``aggregate_datasets``.

    Order: aggregation copies the parts one after another, in list order, and each
    part's episodes keep their own order; episode indices are renumbered 0..N-1.
    ``order`` (indices into ``parts``) permutes the parts first. Episodes of different
    parts cannot be interleaved. Parts that do not exist or hold no episode (a worker
    that recorded nothing) are skipped; a folder that is not a dataset, or parts whose
    fps / robot type / features differ, are errors. Data and video files are repacked
    to lerobot's usual sizes.
    """
    paths = [Path(p).expanduser().absolute() for p in parts]
    if order is not None:
        order = list(order)
        if sorted(order) != list(range(len(paths))):
            raise DatasetError(
                f"order must be a permutation of the part indices 0..{len(paths) - 1}, got {order}"
            )
        paths = [paths[i] for i in order]
    out = Path(out).expanduser().absolute()
    keep: list[Path] = []
    infos: list[dict[str, Any]] = []
    for path in paths:
        if not path.exists():
            continue
        info = _read_info(path) if path.is_dir() else None
        if info is None:
            raise DatasetError(f"cannot merge {path}: it is not a LeRobot dataset")
        if not info.get("total_episodes"):
            continue
        keep.append(path)
        infos.append(info)
    if not keep:
        raise DatasetError(f"nothing to merge: no episodes in {[str(p) for p in paths]}")
    first = infos[0]
    for path, info in zip(keep[1:], infos[1:], strict=True):
        for what in ("fps", "robot_type"):
            if info.get(what) != first.get(what):
                raise DatasetError(
                    f"cannot merge {keep[0]} and {path}: {what} {first.get(what)!r} vs "
                    f"{info.get(what)!r}"
                )
        if info["features"] != first["features"]:
            ours, theirs = _comparable(first["features"]), _comparable(info["features"])
            changed = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
            raise DatasetError(
                f"cannot merge {keep[0]} and {path}: their features differ "
                f"({changed or 'video encoding'})"
            )
    if out.exists():
        if not out.is_dir() or any(out.iterdir()):
            raise DatasetError(f"the merge destination {out} exists and is not empty")
        out.rmdir()
    _lerobot_dataset()
    from lerobot.datasets.aggregate import aggregate_datasets

    with _quiet():
        aggregate_datasets(
            [f"local/part{i}" for i in range(len(keep))],
            repo_id or f"local/{_safe_name(out.name)}",
            roots=keep,
            aggr_root=out,
        )
    return out
