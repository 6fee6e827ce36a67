"""Pacing: how long a batch may wait for the live rollouts that have not queued yet.

A rollout that runs a chunk of actions asks the policy again once its sim has stepped
them. Rollouts on different sims (``--hud-shared`` over sims of fewer slots than the
width, or several vectorized substrates) reach that point at different times, and a
fixed wait (``max_wait_s``, 50 ms) then splits every forward in two for good: the half
that arrives first runs alone, the other half steps meanwhile and arrives while the
forward runs, so it runs alone next. Measured on PushT (28.5M diffusion, one torch
thread, 2 sims of 5 copies on 2 cores): 76 forwards of 5 rows and a 41.0 s episode
against 37 forwards of 10 and 31.9 s once each forward waited for the other half.

:class:`Arrivals` predicts when a missing rollout will ask: when its last chunk was
answered plus how long rollouts take to step a chunk (a running mean of what was seen).
A batch waits for the missing rollouts when every one of them is predicted to ask within
one forward's time (a running mean too): starting without them would make them wait that
long anyway and then cost a second forward. Otherwise it keeps the fixed wait.
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
