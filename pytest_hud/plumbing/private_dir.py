"""A folder of this user's own, for the files that coordinate this user's processes (robot
claims, docker creates in flight), and files opened in it without following links.

In the shared temp folder under a predictable name, such a file was another local user's
to plant: a symlink there made a robot claim truncate and write its target, and anyone
could hold the claim and choose the text shown to the operator. Here the folder is
``$XDG_RUNTIME_DIR/pytest-hud`` (the login's own, mode 0700) or, without one,
``TMPDIR/pytest-hud-UID``, created mode 0700; a folder that is a link, or is another
user's, or that others may write, is refused with the fix, never used.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from pytest_hud.errors import HudError

__all__ = ["PrivateDirError", "open_private", "private_dir"]


class PrivateDirError(HudError, PermissionError):
    """A folder or file meant to be this user's own is not (a link, or another user's)."""


def _checked(path: Path, variable: str | None) -> Path:
    """``path`` when it is a real folder (not a link) owned by this user that nobody else
    may write, else PrivateDirError naming ``variable``, the way to choose another."""
    info = os.lstat(path)
    problem = None
    if not stat.S_ISDIR(info.st_mode):
        problem = "is a link or a file, not a folder"
    elif info.st_uid != os.getuid():
        problem = f"belongs to user id {info.st_uid}, not to this user ({os.getuid()})"
    elif info.st_mode & 0o022:
        problem = f"may be written by others (mode {stat.S_IMODE(info.st_mode):o})"
    if problem is not None:
        choose = f", or set ${variable} to a folder of your own (mode 0700)" if variable else ""
        raise PrivateDirError(
            f"folder {path} {problem}; another user could plant files there. Fix: remove "
            f"it if it is not yours{choose}"
        )
    return path


def _made(path: Path, variable: str | None) -> Path:
    """``path`` created mode 0700 if absent, then checked."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    return _checked(path, variable)


def _root(variable: str | None) -> Path:
    """This user's pytest-hud folder: in ``$XDG_RUNTIME_DIR`` when that is theirs, else in
    the temp folder."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        try:
            return _made(_checked(Path(runtime), variable) / "pytest-hud", variable)
        except OSError:  # absent, or not this user's: the temp folder
            pass
    return _made(Path(tempfile.gettempdir()) / f"pytest-hud-{os.getuid()}", variable)


def private_dir(name: str, variable: str | None = None) -> Path:
    """The folder ``name`` (created mode 0700) in ``$variable`` when set (a folder the user
    chose, which must be theirs and writable by them alone), else in this user's own
    pytest-hud folder."""
    base = os.environ.get(variable) if variable else None
    parent = _checked(Path(base), variable) if base else _root(variable)
    return _made(parent / name, variable)


def open_private(path: Path) -> int:
    """A read-write descriptor of the regular file ``path`` of this user, created mode 0600
    when absent (``O_EXCL``); a link there is never followed (``O_NOFOLLOW``), and a file
    that is another user's is refused."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # ELOOP: a symlink
        raise PrivateDirError(
            f"{path} cannot be opened as a file of this user's ({exc.strerror}); fix: remove it"
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        os.close(fd)
        raise PrivateDirError(
            f"{path} is not a regular file of this user's (owner {info.st_uid}); fix: remove it"
        )
    return fd
