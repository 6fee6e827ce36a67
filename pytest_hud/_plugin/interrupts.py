"""Interrupts that clean up: SIGTERM becomes KeyboardInterrupt during a session (once: later
ones let the cleanup finish), and the controller removes dead workers' containers.
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
    # once: a second SIGTERM while this one's interrupt is handled (``timeout`` signals the
    # process, then its group; a supervisor repeats itself) would raise again inside
    # pytest's and the session's cleanup, which every wait bounds: it is let finish
    signal.signal(signal.SIGTERM, _stopping)
    raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


def _stopping(signum: int, frame: FrameType | None) -> None:
    """SIGTERM after the first: the session is already stopping."""


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
    if signal.getsignal(signal.SIGTERM) in (_interrupt, _stopping):
        signal.signal(signal.SIGTERM, previous)
