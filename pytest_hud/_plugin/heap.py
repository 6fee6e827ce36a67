"""The agent's heap: loaded with the cyclic collector paused, then frozen, so full collections
skip it. Only the outermost pytest session of a process freezes.
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
