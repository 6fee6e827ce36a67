"""What a zygote learns from its children: the library modules they imported, preloaded before its
next fork (never :data:`DENY` packages or ones that start threads).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import sysconfig
import threading

__all__ = ["DENY", "LIMIT", "import_learned", "learnable", "read_report", "write_report"]

#: Never preloaded: thread pools at import (torch, jax, tensorflow, ray), GL and windowing
#: (a context must be made in the process that renders), process pools.
DENY = (
    "torch",
    "jax",
    "jaxlib",
    "tensorflow",
    "ray",
    "OpenGL",
    "glfw",
    "mujoco.egl",
    "mujoco.osmesa",
    "mujoco.glfw",
    "pygame",
    "multiprocessing",
    "concurrent",
)

#: Bytes of module names one child reports (below a pipe's 64 KiB: the write never blocks).
LIMIT = 60_000


def denied(name: str, extra: frozenset[str] = frozenset()) -> bool:
    return any(name == d or name.startswith(d + ".") for d in (*DENY, *extra))


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    keys = ("purelib", "platlib", "stdlib", "platstdlib")
    return tuple({os.path.realpath(paths[k]) + os.sep for k in keys if k in paths})


def learnable(before: set[str], deny: frozenset[str] = frozenset()) -> list[str]:
    """Library modules imported since ``before`` (the zygote's modules at fork), in order."""
    roots = _library_roots()
    out = []
    for name, module in list(sys.modules.items()):
        if name in before or denied(name, deny):
            continue
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and os.path.realpath(file).startswith(roots):
            out.append(name)
    return out


def write_report(fd: int, names: list[str]) -> None:
    data = "\n".join(names).encode()
    if len(data) > LIMIT:
        data = data[: data.rfind(b"\n", 0, LIMIT)]
    with contextlib.suppress(OSError):
        os.write(fd, data)


def read_report(fd: int) -> list[str]:
    os.set_blocking(fd, False)
    chunks = []
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    return [n for n in b"".join(chunks).decode(errors="replace").split("\n") if n]


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def import_learned(names: list[str], deny: frozenset[str], tried: set[str]) -> str | None:
    """Import the reported modules not yet tried; the name of one whose import started a
    thread (the zygote must not fork after it), else None."""
    for name in names:
        if name in tried or name in sys.modules or denied(name, deny):
            continue
        tried.add(name)
        before = _threads()
        try:
            importlib.import_module(name)
        except Exception as exc:  # the child had it; here it may need its own setup first
            print(f"pytest-hud zygote: not preloading {name}: {exc}", file=sys.stderr)
            continue
        if _threads() > before or threading.active_count() > 1:
            return name
    return None
