"""How many rollouts one substrate can take at once, asked over its control channel.

An env server reports, per env, the fewest slots among its robot endpoints (``envs``
-> ``capacity``). Shared leased ``width`` rollouts to every substrate regardless: with
the examples' one-slot sims, ``--hud-shared=8`` errored 7 of 8 rollouts (``sim reset()
failed: all 1 slots are claimed``, issue 12 #3). :class:`Gate` is the lease limit that
starts at one (the lease that boots the substrate and learns its capacity) and then
opens to ``min(width, capacity)``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pytest_hud.runtime.control import ControlClient
from pytest_hud.runtime.errors import ControlError
from pytest_hud.runtime.task import Task

__all__ = ["Gate", "substrate_capacity"]


async def substrate_capacity(runtime: Any, task: Task, timeout: float = 30.0) -> int | None:
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


class Gate:
    """At most ``limit`` holders at once; the limit can change while others wait."""

    def __init__(self, limit: int = 1) -> None:
        self.limit = limit
        self.sized = False  # whether the limit came from the substrate's capacity
        self._active = 0
        self._cond = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(lambda: self._active < self.limit)
            self._active += 1
        try:
            yield
        finally:
            async with self._cond:
                self._active -= 1
                self._cond.notify_all()

    async def resize(self, limit: int) -> None:
        async with self._cond:
            self.limit, self.sized = max(1, limit), True
            self._cond.notify_all()
