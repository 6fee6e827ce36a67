"""Interrupts that clean up (issue 12 #7).

SIGTERM's default action ends a process on the spot: no ``finally``, no teardown, so
the containers a session (or an xdist worker) had started outlived it. While a session
runs, SIGTERM is turned into the KeyboardInterrupt that Ctrl-C raises, so both end the
session through pytest's own teardown: rollouts cancelled, substrates removed. The
controller then removes, under Docker, the containers of workers that died without
removing their own (a worker killed with the controller, or by the OOM killer): after
SIGINT to the controller alone, 2 running containers outlived the session. A SIGKILL
leaves its containers to the next session's start (``docker_engine`` reaps once per
process); local sims die with their parent (their lifeline is its stdin).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

__all__ = ["restore_sigterm", "sigterm_interrupts"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


def sigterm_interrupts() -> Any:
    """Make SIGTERM raise KeyboardInterrupt (main thread, default handler only); returns
    what to give :func:`restore_sigterm` (None when nothing changed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None  # someone (a CI runner, a wrapper) handles it: leave theirs
    signal.signal(signal.SIGTERM, _interrupt)
    return signal.SIG_DFL


def restore_sigterm(previous: Any) -> None:
    if previous is None or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is _interrupt:
        signal.signal(signal.SIGTERM, previous)
