"""Control connections kept between clean rollouts on a shared substrate; any other ending closes
them, so a session still belongs to its connection.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from pytest_hud.runtime.control import ControlClient
from pytest_hud.runtime.provider import Runtime

__all__ = ["ControlPool", "current_pool", "use_pool"]

_POOL: contextvars.ContextVar[ControlPool | None] = contextvars.ContextVar(
    "pytest_hud_control_pool", default=None
)


class ControlPool:
    """Idle control connections by runtime (url and params), at most ``per_runtime`` each."""

    def __init__(self, per_runtime: int = 64) -> None:
        self.per_runtime = per_runtime
        self._idle: dict[tuple[str, str], list[ControlClient]] = {}
        #: Connections handed out again instead of dialled (for tests and benches).
        self.reused = 0

    @staticmethod
    def _key(runtime: Runtime | str) -> tuple[str, str]:
        if isinstance(runtime, str):
            return runtime, ""
        return str(runtime.url), repr(sorted((runtime.params or {}).items()))

    async def acquire(self, runtime: Runtime | str, *, timeout: float = 30.0) -> ControlClient:
        """An idle open connection to ``runtime``, else a new one."""
        idle = self._idle.get(self._key(runtime))
        while idle:
            client = idle.pop()
            if not client.closed:
                self.reused += 1
                return client
            await client.close()
        return await ControlClient.connect(runtime, timeout=timeout)

    async def release(self, runtime: Runtime | str, client: ControlClient) -> None:
        """Keep a connection whose sessions all ended; close it if the pool is full."""
        idle = self._idle.setdefault(self._key(runtime), [])
        if client.closed or len(idle) >= self.per_runtime:
            await client.close()
        else:
            idle.append(client)

    async def drain(self) -> None:
        """Close every idle connection (before the servers they reach are stopped)."""
        idle, self._idle = self._idle, {}
        for clients in idle.values():
            for client in clients:
                with contextlib.suppress(Exception):
                    await client.close()


def current_pool() -> ControlPool | None:
    """The pool rollouts in this context may use (None: dial and hang up each time)."""
    return _POOL.get()


@contextlib.contextmanager
def use_pool(pool: ControlPool | None) -> Iterator[None]:
    """Rollouts started inside the block reuse ``pool``'s connections to Shared substrates."""
    token = _POOL.set(pool)
    try:
        yield
    finally:
        _POOL.reset(token)
