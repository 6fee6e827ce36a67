"""Mailbox: what one connection has received and its one reader has not taken yet, and that
reader's wake-up (a deque and a future: an asyncio.Queue's getters and bookkeeping cost more
than a message a step). Both client transports, the WebSocket and the in-process pair, use it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["Mailbox"]

T = TypeVar("T")


class Mailbox(Generic[T]):
    """``items`` in arrival order; :meth:`wait` returns once one is put or :meth:`wake` is
    called (a connection closing), for one reader at a time."""

    __slots__ = ("_waiter", "items")

    def __init__(self) -> None:
        self.items: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: T) -> None:
        self.items.append(item)
        self.wake()

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until the next :meth:`put` or :meth:`wake`. A second task waiting on the same
        connection is refused, as websockets refuses it: only one could be woken."""
        if self._waiter is not None:
            raise RuntimeError(
                "two tasks read one connection at once; one task receives on a connection "
                "at a time (as websockets requires)"
            )
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
