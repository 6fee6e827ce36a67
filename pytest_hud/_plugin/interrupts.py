"""Interrupts that clean up: SIGTERM becomes KeyboardInterrupt during a session, and the
controller removes dead workers' containers.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import TypeAlias

__all__ = ["SignalHandler", "restore_sigterm", "sigterm_interrupts"]

#: what ``signal.signal`` takes and ``signal.getsignal`` gives back
SignalHandler: TypeAlias = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


def sigterm_interrupts() -> SignalHandler:
    """Make SIGTERM raise KeyboardInterrupt (main thread, default handler only); returns
    what to give :func:`restore_sigterm` (None when nothing changed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None  # someone (a CI runner, a wrapper) handles it: leave theirs
    signal.signal(signal.SIGTERM, _interrupt)
    return signal.SIG_DFL


def restore_sigterm(previous: SignalHandler) -> None:
    if previous is None or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is _interrupt:
        signal.signal(signal.SIGTERM, previous)
