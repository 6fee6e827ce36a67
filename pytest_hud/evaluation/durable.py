"""Writes that never corrupt what was there: temporary file, fsync, rename; a failed write keeps
the previous file and names the path and cause.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from pytest_hud.errors import HudError

__all__ = ["OutputWriteError", "write_atomically"]


class OutputWriteError(HudError, OSError):
    """An output file could not be written; the message says what was kept."""


def write_atomically(path: str | Path, data: str | bytes, what: str = "output") -> None:
    """Replace ``path`` with ``data`` in one rename, or raise :class:`OutputWriteError`."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644  # mkstemp makes 0600
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        kept = f"the previous {path.name} is unchanged" if path.exists() else "nothing was written"
        raise OutputWriteError(
            exc.errno,
            f"could not write the {what} {path} ({exc.strerror or exc}); {kept}; fix: free "
            "space on that filesystem (or point the option at another one) and run again",
        ) from None
