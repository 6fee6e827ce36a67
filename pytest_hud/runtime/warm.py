"""WarmPool: boot the next rollouts' substrates while the current episodes run.

Each substrate is booted for one planned row and used by that row only; at most ``size`` wait
untaken, and leaving the pool tears them down.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from collections.abc import Hashable, Iterable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

from pytest_hud.runtime.backends import RuntimeSpec
from pytest_hud.runtime.provider import Provider, Runtime
from pytest_hud.runtime.shared import Shared
from pytest_hud.runtime.task import Task

__all__ = ["WarmPool", "pool_size", "spec_pool_size", "warms_by_default"]

log = logging.getLogger(__name__)

#: seconds a drain waits for one boot or exit (a container's removal is bounded at 60 s)
_DRAIN_TIMEOUT = 120.0


def warms_by_default(provider: object) -> bool:
    """Whether booting ahead pays for ``provider``: it says so (``warm_ahead = True``:
    SubprocessRuntime, DockerRuntime, ModalRuntime, DaytonaRuntime, and
    ``provider_for``'s routes for the backends marked ``warm`` in runtime/backends.py)."""
    return bool(getattr(provider, "warm_ahead", False))


def pool_size(provider: object, warm: int | None, concurrency: int) -> int:
    """How many substrates to boot ahead: ``warm`` when given (0: off), else
    ``concurrency`` for a provider that :func:`warms_by_default`, else none. Never for a
    Shared provider (its substrates are shared, not one per rollout)."""
    if warm is not None and warm < 0:
        raise ValueError(f"warm must be >= 0 (0: off), got {warm!r}")
    if isinstance(provider, Shared):
        return 0
    if warm is not None:
        return warm
    return concurrency if warms_by_default(provider) else 0


def spec_pool_size(runtime: RuntimeSpec, warm: int | None, concurrency: int) -> int:
    """:func:`pool_size` for the provider an ``--hud-runtime`` value names (the xdist
    controller sizes each worker's queue by it: a worker plans only what it holds)."""
    if warm is not None:
        return warm
    return concurrency if runtime.backend.warm else 0


class _Entry:
    """One substrate booted ahead for one planned row."""

    def __init__(self, token: Hashable, task: Task, provider: Provider) -> None:
        self.token = token
        self.task = task
        self.cm: AbstractAsyncContextManager[Runtime] | None = None
        self.boot = asyncio.ensure_future(self._enter(provider))

    async def _enter(self, provider: Provider) -> Runtime:
        self.cm = provider(self.task)  # may raise: the row's error, as without the pool
        return await self.cm.__aenter__()

    def booted(self) -> bool:
        """The boot finished with a substrate (which someone must exit)."""
        boot = self.boot
        return boot.done() and not boot.cancelled() and boot.exception() is None

    async def discard(self) -> None:
        """Cancel the boot if it runs (a cancelled boot undoes itself), else exit it."""
        if not self.boot.done():
            self.boot.cancel()
            await asyncio.wait([self.boot], timeout=_DRAIN_TIMEOUT)
        if self.booted() and self.cm is not None:
            await asyncio.wait_for(self.cm.__aexit__(None, None, None), _DRAIN_TIMEOUT)
        elif self.boot.done() and not self.boot.cancelled():
            self.boot.exception()  # retrieved: an untaken failed boot is nobody's error


class WarmPool:
    """Boots planned rows' substrates ahead, ``size`` at most (see the module doc).

    ``async with pool:`` opens its scope; ``pool.plan([(token, task), ...])`` names the
    rows about to start, in order (on the loop; each call replaces the previous plan);
    ``pool.serving(token)`` is the provider a planned row's rollout uses. ``pool(task)``
    serves an unplanned row on demand.
    """

    warm_ahead = False  # a pool is not wrapped in another

    def __init__(self, provider: Provider, size: int) -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"WarmPool size must be a positive int, got {size!r}")
        self.provider = provider
        self.size = size
        self._plan: collections.deque[tuple[Hashable, Task]] = collections.deque()
        self._entries: dict[Hashable, _Entry] = {}
        self._taken: set[Hashable] = set()
        self._discards: set[asyncio.Future[Any]] = set()
        #: finished rollouts' substrates being exited behind them (in _discards too)
        self._exits: set[asyncio.Future[Any]] = set()
        #: exits behind rollouts that failed: the drain raises the first (had the rollout
        #: exited its own substrate, the failure would have been that rollout's error)
        self._exit_errors: list[BaseException] = []
        #: boots in progress, taken or not: at most ``size`` at once
        self._booting: set[asyncio.Future[Runtime]] = set()
        self._open = False
        #: boots started ahead; rollouts that found theirs booted / still booting / none
        self.stats = {
            "ahead": 0,
            "ready": 0,
            "booting": 0,
            "cold": 0,
            "discarded": 0,
            "exited_behind": 0,
        }

    def __repr__(self) -> str:
        return f"WarmPool({self.provider!r}, size={self.size})"

    @property
    def warm(self) -> int:
        """How many substrates are booted or booting and not yet taken."""
        return len(self._entries)

    async def settled(self, timeout: float = _DRAIN_TIMEOUT) -> None:
        """Wait (at most ``timeout`` s) until every boot started ahead, and every exit
        behind a finished rollout, has finished."""
        pending = [e.boot for e in self._entries.values()] + list(self._exits)
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    async def __aenter__(self) -> WarmPool:
        self._open = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.drain()

    async def drain(self) -> None:
        """Close the scope: cancel boots in progress, exit every untaken substrate."""
        self._open = False
        self._plan.clear()
        entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            self._discard(entry)
        pending = list(self._discards)
        if pending:
            await asyncio.wait(pending, timeout=_DRAIN_TIMEOUT + 5)
        for fut in pending:
            error = fut.exception() if fut.done() and not fut.cancelled() else None
            if error is not None:
                raise error
        if self._exit_errors:
            raise self._exit_errors[0]

    # -- the plan ------------------------------------------------------------------------
    def plan(self, upcoming: Iterable[tuple[Hashable, Task]]) -> None:
        """The rows about to start, in order; boots the first ``size`` not yet taken and
        exits substrates of rows that left that window. Call on the pool's loop."""
        self._plan = collections.deque(upcoming)
        self._refill()

    def _window(self) -> list[tuple[Hashable, Task]]:
        """The first ``size`` planned rows not yet taken (taken rows leave the plan's
        front as they go, so a long plan costs O(size) per take)."""
        plan, taken = self._plan, self._taken
        while plan and plan[0][0] in taken:
            plan.popleft()
        window = (row for row in plan if row[0] not in taken)
        return list(itertools.islice(window, self.size))

    def _refill(self) -> None:
        if not self._open:
            return
        window = self._window()
        wanted = {token for token, _ in window}
        for token in [t for t in self._entries if t not in wanted]:
            self._discard(self._entries.pop(token))
        for token, task in window:
            if len(self._booting) >= self.size:
                break  # boots compete for the CPU: the rows needed first boot first
            if token not in self._entries:
                entry = self._entries[token] = _Entry(token, task, self.provider)
                self.stats["ahead"] += 1
                self._booting.add(entry.boot)
                entry.boot.add_done_callback(self._booted)

    def _booted(self, boot: asyncio.Future[Runtime]) -> None:
        self._booting.discard(boot)
        self._refill()

    def _discard(self, entry: _Entry) -> None:
        """Exit ``entry`` in a task the pool owns (its drain waits for it)."""
        self.stats["discarded"] += 1
        fut = asyncio.ensure_future(entry.discard())
        self._discards.add(fut)
        fut.add_done_callback(self._discarded)

    def _discarded(self, fut: asyncio.Future[Any]) -> None:
        self._discards.discard(fut)
        if not fut.cancelled() and fut.exception() is not None and self._open:
            log.warning("a warm substrate could not be exited: %s", fut.exception())

    def _exit_behind(self, cm: AbstractAsyncContextManager[Runtime]) -> bool:
        """Exit a finished rollout's substrate in a task the pool owns, so the rollout
        (and the slot it holds) ends now rather than after its teardown: a container's
        stop and removal is the part of the boot cost booting ahead cannot hide. At most
        ``size`` such exits run at once (beyond that, and for a rollout that raised, the
        rollout exits its own, as before); the pool's drain waits for them and raises the
        first that failed (logged when it fails)."""
        if not self._open or len(self._exits) >= self.size:
            return False
        self.stats["exited_behind"] += 1
        fut = asyncio.ensure_future(
            asyncio.wait_for(cm.__aexit__(None, None, None), _DRAIN_TIMEOUT)
        )
        self._exits.add(fut)
        self._discards.add(fut)
        fut.add_done_callback(self._exited)
        return True

    def _exited(self, fut: asyncio.Future[Any]) -> None:
        self._exits.discard(fut)
        error = None if fut.cancelled() else fut.exception()
        if error is not None:
            self._exit_errors.append(error)
        self._discarded(fut)

    # -- taking ----------------------------------------------------------------------------
    def serving(self, token: Hashable) -> Provider:
        """The provider for the planned row ``token``: its warm substrate, when there is one."""
        return lambda task: _Handout(self, token, task)

    def __call__(self, task: Task, /) -> AbstractAsyncContextManager[Runtime]:
        return _Handout(self, None, task)

    def _take(self, token: Hashable) -> _Entry | None:
        if token is None:
            return None
        self._taken.add(token)
        entry = self._entries.pop(token, None)
        self._refill()  # a slot freed: boot the next planned row
        return entry


class _Handout:
    """``async with`` one row's substrate: the warm one, else booted now."""

    def __init__(self, pool: WarmPool, token: Hashable, task: Task) -> None:
        self.pool = pool
        self.token = token
        self.task = task
        self.cm: AbstractAsyncContextManager[Runtime] | None = None

    async def __aenter__(self) -> Runtime:
        pool = self.pool
        entry = pool._take(self.token)
        if entry is None:
            pool.stats["cold"] += 1
            self.cm = pool.provider(self.task)
            return await self.cm.__aenter__()
        pool.stats["ready" if entry.boot.done() else "booting"] += 1
        try:
            runtime = await asyncio.shield(entry.boot)
        except BaseException:
            if not entry.boot.done() or entry.booted():  # we were cancelled: not its fault
                pool._discard(entry)
            raise
        self.cm = entry.cm
        return runtime

    async def death(self) -> str | None:
        death = getattr(self.cm, "death", None)
        return await death() if death is not None else None

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        if self.cm is None:
            return None
        if et is None and self.pool._exit_behind(self.cm):
            return None
        return await self.cm.__aexit__(et, e, tb)
