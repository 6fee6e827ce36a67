"""The one LeRobot version seam: every behaviour of pytest-hud that differs between the
LeRobot releases it supports (0.4.4 on Python 3.11, 0.5 / 0.6 on Python >= 3.12) is
decided here, keyed on the installed ``lerobot`` distribution's version (never on whether
some private attribute exists), through LeRobot's public API only.

What differs, as read in each release's sources (0.4.4, 0.5.0, 0.6.1):

- appending to a dataset on disk: up to 0.5 ``LeRobotDataset(repo_id, root=...)`` reopens it
  for writing; from 0.6 that is read-only and ``LeRobotDataset.resume`` opens it to write;
- ``LeRobotDataset.finalize()``: up to 0.5 it can finalize again after more episodes; from
  0.6 it is once per dataset object (later calls return at once), so a dataset finalized
  after each episode is resumed for the next one;
- one-element features: up to 0.5 ``save_episode`` keeps the ``(1,)`` values ``add_frame``
  validated and encodes each with ``float(value)``, which NumPy >= 2.4 refuses; from 0.6
  ``save_episode`` flattens them itself;
- ``lerobot-train``'s periodic env evaluation is ``--eval_freq`` up to 0.5 and
  ``--env_eval_freq`` from 0.6.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.errors import HudError

__all__ = [
    "SUPPORTED",
    "finalize_is_final",
    "lerobot_version",
    "new_rollout_options",
    "no_env_eval_flag",
    "open_for_append",
    "prepare_save",
    "require_supported",
]

#: The LeRobot releases pytest-hud is tested with (the ``lerobot`` extra admits these).
SUPPORTED = ">=0.4.4,<0.7"
_LOWEST, _BEYOND = (0, 4, 4), (0, 7, 0)
#: The first release whose dataset writer is a separate object (resume, one finalize).
_WRITER_SPLIT = (0, 6, 0)


class LeRobotVersionError(HudError, ImportError):
    """The installed lerobot is missing or outside :data:`SUPPORTED`."""


@functools.cache
def lerobot_version() -> tuple[int, int, int]:
    """The installed lerobot's ``(major, minor, patch)``; raises LeRobotVersionError
    naming the install command when lerobot is not installed."""
    try:
        text = version("lerobot")
    except PackageNotFoundError:
        raise LeRobotVersionError(
            f"lerobot is not installed; expected lerobot{SUPPORTED}; "
            "fix: pip install 'pytest-hud[lerobot]'"
        ) from None
    parts = [int(p) for p in re.findall(r"\d+", text)[:3]]
    return (*parts, 0, 0, 0)[:3]  # type: ignore[return-value]


def require_supported() -> tuple[int, int, int]:
    """The installed version, or one clear error when it is outside :data:`SUPPORTED`."""
    found = lerobot_version()
    if not _LOWEST <= found < _BEYOND:
        raise LeRobotVersionError(
            f"pytest-hud supports lerobot{SUPPORTED}; installed: "
            f"{'.'.join(map(str, found))}; fix: pip install 'lerobot{SUPPORTED}'"
        )
    return found


def finalize_is_final() -> bool:
    """Whether ``LeRobotDataset.finalize()`` ends that dataset object's writing (0.6+)."""
    return lerobot_version() >= _WRITER_SPLIT


def open_for_append(dataset_cls: Any, repo_id: str, root: Path) -> Any:
    """The dataset at ``root`` opened for more episodes."""
    if lerobot_version() >= _WRITER_SPLIT:
        return dataset_cls.resume(repo_id, root=root)
    return dataset_cls(repo_id, root=root)


def prepare_save(ds: Any, frame: Mapping[str, np.ndarray]) -> None:
    """Before ``save_episode``: up to 0.5, hand the buffered one-element numeric features of
    ``frame``'s layout to lerobot as 0-d values (``episode_buffer`` is 0.4's public buffer
    of the open episode there; add_frame validated them as ``(1,)``)."""
    if lerobot_version() >= _WRITER_SPLIT:
        return
    buffer = ds.episode_buffer
    for key, value in frame.items():
        if value.dtype != np.uint8 and value.shape == (1,):
            buffer[key] = [np.asarray(v).reshape(()) for v in buffer[key]]


def new_rollout_options() -> dict[str, Any]:
    """The reset options lerobot-eval's rollout passes at the start of every rollout
    (0.6 names it ``NEW_ROLLOUT_OPTION``; none before)."""
    try:
        from lerobot.envs.utils import NEW_ROLLOUT_OPTION
    except ImportError:
        return {}
    return {NEW_ROLLOUT_OPTION: True}


def no_env_eval_flag() -> str:
    """The ``lerobot-train`` flag that turns its periodic env evaluation off."""
    return "--env_eval_freq=0" if lerobot_version() >= _WRITER_SPLIT else "--eval_freq=0"
