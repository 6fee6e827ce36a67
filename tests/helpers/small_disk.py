"""A real small disk for the full-disk tests: a tmpfs mounted for one test (root can mount
one; CI runs as root), and a filler file that leaves it about N bytes free."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from needs import require


@contextlib.contextmanager
def mounted(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``"2m"``) at ``where`` for the block; unmounted after."""
    require(os.geteuid() == 0, "root (to mount a tmpfs)", "run the tests as root, as CI does")
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True, timeout=60
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, timeout=60)


def free_bytes(disk: Path) -> int:
    st = os.statvfs(disk)
    return st.f_bavail * st.f_frsize


def fill(disk: Path, leave: int = 0) -> Path:
    """Fill ``disk`` with a filler file, leaving about ``leave`` bytes free."""
    filler = disk / "filler"
    with filler.open("wb") as f, contextlib.suppress(OSError):
        f.write(b"\0" * max(0, free_bytes(disk) - leave))
        f.flush()
    return filler
