"""Watchdog: one timer per connection for a loop of bounded waits, re-armed lazily.

A timeout context per receive (``asyncio.timeout``) schedules and cancels a timer every
step of an episode. A connection waits for one reply at a time, so one timer does: each
wait moves the deadline forward, and the timer, when it fires early, re-arms itself at the
deadline it finds. An expired wait is cancelled and raises TimeoutError; a cancellation
from anyone else stays a cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["Watchdog"]

T = TypeVar("T")


class Watchdog:
    """Bound each :meth:`wait` of one task at a time; :meth:`close` stops the timer."""

    def __init__(self) -> None:
        self._deadline: float | None = None
        self._waiter: asyncio.Task[object] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._expired = False

    async def wait(self, awaitable: Awaitable[T], timeout: float) -> T:
        """``await awaitable``, or TimeoutError after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + timeout
        self._waiter = asyncio.current_task()
        if self._timer is None:
            self._timer = loop.call_at(self._deadline, self._check)
        try:
            return await awaitable
        except asyncio.CancelledError:
            if self._expired and self._waiter is not None and self._waiter.uncancel() == 0:
                self._expired = False
                raise TimeoutError(f"nothing within {timeout} s") from None
            raise
        finally:
            self._deadline = None
            self._waiter = None

    def extend(self, timeout: float) -> None:
        """Move the current wait's deadline to ``timeout`` from now (activity elsewhere
        counts as the awaited event's: an inline agent's action handled in its task)."""
        if self._waiter is not None:
            self._deadline = asyncio.get_running_loop().time() + timeout

    def _check(self) -> None:
        self._timer = None
        if self._deadline is None or self._waiter is None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= self._deadline:
            self._expired = True
            self._waiter.cancel()
        else:
            self._timer = loop.call_at(self._deadline, self._check)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
