"""A recorded LeRobot v3 dataset read back episode by episode from its files (not lerobot's
classes), so every v3.0 writer reads alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.errors import DatasetError
from pytest_hud.robot.contract import Contract
from pytest_hud.robot.record.schema import _build_schema, _Schema
from pytest_hud.robot.record.source import CONTRACT_COLUMN, ROW_COLUMN

__all__ = ["EpisodeInfo", "Frames", "RecordedDataset", "env_observations", "episode_schema"]


@dataclass(frozen=True)
class EpisodeInfo:
    """One episode's metadata row: where its frames are and what it came from."""

    index: int
    length: int
    task: str  # the prompt its frames carry
    row: dict[str, object] | None  # the task row as sent (None: recorded without one)
    contract: dict[str, object] | None  # the env's contract (None: recorded without one)
    success: bool | None  # its grade (None: recorded without one)
    data_file: Path
    #: camera key -> (video file, the episode's first timestamp in it)
    videos: dict[str, tuple[Path, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Frames:
    """One episode's frames: every non-image feature as ``[T, D]``, every camera as
    ``[T, H, W, 3]`` uint8, and ``done`` (the env's terminated flag after each action)."""

    vectors: dict[str, np.ndarray]
    images: dict[str, np.ndarray]
    done: np.ndarray

    @property
    def actions(self) -> np.ndarray:
        return self.vectors["action"]

    def __len__(self) -> int:
        return len(self.done)


class RecordedDataset:
    """A LeRobot v3.0 dataset on disk: its info, stats and episodes (:meth:`open`)."""

    def __init__(
        self,
        root: Path,
        info: dict[str, Any],
        stats: dict[str, Any],
        episodes: list[EpisodeInfo],
    ) -> None:
        self.root = root
        self.info = info
        self.stats = stats
        self.episodes = episodes
        self._table: tuple[Path, Any] | None = (
            None  # the data file read last (episodes share files)
        )

    @property
    def fps(self) -> int:
        return int(self.info["fps"])

    @property
    def features(self) -> dict[str, Any]:
        return dict(self.info["features"])

    @classmethod
    def open(cls, root: str | Path) -> RecordedDataset:
        """The dataset at ``root``; a DatasetError names what is missing."""
        root = Path(root).expanduser().absolute()
        info_path = root / "meta" / "info.json"
        if not info_path.is_file():
            raise DatasetError(
                f"{root} is not a LeRobot dataset (no meta/info.json); expected a folder "
                "written by --hud-record or LeRobotDataset"
            )
        info = json.loads(info_path.read_text())
        if info.get("codebase_version") != "v3.0":
            raise DatasetError(
                f"{root} is a LeRobot {info.get('codebase_version')} dataset; replay reads "
                "v3.0 (convert it with lerobot's v30 conversion script)"
            )
        stats_path = root / "meta" / "stats.json"
        stats = json.loads(stats_path.read_text()) if stats_path.is_file() else {}
        return cls(root, info, stats, _episodes(root, info))

    def episode(self, index: int) -> EpisodeInfo:
        for ep in self.episodes:
            if ep.index == index:
                return ep
        raise DatasetError(f"{self.root} has no episode {index}")

    def frames(self, episode: EpisodeInfo) -> Frames:
        """Episode ``episode``'s frames, in order."""
        import pandas as pd

        if self._table is None or self._table[0] != episode.data_file:
            self._table = (episode.data_file, pd.read_parquet(episode.data_file))
        table = self._table[1]
        table = table[table["episode_index"] == episode.index].sort_values("frame_index")
        if len(table) != episode.length:
            raise DatasetError(
                f"{episode.data_file} holds {len(table)} frames of episode {episode.index}; "
                f"its metadata says {episode.length}"
            )
        vectors: dict[str, np.ndarray] = {}
        images: dict[str, np.ndarray] = {}
        for key, spec in self.features.items():
            if key not in table.columns and spec.get("dtype") != "video":
                continue
            if spec.get("dtype") == "video":
                path, start = episode.videos[key]
                images[key] = _decode(path, start, episode.length, self.fps)
            elif spec.get("dtype") == "image":
                images[key] = np.stack([_png(cell) for cell in table[key]])
            elif key.startswith(("observation.", "action")):
                vectors[key] = np.stack([np.asarray(v).reshape(-1) for v in table[key]])
        flags: np.ndarray = np.zeros(len(table), bool)
        if "next.done" in table.columns:
            flags = np.array([bool(np.asarray(v).reshape(-1)[0]) for v in table["next.done"]])
        return Frames(vectors, images, flags)

    def std(self, key: str) -> np.ndarray | None:
        """The dataset-wide standard deviation of feature ``key`` per dimension, if known."""
        std = (self.stats.get(key) or {}).get("std")
        return None if std is None else np.asarray(std, np.float64).reshape(-1)


def _episodes(root: Path, info: Mapping[str, Any]) -> list[EpisodeInfo]:
    import pandas as pd

    files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    if not files:
        raise DatasetError(f"{root} has no episodes (meta/episodes is empty)")
    table = pd.concat([pd.read_parquet(f) for f in files]).sort_values("episode_index")
    cameras = [k for k, f in info["features"].items() if f.get("dtype") == "video"]
    out = []
    for rec in table.to_dict("records"):
        index = int(rec["episode_index"])
        data = root / str(info["data_path"]).format(
            chunk_index=int(rec["data/chunk_index"]), file_index=int(rec["data/file_index"])
        )
        videos = {}
        for key in cameras:
            path = root / str(info["video_path"]).format(
                video_key=key,
                chunk_index=int(rec[f"videos/{key}/chunk_index"]),
                file_index=int(rec[f"videos/{key}/file_index"]),
            )
            videos[key] = (path, float(rec[f"videos/{key}/from_timestamp"]))
        tasks = list(rec.get("tasks") if rec.get("tasks") is not None else [])
        success = rec.get("grade/success")
        out.append(
            EpisodeInfo(
                index=index,
                length=int(rec["length"]),
                task=str(tasks[0]) if tasks else "",
                row=_json(rec.get(ROW_COLUMN)),
                contract=_json(rec.get(CONTRACT_COLUMN)),
                success=None if success is None else bool(success),
                data_file=data,
                videos=videos,
            )
        )
    return out


def _json(text: object) -> dict[str, object] | None:
    if not isinstance(text, str) or not text:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else None


def _png(cell: object) -> np.ndarray:
    """An image feature's cell (``{"bytes", "path"}``) as HxWx3 uint8."""
    import io

    from PIL import Image

    data = cell.get("bytes") if isinstance(cell, Mapping) else None
    if not data:
        raise DatasetError(f"an image cell without bytes ({cell!r:.80}); cannot replay it")
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _decode(path: Path, start: float, length: int, fps: int) -> np.ndarray:
    """``length`` frames of the video at ``path`` from timestamp ``start`` (PyAV)."""
    try:
        import av
    except ImportError as exc:
        raise DatasetError(f"decoding {path} needs PyAV (pip install av): {exc}") from None
    first = round(start * fps)
    frames: list[np.ndarray] = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        if first and stream.time_base:  # a file of several episodes: from the keyframe before
            container.seek(int(start / stream.time_base), stream=stream, backward=True)
        for frame in container.decode(stream):
            if frame.time is None:
                raise DatasetError(f"{path} has a frame without a timestamp; cannot replay it")
            at = round(frame.time * fps)
            if at < first:
                continue
            frames.append(frame.to_ndarray(format="rgb24"))
            if len(frames) == length:
                break
    if len(frames) != length:
        raise DatasetError(f"{path} has {len(frames)} frames from {start} s; expected {length}")
    return np.stack(frames)


def episode_schema(contract: Mapping[str, object], fps: int, video: bool) -> _Schema:
    """How the recorder laid the env's observations out for this contract."""
    c = Contract.from_dict(contract)
    return _build_schema(c.spaces(), fps=fps, robot_type=c.robot_type, video=video, camera_keys={})


def env_observations(
    schema: _Schema, frames: Frames, features: Mapping[str, Any]
) -> list[dict[str, np.ndarray]]:
    """Each frame as the observation the env sent (its names, shapes and wire dtypes):
    the state vectors split back into the contract's features, the cameras in their
    own type (bgr flipped back, gray one channel). ``features``: the dataset's."""
    parts: dict[str, list[tuple[str, int, tuple[int, ...] | None]]] = {}
    for key, feats, sizes in schema.vectors():
        width = int(np.prod(features[key]["shape"]))
        known = [s for s in sizes if s is not None]
        if len(known) < len(sizes) - 1:
            raise DatasetError(
                f"{key} concatenates {[f.name for f in feats]} whose sizes the contract does "
                "not declare; it cannot be split back into the env's observations"
            )
        fill = width - sum(known)
        parts[key] = [
            (f.name, fill if s is None else s, f.shape) for f, s in zip(feats, sizes, strict=True)
        ]
    out = []
    for t in range(len(frames)):
        data: dict[str, np.ndarray] = {}
        for cam in schema.cameras:
            img = frames.images[cam.key][t]
            if cam.type == "bgr":
                img = img[..., ::-1]
            elif cam.type == "gray":
                img = img[..., :1]
            data[cam.feature] = np.ascontiguousarray(img)
        for key, layout in parts.items():
            vec = frames.vectors[key][t].astype(np.float32)
            offset = 0
            for name, size, shape in layout:
                value = vec[offset : offset + size]
                offset += size
                data[name] = (
                    value.reshape(shape) if shape and int(np.prod(shape)) == size else value
                )
        out.append(data)
    return out
