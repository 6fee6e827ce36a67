"""Shared: up to ``width`` concurrent rollouts share substrates per (env, runtime config), each up
to its capacity; substrates are recycled after a timeout, a death or ``max_age``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import cast

from pytest_hud.errors import SharedScopeError, SubstrateError
from pytest_hud.runtime.capacity import Seats, Substrate, substrate_capacity
from pytest_hud.runtime.provider import Provider, Runtime
from pytest_hud.runtime.substrate import died_during
from pytest_hud.runtime.task import Task

__all__ = ["Shared", "SharedScopeError"]


class Shared:
    """A refcounting provider: leases share one substrate per key, ``width`` at a time."""

    def __init__(
        self,
        provider: Provider,
        width: int = 8,
        *,
        max_age: float | None = None,
        key: Callable[[Task], Hashable] | None = None,
    ) -> None:
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"Shared width must be a positive int, got {width!r}")
        self.provider = provider
        self.width = width
        self.max_age = max_age
        self._key = key or (lambda task: (task.env, task.runtime_config))
        self._seats: dict[Hashable, Seats] = {}
        self._depth = 0
        #: How many substrates this Shared has booted (recycles included).
        self.boots = 0

    def __repr__(self) -> str:
        return f"Shared({self.provider!r}, width={self.width})"

    @property
    def substrates(self) -> int:
        """How many substrates are up right now."""
        return sum(s.runtime is not None for s in self._substrates())

    async def __aenter__(self) -> Shared:
        self._depth += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            subs = list(self._substrates())
            self._seats = {}
            results = await asyncio.gather(*(s.teardown() for s in subs), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            if errors:
                raise errors[0]

    def _substrates(self) -> Iterator[Substrate]:
        return (sub for seats in self._seats.values() for sub in seats.subs)

    def __call__(self, task: Task, /) -> AbstractAsyncContextManager[Runtime]:
        return self._lease(task)

    @contextlib.asynccontextmanager
    async def _lease(self, task: Task) -> AsyncIterator[Runtime]:
        if self._depth == 0:
            raise SharedScopeError(
                f"{self!r} was used outside its scope: enter it first with "
                "`async with shared:` (pytest-hud enters a Shared session fixture for you)"
            )
        seats = self._seats.setdefault(self._key(task), Seats(self.width))
        async with seats.seat() as sub:
            runtime = await self._ensure(sub, task)
            if not sub.sized:
                await self._size(seats, sub, runtime, task)
            sub.leases += 1
            try:
                yield runtime
            except TimeoutError:
                sub.recycle = True  # a rollout that timed out may have wedged the substrate
                raise
            except Exception as exc:
                note = await _death(sub)
                if note is None:
                    raise
                sub.recycle = True  # a dead substrate serves no one: boot a new one
                raise SubstrateError(died_during(task, note, exc)) from exc
            finally:
                sub.leases -= 1
                if sub.recycle and sub.leases == 0:
                    async with sub.boot_lock:
                        if sub.leases == 0 and sub.runtime is runtime:
                            await sub.teardown()

    async def _size(self, seats: Seats, sub: Substrate, runtime: Runtime, task: Task) -> None:
        """Seat as many leases on the booted substrate as it can take (its sim's slots)."""
        async with sub.boot_lock:
            if not sub.sized:
                await seats.resize(sub, await _size_of(runtime, task, self.width))

    async def _ensure(self, sub: Substrate, task: Task) -> Runtime:
        async with sub.boot_lock:
            aged = self.max_age is not None and time.monotonic() - sub.booted_at > self.max_age
            if sub.runtime is not None and aged:
                sub.recycle = True
            if sub.runtime is not None and sub.recycle and sub.leases == 0:
                await sub.teardown()
            if sub.runtime is None:
                stack = AsyncExitStack()
                provisioned = self.provider(task)
                try:
                    runtime = await stack.enter_async_context(provisioned)
                except BaseException:
                    await stack.aclose()
                    raise
                sub.stack, sub.runtime, sub.provisioned = stack, runtime, provisioned
                sub.booted_at = time.monotonic()
                self.boots += 1
            assert sub.runtime is not None
            return sub.runtime


async def _size_of(runtime: Runtime, task: Task, width: int) -> int:
    try:
        capacity = await substrate_capacity(runtime, task)
    except Exception:  # a substrate that cannot say is leased as wide as asked
        capacity = None
    return min(width, capacity) if capacity else width


async def _death(sub: Substrate) -> str | None:
    """Whether the shared substrate died (its ``death()``, when its provider has one)."""
    death = getattr(sub.provisioned, "death", None)
    if death is None:
        return None
    with contextlib.suppress(Exception):
        return cast(str | None, await death())
    return None
