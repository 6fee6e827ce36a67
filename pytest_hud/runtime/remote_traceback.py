"""The user's lines in a traceback that crossed the control channel: the env module's frames,
without the server's machinery.
"""

from __future__ import annotations

import re

__all__ = ["user_frames"]

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+')
#: path fragments of frames that are not the user's: this package, the stdlib, installs
_MACHINERY = ("/pytest_hud/", "site-packages", "dist-packages", "/lib/python3", "<frozen")


def _is_user(path: str) -> bool:
    norm = path.replace("\\", "/")
    return not any(part in norm for part in _MACHINERY)


def user_frames(remote_traceback: str) -> str:
    """The ``File ...`` blocks (with their source lines) of the user's own modules."""
    out: list[str] = []
    keep = False
    for line in remote_traceback.splitlines():
        match = _FRAME.match(line)
        if match:
            keep = _is_user(match["path"])
        elif not line.startswith("    "):  # "Traceback ...", the exception line, chaining
            keep = False
        if keep:
            out.append(line)
    return "\n".join(out)
