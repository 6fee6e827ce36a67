"""Split: whether rollouts whose sims step alone run in halves, chosen by measuring both.

In halves, a forward starts once half of the live rollouts have queued and the other
half steps its sims meanwhile, so the policy does not wait for them; in one batch, every
row waits for the slowest sim, but a forward is paid once per chunk instead of twice.
Which is faster depends on the machine: on a GPU two forwards of 5 rows cost about one
of 10, so the halves win; on one CPU thread a forward's fixed cost (~0.17 s of 0.35 s for
5 rows of the 28.5M diffusion policy here) is paid twice and the two came out even on
PushT at W=10 (40.8 s against 40.6 s, three interleaved runs), the halves using 18% more
CPU, which loses wherever the cores are already full.

So :class:`Split` measures: it runs one batch for a window of chunks, then the halves
for one, keeps whichever answered rows faster, and probes the other again now and then
(machine load changes). Rates are rows answered per second and per live
rollout (so a rollout ending between windows does not tip the choice), over a window of
``WINDOW`` chunks per live rollout, not counting the chunk after a switch (the two
halves settle out of phase over one chunk). Ties keep the way running now.
"""

from __future__ import annotations

__all__ = ["Split"]

#: Chunks per live rollout in one measuring window.
WINDOW = 3
#: Windows on the chosen way between two probes of the other.
REPROBE = 8
#: The other way must answer this much faster to be chosen (noise between windows).
MARGIN = 0.03


class Split:
    """The running choice between one batch and halves (see the module docstring).

    ``mode`` fixes the choice: ``"auto"`` (measure), ``"halves"`` or ``"whole"``.
    """

    def __init__(self, mode: str = "auto") -> None:
        if mode not in ("auto", "halves", "whole"):
            raise ValueError(f"split is 'auto', 'halves' or 'whole', got {mode!r}")
        self.mode = mode
        #: Run the next forwards in halves.
        self.halves = mode == "halves"
        #: Rows answered per second per live rollout, by way (True: halves), as last
        #: measured.
        self.rates: dict[bool, float] = {}
        #: Every (halves, rate) measured, oldest first (for reports and tests).
        self.history: list[tuple[bool, float]] = []
        self._skip = 0  # rows still to ignore after a switch
        self._since: float | None = None  # start of the current window
        self._rows = 0  # rows answered in it
        self._chosen_windows = 0  # windows on the chosen way since the last probe

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
        self.rates[self.halves] = rate
        self.history.append((self.halves, rate))
        self._since, self._rows = None, 0
        self._decide(live)

    def _decide(self, live: int) -> None:
        other = not self.halves
        if other not in self.rates:  # never tried: probe it now
            self._switch(live)
            return
        mine, theirs = self.rates[self.halves], self.rates[other]
        if theirs > mine * (1 + MARGIN):  # the other way was faster when last measured
            self._switch(live)
            self._chosen_windows = 0
            return
        self._chosen_windows += 1
        if self._chosen_windows >= REPROBE:  # load changes: measure the other way again
            self._chosen_windows = 0
            self._switch(live)

    def _switch(self, live: int) -> None:
        self.halves = not self.halves
        self._skip = live  # one chunk per rollout to settle
