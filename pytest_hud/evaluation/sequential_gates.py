"""Anytime-valid sequential gates: :class:`ThresholdGate` (beta-mixture tests against the bar) and
:class:`BaselineGate` (TRI's STEP on seed-paired outcomes), deciding after each episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pytest_hud.evaluation.mixture import boundaries

__all__ = [
    "BaselineGate",
    "Decision",
    "FixedThresholdGate",
    "ThresholdGate",
    "Verdict",
    "fixed_n_for_power",
]


class Verdict(StrEnum):
    UNDECIDED = "undecided"
    ABOVE = "above"  # threshold gate: rate above the bar
    BELOW = "below"  # threshold gate: rate below the bar
    WORSE = "worse"  # baseline gate: candidate worse than baseline
    BETTER = "better"  # baseline gate: candidate better than baseline


@dataclass(frozen=True)
class Decision:
    """A gate's state after ``episodes`` of ``n_max``: ``successes`` counts the candidate's."""

    verdict: Verdict
    successes: int
    episodes: int
    n_max: int
    decided_at: int | None = None

    @property
    def decided(self) -> bool:
        return self.verdict is not Verdict.UNDECIDED

    @property
    def exhausted(self) -> bool:
        """``n_max`` episodes spent without a decision: not distinguishable at alpha."""
        return not self.decided and self.episodes >= self.n_max

    @property
    def reason(self) -> str:
        """The skip reason for the remaining repeats, e.g. "decided after 9 of 200 episodes"."""
        if self.decided:
            return (
                f"decided after {self.decided_at} of {self.n_max} episodes: "
                f"{self.verdict.value} ({self.successes}/{self.episodes} successes)"
            )
        return f"undecided after {self.episodes} of {self.n_max} episodes"


def _check(alpha: float, n_max: int) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha!r}")
    if isinstance(n_max, bool) or not isinstance(n_max, int | np.integer) or n_max < 1:
        raise ValueError(f"n_max: expected a positive int of episodes, got {n_max!r}")


def _check_bar(bar: float) -> None:
    if not 0.0 < bar < 1.0:
        raise ValueError(f"bar: expected a success rate strictly in (0, 1), got {bar!r}")


class _Gate:
    """What both gates share: counts, a sticky verdict, and the n_max guard."""

    kind = "gate"

    def __init__(self, alpha: float, n_max: int) -> None:
        _check(alpha, n_max)
        self.alpha, self.n_max = float(alpha), int(n_max)
        self.successes = self.episodes = 0
        self._verdict: Verdict = Verdict.UNDECIDED
        self._at: int | None = None

    @property
    def decision(self) -> Decision:
        return Decision(self._verdict, self.successes, self.episodes, self.n_max, self._at)

    def _count(self, success: bool) -> bool:
        """Count one more episode; True while undecided (a verdict may still be reached)."""
        if self.episodes >= self.n_max:
            raise ValueError(
                f"{self.kind}: expected at most n_max={self.n_max} episodes, got one more; "
                "fix: stop scheduling once decision.exhausted or raise n_max"
            )
        self.episodes += 1
        self.successes += bool(success)
        return self._verdict is Verdict.UNDECIDED

    def _decide(self, verdict: Verdict) -> None:
        self._verdict, self._at = verdict, self.episodes


class ThresholdGate(_Gate):
    """Anytime-valid test of one task's success rate against ``bar`` (see the module doc).

    ``exact`` (default) calibrates the boundary to exactly alpha/2 a side within n_max
    (see :mod:`pytest_hud.evaluation.mixture`); ``exact=False`` keeps Ville's 2/alpha,
    valid at any horizon and more conservative.

    ``update`` after each episode; the verdict is sticky once reached (episodes already
    in flight still count toward ``successes``/``episodes``).
    """

    kind = "threshold gate"

    def __init__(
        self, bar: float, alpha: float = 0.05, n_max: int = 200, *, exact: bool = True
    ) -> None:
        _check_bar(bar)
        super().__init__(alpha, n_max)
        self.bar = float(bar)
        self.upper, self.lower = boundaries(self.bar, self.alpha, self.n_max, exact)

    def update(self, success: bool) -> Decision:
        if self._count(success):
            n, k = self.episodes, self.successes
            if k >= self.upper[n]:
                self._decide(Verdict.ABOVE)
            elif k <= self.lower[n]:
                self._decide(Verdict.BELOW)
        return self.decision

    def run(self, outcomes: NDArray[np.bool_]) -> tuple[NDArray[np.int8], NDArray[np.int64]]:
        """Vectorised: for each row of ``outcomes`` (runs x n_max), the verdict
        (+1 above, -1 below, 0 undecided) and the episodes spent to reach it."""
        runs = np.asarray(outcomes, dtype=bool)
        if runs.ndim != 2 or runs.shape[1] != self.n_max:
            raise ValueError(f"outcomes: expected shape (runs, {self.n_max}), got {runs.shape}")
        k = np.cumsum(runs, axis=1)
        up = k >= self.upper[1:]
        down = k <= self.lower[1:]
        hit = up | down
        stop = np.where(hit.any(axis=1), np.argmax(hit, axis=1), self.n_max - 1)
        rows = np.arange(len(runs))
        verdict = np.where(up[rows, stop], 1, np.where(down[rows, stop], -1, 0)).astype(np.int8)
        return verdict, (stop + 1).astype(np.int64)


class FixedThresholdGate:
    """The fixed-n exact binomial test at the same alpha: after exactly ``n`` episodes,
    ABOVE if P(X >= k | bar) <= alpha/2, BELOW if P(X <= k | bar) <= alpha/2."""

    def __init__(self, bar: float, alpha: float, n: int) -> None:
        _check_bar(bar)
        _check(alpha, n)
        from scipy.stats import binom

        self.bar, self.alpha, self.n = float(bar), float(alpha), int(n)
        ks = np.arange(n + 1)
        above = binom.sf(ks - 1, n, bar) <= alpha / 2
        below = binom.cdf(ks, n, bar) <= alpha / 2
        self.k_above = int(np.argmax(above)) if above.any() else n + 1
        self.k_below = int(n - np.argmax(below[::-1])) if below.any() else -1

    def decide(self, successes: int) -> Decision:
        if not 0 <= successes <= self.n:
            raise ValueError(f"successes: expected 0..{self.n}, got {successes}")
        verdict = Verdict.UNDECIDED
        if successes >= self.k_above:
            verdict = Verdict.ABOVE
        elif successes <= self.k_below:
            verdict = Verdict.BELOW
        at = self.n if verdict is not Verdict.UNDECIDED else None
        return Decision(verdict, successes, self.n, self.n, at)

    def power(self, p: float) -> float:
        """Probability of the right decision when the true rate is ``p`` (the error
        rate, either side, when ``p == bar``)."""
        from scipy.stats import binom

        up = float(binom.sf(self.k_above - 1, self.n, p))
        down = float(binom.cdf(self.k_below, self.n, p))
        if p > self.bar:
            return up
        if p < self.bar:
            return down
        return up + down


def fixed_n_for_power(bar: float, alpha: float, p: float, power: float, n_limit: int = 5000) -> int:
    """The least n whose exact test decides correctly at true rate ``p`` with at least
    ``power`` (exact power is saw-toothed in n; this is the first n that reaches it)."""
    if p == bar:
        raise ValueError("p: expected an alternative different from the bar, got the bar")
    for n in range(1, n_limit + 1):
        if FixedThresholdGate(bar, alpha, n).power(p) >= power:
            return n
    raise ValueError(f"no n <= {n_limit} reaches power {power} at p={p} (bar {bar})")


class BaselineGate(_Gate):
    """Paired sequential comparison with a baseline: WORSE / BETTER / UNDECIDED.

    Each update is one seed run by both checkpoints. Mirrored STEP in "comparison"
    mode: P(WORSE) <= alpha when the candidate is at least as good, P(BETTER) <= alpha
    when it is at most as good. Reaching ``n_max`` undecided means no significant
    change. ``seed`` fixes STEP's randomised boundary draws (reproducible verdicts).
    """

    kind = "baseline gate"

    def __init__(
        self, alpha: float = 0.05, n_max: int = 200, *, cache: Path | None = None, seed: int = 0
    ) -> None:
        super().__init__(alpha, n_max)
        from pytest_hud.evaluation.step_tables import load_table

        self._test = _step_test(load_table(self.n_max, self.alpha, cache), n_max, alpha, seed)
        self.base_successes = 0

    def update(self, base: bool, new: bool) -> Decision:
        """One seed's pair of outcomes: the baseline's and the candidate's."""
        undecided = self._count(new)
        self.base_successes += bool(base)
        result = self._test.step(int(bool(base)), int(bool(new)))
        if undecided:
            name = result.decision.name
            if name == "AcceptAlternative":  # alternative: p_base > p_new
                self._decide(Verdict.WORSE)
            elif name == "AcceptNull":  # mirrored: p_new > p_base significantly
                self._decide(Verdict.BETTER)
        return self.decision


def _step_test(table: list[object], n_max: int, alpha: float, seed: int) -> Any:
    """A MirroredStepTest fed ``table``, so the library never reads or writes its package
    folder (the read-only install problem, see step_tables)."""
    from sequentialized_barnard_tests import Hypothesis, MirroredStepTest

    class _GivenTable(MirroredStepTest):  # type: ignore[misc]
        def load_existing_policy(self, verbose: bool = False) -> None:
            self.policy = table
            self.need_new_policy = False
            self.policy_path = "<pytest_hud.evaluation.step_tables>"
            self.reset(verbose)

    return _GivenTable(Hypothesis.P0MoreThanP1, n_max, alpha, random_seed=seed)
