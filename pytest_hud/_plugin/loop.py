"""LoopThread: the plugin's event loop for rollouts; tests wait on futures with a bound, and
``close()`` cancels and joins so nothing outlives the session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str = "pytest-hud-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[object, object, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[object, object, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it (at most ``timeout`` seconds)."""
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"gave up after {timeout} s waiting on the rollout loop") from None

    def close(self, timeout: float = 30.0) -> None:
        """Cancel every task still on the loop, let them clean up, and stop the thread."""
        if not self._thread.is_alive():
            return

        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout)

        with contextlib.suppress(Exception):
            self.run(_cancel_all(), timeout + 5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
