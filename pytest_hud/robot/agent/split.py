"""Split: whether rollouts whose sims step alone run in halves or one batch, decided by measuring
neighbouring windows of each (the answer depends on the machine).
"""

from __future__ import annotations

__all__ = ["WAYS", "Split"]

#: The values of ``--hud-split`` (and ``BatchedAgent(split=...)``).
WAYS = ("auto", "halves", "whole")

#: Chunks per live rollout in one measuring window.
WINDOW = 3
#: Windows on the chosen way between two probes of the other.
REPROBE = 8
#: The probed way must answer this much faster to be chosen (one window is noisy).
MARGIN = 0.05


class Split:
    """The running choice between one batch and halves (see the module docstring).

    ``mode`` fixes the choice: ``"auto"`` (measure), ``"halves"`` or ``"whole"``.
    """

    def __init__(self, mode: str = "auto") -> None:
        if mode not in WAYS:
            raise ValueError(f"split is 'auto', 'halves' or 'whole', got {mode!r}")
        self.mode = mode
        #: Run the next forwards in halves.
        self.halves = mode != "whole"
        #: The way chosen (True: halves); ``halves`` differs from it during a probe.
        self.chosen = self.halves
        #: Rows answered per second per live rollout, by way, as last measured.
        self.rates: dict[bool, float] = {}
        #: Every (halves, rate) measured, oldest first (for reports and tests).
        self.history: list[tuple[bool, float]] = []
        self._skip = 0  # rows still to ignore after the start or a switch
        self._started = False  # a forward was answered: the start is behind
        self._since: float | None = None  # start of the current window
        self._rows = 0  # rows answered in it
        self._last = 0.0  # when its last answer came
        self._longest = (0.0, 0)  # its longest gap between two answers, and the rows after it
        self._windows = 0  # windows on the chosen way since the last probe

    def answered(self, rows: int, now: float, live: int, eligible: bool) -> None:
        """A forward of ``rows`` rows ended at ``now`` with ``live`` rollouts running;
        ``eligible``: every one of them could run in halves (else nothing is measured)."""
        if self.mode != "auto":
            return
        if not eligible or live < 1:
            self._since, self._rows = None, 0
            return
        if not self._started:  # the first chunks carry the rollouts' start: not measured
            self._started = True
            self._skip = live
        if self._skip > 0:
            self._skip -= rows
            return
        if self._since is None:
            self._since, self._last, self._rows, self._longest = now, now, 0, (0.0, 0)
            return
        gap, self._last = now - self._last, now
        self._rows += rows
        if gap > self._longest[0]:
            self._longest = (gap, rows)
        if self._rows < WINDOW * live or now <= self._since:
            return
        rate = self._rate(now - self._since) / live
        self._since, self._rows = None, 0
        self.history.append((self.halves, rate))
        probed = self.halves != self.chosen
        before = self.rates.get(self.chosen)
        self.rates[self.halves] = rate
        if probed:  # the other way's window against the chosen one's just before it
            if before is None or rate > before * (1 + MARGIN):
                self.chosen = self.halves
            self._go(self.chosen, live)
            return
        self._windows += 1
        if self._windows >= REPROBE or (not self.chosen) not in self.rates:
            self._go(not self.chosen, live)

    def _rate(self, elapsed: float) -> float:
        """The window's rows a second, without its longest gap between two answers and
        that answer's rows: one stall of the machine (another process, a collection)
        must not decide the way."""
        gap, rows = self._longest
        if gap < elapsed and rows < self._rows:
            return (self._rows - rows) / (elapsed - gap)
        return self._rows / elapsed

    def _go(self, halves: bool, live: int) -> None:
        """Run the next forwards ``halves`` (or in one batch) from the next chunk on."""
        self._windows = 0
        if halves != self.halves:
            self.halves = halves
            self._skip = live  # one chunk per rollout to settle
