"""The paired sequential test: is candidate B better or worse than reference A, or within
``delta``, deciding after each pair. Only discordant pairs count; rejection uses beta-mixture
tests (:mod:`.mixture`) and futility only removes rejections, so alpha holds under any
stopping.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_hud.evaluation.mixture import boundaries

__all__ = [
    "BETTER",
    "DECISIONS",
    "NO_DIFFERENCE",
    "UNDECIDED",
    "WORSE",
    "PairBudget",
    "PairedDecision",
    "PairedSequentialTest",
    "fixed_n_pairs",
    "mcnemar_power",
]

PairedDecision = Literal["better", "worse", "no difference"]

#: codes of :meth:`PairedSequentialTest.run`
UNDECIDED, BETTER, WORSE, NO_DIFFERENCE = 0, 1, -1, 2
DECISIONS: dict[int, PairedDecision | None] = {
    UNDECIDED: None,
    BETTER: "better",
    WORSE: "worse",
    NO_DIFFERENCE: "no difference",
}

IntArray = NDArray[np.int64]


def _check(alpha: float, beta: float, delta: float, max_pairs: int) -> None:
    for name, level in (("alpha", alpha), ("beta", beta)):
        if not 0.0 < level < 1.0:
            raise ValueError(f"{name}: expected an error rate in (0, 1), got {level!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(
            f"delta: expected an effect 2q - 1 in (0, 1) (q: B's share of the discordant "
            f"pairs), got {delta!r}"
        )
    if isinstance(max_pairs, bool) or not isinstance(max_pairs, int | np.integer):
        raise ValueError(f"max_pairs: expected a positive int, got {max_pairs!r}")
    if max_pairs < 1:
        raise ValueError(f"max_pairs: expected a positive int, got {max_pairs!r}")


def _futility(beta: float, delta: float, n: int) -> tuple[IntArray, IntArray]:
    """Per m in 0..n the range lo..hi of k where both likelihood ratios (q1 and 1 - q1
    against 1/2) are <= beta (empty when lo > hi).

    log LR(q1) = m log(2 (1 - q1)) + k log(q1 / (1 - q1)) <= log beta  <=>  k <= hi(m);
    the mirror gives k >= m - hi(m).
    """
    q1 = (1.0 + delta) / 2.0
    m = np.arange(n + 1, dtype=np.float64)
    edge = (math.log(beta) - m * math.log(2.0 * (1.0 - q1))) / math.log(q1 / (1.0 - q1))
    hi = np.floor(edge + 1e-9).astype(np.int64)  # the tie LR == beta counts as futile
    return np.arange(n + 1, dtype=np.int64) - hi, hi


class PairBudget:
    """What a live paired test shares: pairs seen, the sticky decision and when it came,
    at most ``max_pairs`` pairs."""

    max_pairs: int
    decision: PairedDecision | None
    decided_at: int | None

    @property
    def pairs(self) -> int:
        raise NotImplementedError

    @property
    def pairs_used(self) -> int:
        """The pairs it took to decide (all pairs seen while undecided)."""
        return self.decided_at if self.decided_at is not None else self.pairs

    @property
    def exhausted(self) -> bool:
        """``max_pairs`` seen undecided: the pairs did not suffice to tell."""
        return self.decision is None and self.pairs >= self.max_pairs


class PairedSequentialTest(PairBudget):
    """Anytime-valid paired test of candidate B against reference A (see the module doc).

    ``update(a, b)`` after each pair (A succeeded, B succeeded on the same row and seed);
    ``decision`` is None until decided, then "better", "worse" or "no difference", and
    sticks (pairs still in flight are counted, they do not change it). ``pairs_used``:
    the pairs it took to decide (all pairs seen while undecided). At most ``max_pairs``
    pairs; reaching them undecided (``exhausted``) means the pairs did not suffice to tell.
    """

    def __init__(
        self,
        alpha: float = 0.05,
        beta: float = 0.2,
        delta: float = 0.5,
        max_pairs: int = 200,
        *,
        exact: bool = True,
    ) -> None:
        _check(alpha, beta, delta, max_pairs)
        self.alpha, self.beta, self.delta = float(alpha), float(beta), float(delta)
        self.max_pairs, self.exact = int(max_pairs), exact
        self.upper, self.lower = boundaries(0.5, self.alpha, self.max_pairs, exact)
        self.futile_lo, self.futile_hi = _futility(self.beta, self.delta, self.max_pairs)
        self.both = self.a_only = self.b_only = self.neither = 0
        self.decision: PairedDecision | None = None
        self.decided_at: int | None = None

    @property
    def pairs(self) -> int:
        """Every pair seen, including those finished after the decision."""
        return self.both + self.a_only + self.b_only + self.neither

    @property
    def reason(self) -> str:
        """e.g. "decided after 14 of 200 pairs: better (B won 9 of 9 discordant pairs)"."""
        won = f"B won {self.b_only} of {self.a_only + self.b_only} discordant pairs"
        if self.decision is None:
            return f"undecided after {self.pairs} of {self.max_pairs} pairs ({won})"
        return f"decided after {self.decided_at} of {self.max_pairs} pairs: {self.decision} ({won})"

    def codes(self, m: ArrayLike, k: ArrayLike) -> NDArray[np.int8]:
        """The decision code (see DECISIONS) at ``m`` discordant pairs, ``k`` won by B;
        rejection takes precedence where both boundaries are met."""
        m, k = np.asarray(m, dtype=np.int64), np.asarray(k, dtype=np.int64)
        futile = (k >= self.futile_lo[m]) & (k <= self.futile_hi[m])
        code = np.where(futile, NO_DIFFERENCE, UNDECIDED)
        code = np.where(k <= self.lower[m], WORSE, code)
        return np.where(k >= self.upper[m], BETTER, code).astype(np.int8)

    def update(self, a: bool, b: bool) -> PairedDecision | None:
        """Count one pair: A's and B's outcome on the same row and seed."""
        if self.pairs >= self.max_pairs:
            raise ValueError(
                f"paired test: expected at most max_pairs={self.max_pairs} pairs, got one "
                "more; fix: stop scheduling once decided or exhausted, or raise max_pairs"
            )
        a, b = bool(a), bool(b)
        if a and b:
            self.both += 1
        elif a:
            self.a_only += 1
        elif b:
            self.b_only += 1
        else:
            self.neither += 1
        if self.decision is None and a != b:
            code = int(self.codes(self.a_only + self.b_only, self.b_only))
            if code != UNDECIDED:
                self.decision, self.decided_at = DECISIONS[code], self.pairs
        return self.decision

    def run(
        self, a: NDArray[np.bool_], b: NDArray[np.bool_]
    ) -> tuple[NDArray[np.int8], NDArray[np.int64]]:
        """Vectorised, for simulations: each row of ``a``/``b`` (sessions x pairs, at most
        ``max_pairs`` columns) is one fresh test; returns its decision code (DECISIONS)
        and the pairs it used. This object's own counts are not touched."""
        a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
        if a.shape != b.shape or a.ndim != 2 or not 1 <= a.shape[1] <= self.max_pairs:
            raise ValueError(
                f"a, b: expected two arrays of shape (sessions, <= {self.max_pairs}), "
                f"got {a.shape} and {b.shape}"
            )
        m = np.cumsum(a != b, axis=1)
        k = np.cumsum(b & ~a, axis=1)
        code = self.codes(m, k)
        hit = code != UNDECIDED
        stop = np.where(hit.any(axis=1), np.argmax(hit, axis=1), a.shape[1] - 1)
        rows = np.arange(len(a))
        return code[rows, stop], (stop + 1).astype(np.int64)


