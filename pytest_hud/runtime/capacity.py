"""How many rollouts one substrate can take at once (its env's fewest robot slots), and
:class:`Seats`, which seats leases on a key's substrates within it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack

from pytest_hud.errors import ControlError
from pytest_hud.runtime.control import ControlClient
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.task import Task

__all__ = ["Seats", "Substrate", "substrate_capacity"]


async def substrate_capacity(
    runtime: Runtime | str, task: Task, timeout: float = 30.0
) -> int | None:
    """The sessions of ``task.env`` the substrate serves at once (None: no bound known,
    e.g. an env without a robot endpoint, or a server that does not report it)."""
    control = await ControlClient.connect(runtime, timeout=timeout)
    async with control:
        try:
            envs = await control.call("envs", timeout=timeout)
        except ControlError:
            return None
    value = (envs.get(task.env) or {}).get("capacity") if isinstance(envs, dict) else None
    return int(value) if isinstance(value, int) and value > 0 else None


class Substrate:
    """One shared substrate: its runtime while up, and how many leases it seats."""

    def __init__(self) -> None:
        self.limit = 1  # seats: one (the lease that boots it) until it reports capacity
        self.sized = False  # whether the limit came from the substrate's capacity
        self.seated = 0
        self.boot_lock = asyncio.Lock()
        self.runtime: Runtime | None = None
        self.stack: AsyncExitStack | None = None
        #: the provider's context manager (may know ``death()``)
        self.provisioned: AbstractAsyncContextManager[Runtime] | None = None
        self.leases = 0
        self.booted_at = 0.0
        self.recycle = False

    async def teardown(self) -> None:
        stack, self.stack, self.runtime = self.stack, None, None
        self.recycle = False
        if stack is not None:
            await stack.aclose()


class Seats:
    """The substrates of one key and who sits where: at most ``width`` leases in all,
    none past a substrate's limit. A lease takes a free seat on an existing substrate;
    only when every substrate is sized and full does it add one (so no second boot
    starts while the first could still turn out to seat everyone)."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.subs: list[Substrate] = []
        self._cond = asyncio.Condition()

    def _free(self) -> Substrate | None:
        """A substrate with a free seat (a new one when all are sized and full), or None."""
        if sum(sub.seated for sub in self.subs) >= self.width:
            return None
        for sub in self.subs:
            if sub.seated < sub.limit:
                return sub
        if all(sub.sized for sub in self.subs):
            self.subs.append(Substrate())
            return self.subs[-1]
        return None

    @contextlib.asynccontextmanager
    async def seat(self) -> AsyncIterator[Substrate]:
        async with self._cond:
            while (sub := self._free()) is None:
                await self._cond.wait()
            sub.seated += 1
        try:
            yield sub
        finally:
            async with self._cond:
                sub.seated -= 1
                self._cond.notify_all()

    async def resize(self, sub: Substrate, limit: int) -> None:
        async with self._cond:
            sub.limit, sub.sized = max(1, limit), True
            self._cond.notify_all()
