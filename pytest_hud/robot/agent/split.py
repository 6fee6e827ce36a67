"""Split: whether rollouts whose sims step alone run in halves, checked by measuring.

In halves, a forward starts once half of the live rollouts have queued and the other
half steps its sims meanwhile, so the policy does not wait for them; in one batch, every
row waits for the slowest sim, but a forward is paid once per chunk instead of twice.
Which is faster depends on the machine: on a GPU two forwards of 5 rows cost about one
of 10, so the halves win; on one CPU thread a forward's fixed cost (~0.17 s of 0.35 s for
5 rows of the 28.5M diffusion policy here) is paid twice, with 18% more CPU, which loses
wherever the cores are already full. Measured on PushT at W=10 here (bench/suite.py
--ways, one torch thread), the halves were the faster way in every pairing: 40.3 s
against 43.4 s for one batch, 47.5 s against 50.4 s.

So :class:`Split` runs the halves and checks: after one window of chunks it probes one
batch for one window, and keeps one batch only if that answered rows ``MARGIN`` faster
than the halves' window just before it; it probes the other way again every ``REPROBE``
windows (load changes). A probe is compared with the window next to it in time, never
with an old one: the rates drift by 20% over one run here (halves 1.26 -> 0.95 chunks/s
a rollout from the start of a PushT run to its end), so an old window would decide by
when it ran. Rates are rows answered per second and per live rollout (a rollout ending
between windows does not tip it), over ``WINDOW`` chunks per live rollout, not counting
the chunk after a switch (the two halves settle out of phase over one chunk). Ties keep
the halves: the policy stays busy.
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
        self._skip = 0  # rows still to ignore after a switch
        self._since: float | None = None  # start of the current window
        self._rows = 0  # rows answered in it
        self._windows = 0  # windows on the chosen way since the last probe

    def answered(self, rows: int, now: float, live: int, eligible: bool) -> None:
        """A forward of ``rows`` rows ended at ``now`` with ``live`` rollouts running;
        ``eligible``: every one of them could run in halves (else nothing is measured)."""
        if self.mode != "auto":
            return
        if not eligible or live < 1:
            self._since, self._rows = None, 0
            return
        if self._skip > 0:
            self._skip -= rows
            return
        if self._since is None:
            self._since, self._rows = now, 0
            return
        self._rows += rows
        if self._rows < WINDOW * live or now <= self._since:
            return
        rate = self._rows / (now - self._since) / live
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

    def _go(self, halves: bool, live: int) -> None:
        """Run the next forwards ``halves`` (or in one batch) from the next chunk on."""
        self._windows = 0
        if halves != self.halves:
            self.halves = halves
            self._skip = live  # one chunk per rollout to settle
