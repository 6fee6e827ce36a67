"""The clock of a timed control loop: a robot's (or a sim's under ``--hud-realtime``) ticks on
the wall clock at its control rate, or a sim's ticks in sim time with a fixed inference delay
(``--hud-latency``), deterministic because nothing in it reads the wall clock.

A loop asks :meth:`Clock.tick` before each action and :meth:`Clock.sent` after it; the clock
keeps the period errors and the deadline misses the episode reports.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

__all__ = ["Clock", "SimClock", "TickStats", "WallClock", "percentile", "rounded"]


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]


@dataclass
class TickStats:
    """What the clock saw: how late each tick began (seconds after its deadline); deadline
    misses, the times the env went a whole period or more without a new action (a tick's
    action sent a period late, or ticks skipped to catch up); and the ticks skipped."""

    lateness: list[float] = field(default_factory=list)
    misses: int = 0
    skipped: int = 0

    def summary(self) -> dict[str, float | int | None]:
        ms = [x * 1000.0 for x in self.lateness]
        return {
            "late_ms_p50": rounded(percentile(ms, 0.5)),
            "late_ms_p99": rounded(percentile(ms, 0.99)),
            "late_ms_max": rounded(max(ms) if ms else None),
            "deadline_misses": self.misses,
            "skipped_ticks": self.skipped,
        }


def rounded(value: float | None) -> float | None:
    """``value`` to 3 decimal places (a figure in ms: to the microsecond); None kept."""
    return None if value is None else round(value, 3)


class Clock:
    """Ticks at ``rate`` Hz. :meth:`tick` waits for the next tick's deadline; :meth:`ready`
    says whether an inference started at ``started`` (a tick index) has answered by now."""

    wall: bool = False

    def __init__(self, rate: float) -> None:
        if not rate or rate <= 0 or not math.isfinite(rate):
            raise ValueError(
                f"a timed loop needs a positive control rate, got {rate!r}: set the env "
                "contract's control_rate (env.gym(..., fps=N)) or pass the rate"
            )
        self.period = 1.0 / rate
        self.index = -1  # the tick being run
        self.stats = TickStats()

    async def tick(self) -> int:
        """Wait for the next tick; its index."""
        self.index += 1
        return self.index

    def sent(self) -> None:
        """The tick's action went out."""

    def ticks_since(self, started: int) -> int:
        """Ticks passed since tick ``started`` began (how stale a chunk computed then is)."""
        return self.index - started


class WallClock(Clock):
    """Absolute deadlines on the monotonic clock (no drift from sleep error); a tick that
    begins a whole period late skips the deadlines it missed instead of bursting to
    catch up, as a robot's controller would."""

    wall = True

    def __init__(self, rate: float) -> None:
        super().__init__(rate)
        self._deadline: float | None = None

    async def tick(self) -> int:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._deadline is None:
            self._deadline = now
        else:
            self._deadline += self.period
            if now < self._deadline:
                await asyncio.sleep(self._deadline - now)
                now = loop.time()
            behind = int((now - self._deadline) // self.period)
            if behind > 0:  # re-anchor: the missed deadlines are gone
                self.stats.skipped += behind
                self.stats.misses += 1
                self._deadline += behind * self.period
        self.stats.lateness.append(max(0.0, now - self._deadline))
        self.index += 1
        return self.index

    def sent(self) -> None:
        now = asyncio.get_running_loop().time()
        if self._deadline is not None and now - self._deadline >= self.period:
            self.stats.misses += 1


class SimClock(Clock):
    """Sim time: a tick is one step, nothing waits. An inference takes ``latency`` seconds
    of sim time, i.e. its chunk is usable ``delay`` ticks after the tick it started at,
    whatever the wall clock did meanwhile (so a run is reproducible)."""

    def __init__(self, rate: float, latency: float = 0.0) -> None:
        super().__init__(rate)
        if latency < 0 or not math.isfinite(latency):
            raise ValueError(f"the simulated latency is a time >= 0, got {latency!r}")
        # a latency of exactly k periods is k ticks (not k+1 from float error)
        self.delay = max(0, math.ceil(latency / self.period - 1e-9))

    def arrives(self, started: int) -> int:
        """The tick at which an inference started at tick ``started`` has answered."""
        return started + self.delay


def monotonic() -> float:
    """The clock inference latencies are measured on."""
    return time.monotonic()
