"""Bounded waits on a condition (never a timed assertion: the bound is generous)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], object], seconds: float) -> bool:
    """Poll ``predicate`` until it holds or ``seconds`` pass; its last answer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return bool(predicate())
