"""The agent's heap: loaded with the cyclic collector paused, then frozen.

Loading a policy imports torch and lerobot and builds the model: hundreds of thousands
of objects that live as long as the session. Python's cyclic collector walks every one
of them on each full collection, while they load and again at exit (pytest's
unconfigure collections and the interpreter's final one). With the collector paused
during the load and the survivors frozen (``gc.freeze``, permanent generation), those
walks are skipped (figures: docs/performance.md).

One full collection runs before the freeze, so garbage made while loading is freed and
never becomes permanent. Only the outermost pytest session of a process freezes: a session
run inside another (pytester's in-process runs) would freeze the outer process's objects
for the rest of its life.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["closed", "long_lived", "opened"]

_open = 0  # pytest-hud sessions configured and not yet unconfigured in this process


def opened() -> bool:
    """Count a session in; whether it is the process's outermost one."""
    global _open
    _open += 1
    return _open == 1


def closed() -> None:
    global _open
    _open = max(_open - 1, 0)


@contextlib.contextmanager
def long_lived(freeze: bool = True) -> Iterator[None]:
    """Run the body (a load whose objects live until the process ends) with the cyclic
    collector paused; then, with ``freeze``, collect once and freeze what survived."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.collect()
            gc.freeze()
        if enabled:
            gc.enable()
