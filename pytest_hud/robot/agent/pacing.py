"""Pacing: a batch waits for missing rollouts predicted to ask within one forward's time
(:class:`Arrivals`), since starting without them costs a second forward.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable

__all__ = ["CURRENT", "SLACK", "Arrivals", "Rollout"]

#: How fast the running means follow new measurements.
_WEIGHT = 0.2


class Rollout:
    """One live rollout as the batcher sees it: when its last chunk was answered, and how
    long it takes to step a chunk and ask again (a running mean)."""

    __slots__ = ("answered_at", "step_s")

    def __init__(self) -> None:
        self.answered_at: float | None = None
        self.step_s: float | None = None


#: The rollout whose task is running (set for the length of its episode).
CURRENT: contextvars.ContextVar[Rollout | None] = contextvars.ContextVar(
    "pytest_hud_batched_rollout", default=None
)

#: A missing rollout is waited for until 1.5 times its usual stepping time has passed
#: since its last answer: the sim that is behind is the slower one, and on a busy machine
#: a chunk's stepping varies by tens of percent from one chunk to the next.
SLACK = 1.5


def _mean(old: float | None, new: float) -> float:
    return new if old is None else old + _WEIGHT * (new - old)


class Arrivals:
    """The running means behind :meth:`hold_until`."""

    def __init__(self) -> None:
        self.live: set[Rollout] = set()
        self.step_s: float | None = None  # answered -> asks again, over all rollouts
        self.forward_s: float | None = None

    def asked(self, rollout: Rollout | None, now: float) -> None:
        if rollout is not None and rollout.answered_at is not None:
            took = now - rollout.answered_at
            rollout.step_s = _mean(rollout.step_s, took)
            self.step_s = _mean(self.step_s, took)

    def answered(self, rollouts: Iterable[Rollout | None], seconds: float, now: float) -> None:
        self.forward_s = _mean(self.forward_s, seconds)
        for rollout in rollouts:
            if rollout is not None:
                rollout.answered_at = now

    def hold_until(self, queued: Iterable[Rollout | None], now: float) -> float | None:
        """Until when to wait for the live rollouts not in ``queued``; None: do not wait
        beyond the fixed window (one is not predictable, or would come too late)."""
        if self.step_s is None or self.forward_s is None:
            return None
        waiting = set(queued)
        latest = now
        for rollout in self.live - waiting:
            if rollout.answered_at is None:
                return None
            step = rollout.step_s if rollout.step_s is not None else self.step_s
            latest = max(latest, rollout.answered_at + SLACK * step)
        if latest - now > self.forward_s:
            return None
        return latest
