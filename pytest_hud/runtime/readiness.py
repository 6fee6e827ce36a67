"""Wait until a fresh substrate's env server answers a real control ``ping``: a published port or
tunnel accepts before the server listens, so an open port proves nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from pytest_hud.errors import ControlError, HudError
from pytest_hud.runtime.control import ControlClient
from pytest_hud.runtime.provider import Runtime

__all__ = ["NotReady", "ping", "wait_until_ping"]


class NotReady(HudError, TimeoutError):
    """No ping answered before the deadline; ``last`` says what the last attempt got."""

    def __init__(self, last: str) -> None:
        super().__init__(last)
        self.last = last


async def ping(runtime: Runtime, timeout: float) -> str | None:
    """None when the env server answered a control ping within ``timeout``, else why not."""
    try:
        async with asyncio.timeout(timeout):
            control = await ControlClient.connect(runtime, timeout=timeout)
            try:
                await control.ping(timeout=timeout)
            finally:
                with contextlib.suppress(Exception):
                    await control.close()
        return None
    except (ControlError, OSError, TimeoutError) as exc:
        return str(exc) or type(exc).__name__


async def wait_until_ping(
    probe: Callable[[], Awaitable[Runtime | None]],
    *,
    deadline: float | None = None,
    delay: float = 0.05,
    max_delay: float = 0.5,
    factor: float = 1.5,
    attempt: float = 5.0,
) -> Runtime:
    """Poll ``probe()`` and ping what it returns until one ping is answered.

    ``deadline`` is on the running loop's clock (None: the caller bounds the wait, e.g.
    with ``asyncio.timeout``); past it :class:`NotReady` is raised. Between attempts the
    delay grows by ``factor`` up to ``max_delay``.
    """
    loop = asyncio.get_running_loop()
    last = "no reply yet"
    while True:
        runtime = await probe()
        remaining = float("inf") if deadline is None else deadline - loop.time()
        if runtime is not None and remaining > 0:
            why = await ping(runtime, min(attempt, remaining))
            if why is None:
                return runtime
            last = why  # docker-proxy accepts and hangs up until the server listens
        if deadline is not None and loop.time() >= deadline:
            raise NotReady(last)
        pause = delay if deadline is None else min(delay, max(0.0, deadline - loop.time()))
        await asyncio.sleep(pause)
        delay = min(delay * factor, max_delay)