@lru_cache(maxsize=8)
def _critical(alpha: float, m_max: int) -> IntArray:
    """Per m in 0..m_max: the least k (of m discordant pairs won by B) at which the exact
    two-sided McNemar p-value ``2 P(X <= m - k)``, X ~ Bin(m, 1/2), is below alpha
    (m + 1: none). It is ``m - j`` for the greatest j with P(X <= j) < alpha / 2."""
    from scipy.stats import binom

    m = np.arange(m_max + 1)
    j = binom.ppf(alpha / 2.0, m, 0.5).astype(np.int64) - 1
    # ppf's float rounding at an exact tie: step j down until P(X <= j) < alpha / 2 holds
    while np.any(bad := (j >= 0) & (binom.cdf(j, m, 0.5) >= alpha / 2.0)):
        j = np.where(bad, j - 1, j)
    return np.where(j >= 0, m - j, m + 1).astype(np.int64)


def _share(alpha: float, delta: float, discordance: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha!r}")
    if not 0.0 < discordance <= 1.0:
        raise ValueError(f"discordance: expected P(arms disagree) in (0, 1], got {discordance!r}")
    if not 0.0 < delta <= 1.0:
        raise ValueError(f"delta: expected an effect 2q - 1 in (0, 1], got {delta!r}")
    return (1.0 + delta) / 2.0


def _power_terms(alpha: float, q: float, m_max: int) -> NDArray[np.float64]:
    from scipy.stats import binom

    m = np.arange(m_max + 1)
    return np.asarray(binom.sf(_critical(alpha, m_max) - 1, m, q), dtype=np.float64)


def mcnemar_power(n: int, alpha: float, delta: float, discordance: float) -> float:
    """The probability that the exact two-sided McNemar test at ``alpha`` after ``n`` pairs
    decides "better" when the arms disagree on a pair with probability ``discordance`` and
    B wins a disagreement with probability q = (1 + delta) / 2."""
    from scipy.stats import binom

    q = _share(alpha, delta, discordance)
    m = np.arange(n + 1)
    return float(binom.pmf(m, n, discordance) @ _power_terms(alpha, q, n))


def fixed_n_pairs(
    alpha: float, beta: float, delta: float, discordance: float, *, n_limit: int = 10_000
) -> int:
    """The least number of pairs at which the fixed-n exact McNemar test (two-sided, at
    ``alpha``) decides "better" with probability >= 1 - ``beta`` at the effect ``delta``
    (B's discordant share (1 + delta) / 2) and ``discordance``: the fixed design of equal
    power the sequential test is measured against. Exact power is saw-toothed in n; this
    is the first n that reaches it."""
    from scipy.stats import binom

    if not 0.0 < beta < 1.0:
        raise ValueError(f"beta: expected an error rate in (0, 1), got {beta!r}")
    q = _share(alpha, delta, discordance)
    terms = _power_terms(alpha, q, n_limit)
    for n in range(1, n_limit + 1):
        if float(binom.pmf(np.arange(n + 1), n, discordance) @ terms[: n + 1]) >= 1.0 - beta:
            return n
    raise ValueError(
        f"no n <= {n_limit} pairs reaches power {1 - beta:.3g} at delta={delta}, "
        f"discordance={discordance}; fix: a larger effect or n_limit"
    )
