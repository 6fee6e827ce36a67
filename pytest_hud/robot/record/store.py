"""Where a dataset lives (``RECORD_DIR``), whether an existing one may be appended to, and the
``HF_REPO`` push settings.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_hud.errors import DatasetError
from pytest_hud.robot.record.schema import _comparable, _describe, _Schema

__all__ = ["check_append", "inspect_root"]


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


def _is_empty_dataset(root: Path, info: Mapping[str, object]) -> bool:
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


def inspect_root(root: Path, flag: str) -> tuple[dict[str, Any] | None, bool]:
    """The info of the dataset already at ``root`` (None: a new one goes there) and whether
    an episode-less leftover (a crashed run) is started over in place; anything else at
    ``root`` that cannot take new episodes is refused, naming ``flag``."""
    restart = False
    if root.exists() and not root.is_dir():
        raise DatasetError(f"the dataset folder {root} is a file; point {flag} at a folder")
    info = _read_info(root) if root.is_dir() else None
    if info is not None and _is_empty_dataset(root, info):
        if {p.name for p in root.iterdir()} - {"meta", "images"}:
            raise DatasetError(
                f"{root} holds a LeRobot dataset without episodes next to other "
                f"files; record elsewhere with {flag}"
            )
        info = None  # created, nothing committed (a crashed run): start over in place
        restart = True
    elif info is None and root.is_dir() and any(root.iterdir()):
        raise DatasetError(
            f"the dataset folder {root} exists, is not empty and is not a LeRobot "
            f"dataset (no meta/info.json); record elsewhere with {flag}"
        )
    if info is not None:
        if info.get("codebase_version") != "v3.0":
            raise DatasetError(
                f"{root} holds a LeRobot {info.get('codebase_version')} dataset; "
                f"only v3.0 can be appended to: record elsewhere with {flag}"
            )
        if not os.access(root, os.W_OK | os.X_OK):
            raise DatasetError(f"the dataset folder {root} is not writable")
    return info, restart


def check_append(info: Mapping[str, Any], schema: _Schema, root: Path, flag: str) -> None:
    """Refuse ``schema`` unless its episodes can go into the dataset whose ``info.json`` is
    ``info``: fps, robot type and features must match (shapes once the schema knows them)."""
    diff: dict[str, object] = {}
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
            f"cannot append to the existing dataset at {root}: {_describe(diff)}; "
            f"record elsewhere with {flag}"
        )
