"""Merging per-worker datasets into one with lerobot's ``aggregate_datasets``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_hud.errors import DatasetError
from pytest_hud.robot.record.schema import _comparable
from pytest_hud.robot.record.store import _lerobot_dataset, _quiet, _read_info, _safe_name

__all__ = ["merge_datasets"]


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
