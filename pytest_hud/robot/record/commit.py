"""Every call of lerobot's writing API. Each episode is finalized once saved, with tiny file-size
limits so the next starts new files: every committed episode reads back even after a kill.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.errors import DatasetError
from pytest_hud.robot import lerobot_version as compat
from pytest_hud.robot.record.grade import save_with_metadata
from pytest_hud.robot.record.schema import _PER_EPISODE_FILES_MB, _Schema
from pytest_hud.robot.record.store import _lerobot_dataset, _quiet

__all__: list[str] = []


def open_dataset(
    root: Path,
    repo_id: str,
    schema: _Schema,
    *,
    append: bool,
    restart: bool,
    video: bool,
    columns: Mapping[str, object],
    flag: str,
) -> object:
    """The ``LeRobotDataset`` episodes go into: the one at ``root`` reopened (``append``)
    or a new one, with per-episode file limits and each episode's row taking ``columns``
    (read at every save: the caller updates it in place per episode)."""
    dataset = _lerobot_dataset()
    if append:
        try:
            ds = compat.open_for_append(dataset, repo_id, root)
        except Exception as exc:
            raise DatasetError(
                f"cannot reopen the existing dataset at {root} to append "
                f"({type(exc).__name__}: {exc}); record elsewhere with {flag}"
            ) from exc
    else:
        if restart:
            for leftover in ("meta", "images"):  # an empty dataset from a crashed run
                shutil.rmtree(root / leftover, ignore_errors=True)
        if root.is_dir() and not any(root.iterdir()):
            root.rmdir()  # lerobot creates the root itself
        ds = dataset.create(
            repo_id=repo_id,
            fps=schema.fps,
            features=schema.features(),
            root=root,
            robot_type=schema.robot_type,
            use_videos=video and bool(schema.cameras),
        )
    ds.meta.update_chunk_settings(
        data_files_size_in_mb=_PER_EPISODE_FILES_MB,
        video_files_size_in_mb=_PER_EPISODE_FILES_MB,
    )
    save_with_metadata(ds.meta, columns)
    return ds


def write_episode(
    ds: Any, frames: list[dict[str, np.ndarray]], task: str | list[str], index: int
) -> bool:
    """One whole episode as episode ``index``, then finalize so it reads back after a crash.
    ``task`` is the episode's, or each frame's (an operator's instruction mid-episode).

    Returns whether ``ds`` can take another episode (lerobot 0.6+ finalizes a dataset
    object once: the next episode goes into the dataset reopened for appending)."""
    with _quiet():
        for i, frame in enumerate(frames):
            ds.add_frame({**frame, "task": task if isinstance(task, str) else task[i]})
        compat.prepare_save(ds, frames[0])
        ds.save_episode()
        ds.finalize()
    if ds.meta.total_episodes != index + 1:
        raise DatasetError(
            f"lerobot committed episode {ds.meta.total_episodes - 1}, expected {index}"
        )
    return not compat.finalize_is_final()


def close_dataset(ds: Any) -> None:
    """The last finalize, with lerobot's default file-size limits back in ``meta/info.json``."""
    from lerobot.datasets.utils import (
        DEFAULT_DATA_FILE_SIZE_IN_MB,
        DEFAULT_VIDEO_FILE_SIZE_IN_MB,
    )

    ds.meta.update_chunk_settings(
        data_files_size_in_mb=DEFAULT_DATA_FILE_SIZE_IN_MB,
        video_files_size_in_mb=DEFAULT_VIDEO_FILE_SIZE_IN_MB,
    )
    ds.finalize()


def push_dataset(ds: Any, root: Path, repo: str, *, private: bool) -> None:
    """Push the closed dataset to the Hugging Face Hub as ``repo``."""
    try:
        ds.push_to_hub(private=private)
    except Exception as exc:
        raise DatasetError(
            f"pushing {root} to the Hugging Face Hub as {repo} failed "
            f"({type(exc).__name__}: {exc}); the local dataset is complete"
        ) from exc
