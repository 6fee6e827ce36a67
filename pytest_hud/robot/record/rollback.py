"""A dataset put back to its last finalized state when a commit fails part-way
(:class:`Snapshot`), and :func:`disk_full` to tell a full disk from other failures.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LOW_SPACE", "Snapshot", "disk_full", "free_space", "stopped_message"]

#: Free bytes under which a failed write is put down to a full disk.
LOW_SPACE = 1 << 20
_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full(exc: BaseException, where: Path) -> bool:
    """Whether ``exc`` (or what caused it) is a full disk, or the device holding ``where``
    has less than :data:`LOW_SPACE` free now."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno in _FULL:
            return True
        cause = cause.__cause__ or cause.__context__
    probe = where
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free < LOW_SPACE
    except OSError:
        return False


def free_space(where: Path) -> str:
    """``"N bytes free on its device"`` for the device holding ``where`` (for messages)."""
    probe = where
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return f"{shutil.disk_usage(probe).free} bytes free on its device"
    except OSError as exc:
        return f"free space unknown: {exc.strerror or exc}"


def stopped_message(root: Path, index: int, cause: str, kept: int, unrecorded: int) -> str:
    """The one error of a dataset whose disk filled at episode ``index``."""
    return (
        f"recording into {root} stopped: the disk is full ({cause}) while writing episode "
        f"{index}; kept: the dataset's {kept} committed episode(s), whole (episode {index}'s "
        f"partial files were removed); not recorded: episode {index} and {unrecorded} later "
        "one(s). Free space, then record again into the same folder: new episodes are "
        "appended to it"
    )


def _files(root: Path) -> dict[Path, tuple[int, int]]:
    """Every file under ``root`` with its (size, mtime in ns)."""
    out: dict[Path, tuple[int, int]] = {}
    for path in root.rglob("*") if root.is_dir() else ():
        with contextlib.suppress(OSError):
            if path.is_file():
                st = path.stat()
                out[path] = (st.st_size, st.st_mtime_ns)
    return out


@dataclass
class Snapshot:
    """The files of the dataset at ``root`` before a commit (see the module doc)."""

    root: Path
    files: dict[Path, tuple[int, int]] = field(default_factory=dict)
    dirs: set[Path] = field(default_factory=set)
    small: dict[Path, bytes] = field(default_factory=dict)

    @classmethod
    def take(cls, root: Path) -> Snapshot:
        files = _files(root)
        dirs = {p for p in root.rglob("*") if p.is_dir()} if root.is_dir() else set()
        meta = root / "meta"
        small = {p: p.read_bytes() for p in files if p.parent == meta}
        return cls(root, files, dirs, small)

    def restore(self) -> list[Path]:
        """Put the dataset back; returns the older files that changed and were not among
        the small ones written back (empty: the dataset is whole again)."""
        now = _files(self.root)
        for path in sorted(set(now) - set(self.files), reverse=True):
            with contextlib.suppress(OSError):
                path.unlink()
        for path in sorted(self._new_dirs(), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                path.rmdir()  # only if empty
        for path, data in self.small.items():
            if not path.is_file() or path.read_bytes() != data:
                _write_back(path, data)
        changed = []
        for path, before in self.files.items():
            if path in self.small:
                continue
            try:
                st = path.stat()
            except OSError:
                changed.append(path)
                continue
            if (st.st_size, st.st_mtime_ns) != before:
                changed.append(path)
        return changed

    def _new_dirs(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.rglob("*") if p.is_dir() and p not in self.dirs]


def _write_back(path: Path, data: bytes) -> None:
    """``data`` into ``path`` in place (the failed commit's files are gone by now, so the
    space the file had is free again), flushed to disk."""
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
