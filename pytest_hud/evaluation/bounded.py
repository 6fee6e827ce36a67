"""Inference on bounded per-row metrics with rows as the units: repeats of a row are averaged first,
then intervals, the paired permutation test and the anytime-valid betting test treat rows as
independent draws. Success is the metric 0/1; a score is any metric with known bounds.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Literal, TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_hud.evaluation.paired_sequential import PairBudget, PairedDecision

__all__ = [
    "BettingSequence",
    "Decision",
    "Direction",
    "PairedBettingTest",
    "PairedScores",
    "betting_interval",
    "design_floor",
    "holm",
    "paired_scores",
    "permutation_interval",
    "permutation_p",
    "row_means",
]

FloatArray = NDArray[np.float64]
Direction = Literal["higher", "lower"]
Decision = PairedDecision

#: Sign patterns enumerated exactly up to this many rows (2**16 patterns); Monte Carlo above.
EXACT_ROWS = 16
#: Random sign patterns past EXACT_ROWS (drawn once from a fixed seed, so a p is reproducible).
FLIPS = 20_000
#: Points of the mean's grid the betting processes run on (the interval's resolution).
GRID = 2001
#: The betting fraction's cap (Waudby-Smith & Ramdas 2024 use 1/2 or 3/4).
CAP = 0.5
#: The paired test's cap on its bet against a difference in [-1, 1].
CAP_TEST = 0.75


def row_means(values: Iterable[tuple[Sequence[object], float]]) -> dict[tuple[object, ...], float]:
    """The mean of each row's repeats: ``values`` are (row key, value) pairs, several per row
    when a row ran repeats; one mean per row is one unit of inference."""
    sums: dict[tuple[object, ...], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for key, value in values:
        cell = sums[tuple(key)]
        cell[0] += float(value)
        cell[1] += 1.0
    return {key: total / count for key, (total, count) in sums.items()}


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha!r}")


def _unit(xs: ArrayLike, low: float, high: float) -> FloatArray:
    """``xs`` mapped from [low, high] onto [0, 1]; a value outside is an error naming it."""
    if not high > low:
        raise ValueError(f"bounds: expected low < high, got [{low}, {high}]")
    x = np.asarray(xs, dtype=np.float64)
    bad = ~np.isfinite(x) | (x < low - 1e-12) | (x > high + 1e-12)
    if bad.any():
        raise ValueError(
            f"expected values in [{low}, {high}], got {float(x[bad][0])!r}; fix: declare the "
            "metric's bounds (an env's grade states them) or clip it where it is computed"
        )
    return np.clip((x - low) / (high - low), 0.0, 1.0)


class BettingSequence:
    """A confidence sequence for the mean of i.i.d. values in [0, 1] (Waudby-Smith & Ramdas
    2024, "Estimating means of bounded random variables by betting", JRSSB: the hedged
    capital process with predictable plug-in bets). Valid at every n at once, so a decision
    read off it after each value keeps its level under any stopping rule; at a fixed n it is
    a valid (conservative) confidence interval."""

    def __init__(self, alpha: float = 0.05, grid: int = GRID) -> None:
        _check_alpha(alpha)
        self.alpha = float(alpha)
        self.m = np.linspace(0.0, 1.0, grid)[1:-1]  # the candidate means (bounds never exclude)
        self.log_up = np.zeros_like(self.m)
        self.log_down = np.zeros_like(self.m)
        self.excluded = np.zeros(self.m.shape, dtype=bool)  # a running intersection
        self.n = 0
        self._sum = 0.0
        self._sq = 0.0  # sum of (x_i - mu_hat_{i-1})^2

    def update(self, x: float) -> None:
        """Add one value in [0, 1]."""
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"expected a value in [0, 1], got {x!r}")
        t = self.n + 1
        mu = (0.5 + self._sum) / t  # the estimates before x (predictable)
        var = (0.25 + self._sq) / t
        lam = math.sqrt(2.0 * math.log(2.0 / self.alpha) / (var * t * math.log1p(t)))
        up = np.minimum(lam, CAP / self.m)
        down = np.minimum(lam, CAP / (1.0 - self.m))
        self.log_up += np.log1p(up * (x - self.m))
        self.log_down += np.log1p(-down * (x - self.m))
        # hedged capital: the average of the two bets' capitals
        capital = np.logaddexp(self.log_up, self.log_down) - math.log(2.0)
        self.excluded |= capital >= math.log(1.0 / self.alpha)
        self.n = t
        self._sum += x
        self._sq += (x - mu) ** 2

    def interval(self) -> tuple[float, float]:
        """The means not excluded so far (their hull), [0, 1] before any value."""
        kept = self.m[~self.excluded]
        if kept.size == 0:  # the grid's resolution: the mean lies between two excluded points
            centre = self._sum / max(self.n, 1)
            return centre, centre
        step = self.m[1] - self.m[0]
        return max(0.0, float(kept[0]) - step), min(1.0, float(kept[-1]) + step)


#: Orders the fixed-n interval averages its capital over (Waudby-Smith & Ramdas 2024, 5.2:
#: the average of valid capitals is valid, and it makes the interval free of the rows' order).
ORDERS = 16


def betting_interval(
    xs: ArrayLike, alpha: float = 0.05, *, low: float = 0.0, high: float = 1.0
) -> tuple[float, float]:
    """A confidence interval for the mean of ``xs`` (i.i.d. rows, values in [low, high])
    without a normal approximation: the means m whose hedged capital, with the fixed-n bets
    of Waudby-Smith & Ramdas (2024) and averaged over :data:`ORDERS` fixed orders of the
    sorted values, stays below 1 / alpha. A function of the values alone, not their order."""
    _check_alpha(alpha)
    x = np.sort(_unit(xs, low, high))
    lo, hi = _betting_unit(tuple(x.tolist()), float(alpha))
    return low + lo * (high - low), low + hi * (high - low)


@lru_cache(maxsize=256)
def _betting_unit(x: tuple[float, ...], alpha: float) -> tuple[float, float]:
    n = len(x)
    if n == 0:
        return 0.0, 1.0
    values = np.asarray(x)
    rng = np.random.default_rng(20261204)
    orders = np.stack([values[rng.permutation(n)] for _ in range(ORDERS)])  # (P, n)
    t = np.arange(1, n + 1)
    before = np.cumsum(orders, axis=1) - orders  # the sum of the values before each one
    mu = (0.5 + before) / t
    dev = np.cumsum((orders - mu) ** 2, axis=1) - (orders - mu) ** 2
    var = (0.25 + dev) / t
    lam = np.sqrt(2.0 * math.log(2.0 / alpha) / (n * var))
    level = math.log(1.0 / alpha)

    def rejects(m: float) -> bool:
        up = np.log1p(np.minimum(lam, CAP / max(m, 1e-12)) * (orders - m)).sum(axis=1)
        down = np.log1p(-np.minimum(lam, CAP / max(1.0 - m, 1e-12)) * (orders - m)).sum(axis=1)
        hedged = np.logaddexp(up, down) - math.log(2.0)
        return bool(np.logaddexp.reduce(hedged) - math.log(ORDERS) >= level)

    centre = float(values.mean())
    if rejects(centre):  # cannot happen for sane alpha; keep the estimate rather than fail
        return centre, centre

    # the capital grows away from the mean: each end is where it crosses the level
    def accepts(m: float) -> bool:
        return not rejects(m)

    return _last_accepted(accepts, centre, 0.0, 50), _last_accepted(accepts, centre, 1.0, 50)


@lru_cache(maxsize=64)
def _signs(n: int) -> FloatArray:
    """The sign patterns the permutation test uses for ``n`` rows: all 2**n up to
    :data:`EXACT_ROWS` rows, else the identity and FLIPS - 1 random ones (fixed seed)."""
    if n <= EXACT_ROWS:
        out = np.array(list(itertools.product((1.0, -1.0), repeat=n)), dtype=np.float64)
    else:
        out = np.random.default_rng(20261204 + n).choice((-1.0, 1.0), size=(FLIPS, n))
        out[0] = 1.0
    out.setflags(write=False)
    return out.reshape(len(out), n)


def permutation_p(diffs: ArrayLike, shift: float = 0.0) -> float:
    """Two-sided sign-flip permutation p-value for "the mean paired difference is ``shift``":
    under the null each row's difference is symmetric about ``shift``, so its sign may be
    flipped; p is the share of sign patterns whose |sum| is at least the observed one
    (exact up to :data:`EXACT_ROWS` rows, Monte Carlo with the identity counted above)."""
    d = np.asarray(diffs, dtype=np.float64) - shift
    if d.size == 0:
        return 1.0
    signs = _signs(d.size)
    observed = abs(float(d.sum()))
    flipped = np.abs(signs @ d)
    return float(np.count_nonzero(flipped >= observed - 1e-12 * max(1.0, observed))) / len(signs)


def permutation_interval(
    diffs: ArrayLike, alpha: float = 0.05, *, low: float = -1.0, high: float = 1.0
) -> tuple[float, float]:
    """The shifts the sign-flip test does not reject at ``alpha``: the interval that agrees
    with :func:`permutation_p` by construction (0 lies outside it exactly when p <= alpha).
    p is non-increasing as the shift moves away from the mean on either side, so each end is
    found by bisection within the differences' bounds."""
    _check_alpha(alpha)
    d = np.asarray(diffs, dtype=np.float64)
    if d.size == 0:
        return low, high
    centre = float(d.mean())

    def accepts(shift: float) -> bool:
        return permutation_p(d, shift) > alpha  # p(centre) = 1

    lo, hi = _last_accepted(accepts, centre, low, 40), _last_accepted(accepts, centre, high, 40)
    if low <= 0.0 <= high and permutation_p(d, 0.0) > alpha:
        # an accepted end is closed: ties at exactly 0 (zero differences) accept 0 itself,
        # which bisection approaches from inside without ever evaluating
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    return lo, hi


def _last_accepted(accepts: Callable[[float], bool], near: float, far: float, steps: int) -> float:
    """``far`` if it is accepted, else the accepted point nearest the boundary between
    ``near`` (accepted) and ``far`` after ``steps`` bisections: for an acceptance region
    that is an interval around ``near``."""
    if accepts(far):
        return far
    for _ in range(steps):
        mid = (near + far) / 2.0
        if accepts(mid):
            near = mid
        else:
            far = mid
    return near


def design_floor(rows: int) -> float:
    """The smallest two-sided p-value a sign-flip (or exact McNemar) test over ``rows``
    paired rows can reach: 2 / 2**rows. Below log2(2 / alpha) rows no outcome is significant."""
    return min(1.0, 2.0 / 2.0**rows) if rows > 0 else 1.0


def holm(pvalues: Mapping[str, float], alpha: float) -> dict[str, bool]:
    """Holm's step-down procedure (Holm 1979): which hypotheses are rejected with the
    family-wise error kept at ``alpha``; uniformly more powerful than Bonferroni's split."""
    _check_alpha(alpha)
    out = dict.fromkeys(pvalues, False)
    ordered = sorted(pvalues.items(), key=lambda kv: kv[1])
    for i, (name, p) in enumerate(ordered):
        if p > alpha / (len(ordered) - i):
            break
        out[name] = True
    return out


class PairedScores(TypedDict):
    """A candidate's per-row paired differences from the reference on one metric
    (:func:`paired_scores`): the means, the mean difference and its interval (the
    permutation test inverted), the test's p, the rows and episodes, the design floor, and
    the verdict at ``alpha`` ("better"/"worse" by the test, "no difference" when the
    interval lies inside +-``min_effect``, else "undecided")."""

    metric: str
    rows: int
    episodes: int
    reference: float | None
    candidate: float | None
    diff: float | None
    diff_ci: list[float]
    p_value: float
    floor: float
    alpha: float
    min_effect: float
    verdict: str


def paired_scores(
    pairs: Sequence[tuple[Sequence[object], float, float]],
    *,
    metric: str = "score",
    direction: Direction = "higher",
    low: float = 0.0,
    high: float = 1.0,
    alpha: float = 0.05,
    min_effect: float = 0.1,
) -> PairedScores:
    """Compare a candidate with the reference on ``pairs`` of (row key, reference value,
    candidate value), one per paired episode: repeats of a row are averaged per row first;
    differences are scaled to the metric's range (so ``min_effect`` is a share of it) and
    signed so that positive is better (``direction="lower"`` for e.g. steps to success)."""
    _check_alpha(alpha)
    ref = row_means((key, a) for key, a, _ in pairs)
    cand = row_means((key, b) for key, _, b in pairs)
    keys = sorted(ref, key=repr)
    a = _unit([ref[k] for k in keys], low, high)
    b = _unit([cand[k] for k in keys], low, high)
    sign = 1.0 if direction == "higher" else -1.0
    d = sign * (b - a)
    n = len(keys)
    p = permutation_p(d)
    lo, hi = permutation_interval(d, alpha)
    verdict = "undecided"
    if n and p <= alpha and d.sum() != 0:
        verdict = "better" if d.sum() > 0 else "worse"
    elif n and -min_effect < lo and hi < min_effect:
        verdict = "no difference"
    scale = high - low
    return {
        "metric": metric,
        "rows": n,
        "episodes": len(pairs),
        "reference": float(low + a.mean() * scale) if n else None,
        "candidate": float(low + b.mean() * scale) if n else None,
        "diff": float(d.mean()) if n else None,
        "diff_ci": [lo, hi],
        "p_value": p,
        "floor": design_floor(n),
        "alpha": alpha,
        "min_effect": min_effect,
        "verdict": verdict,
    }


class PairedBettingTest(PairBudget):
    """An anytime-valid paired test on a bounded metric, fed one row's difference d in
    [-1, 1] at a time (candidate minus reference, scaled, positive better).

    "better"/"worse": two one-sided betting e-processes for E[d] <= 0 and E[d] >= 0, each
    betting a growth-rate-adaptive fraction of its capital (aGRAPA, Waudby-Smith & Ramdas
    2024) and deciding once its capital reaches 2 / alpha. "no difference": a betting
    confidence sequence for E[d] (:class:`BettingSequence`) inside +-``delta``. By Ville's
    inequality each conclusion is wrong with probability <= ``alpha`` under any stopping
    rule, which a fixed-n test read after every row is not. The interface of the binary
    test (``features.ab.paired.PairedSequentialTest``)."""

    def __init__(self, alpha: float = 0.05, delta: float = 0.1, max_pairs: int = 200) -> None:
        _check_alpha(alpha)
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta: expected a difference in (0, 1), got {delta!r}")
        if isinstance(max_pairs, bool) or not isinstance(max_pairs, int) or max_pairs < 1:
            raise ValueError(f"max_pairs: expected a positive int, got {max_pairs!r}")
        self.alpha, self.delta, self.max_pairs = float(alpha), float(delta), max_pairs
        self.sequence = BettingSequence(alpha)
        self.decision: Decision | None = None
        self.decided_at: int | None = None
        self.total = 0.0
        self._sq = 0.0
        self.log_better = 0.0  # log capital of the bet against E[d] <= 0
        self.log_worse = 0.0  # and against E[d] >= 0

    @property
    def pairs(self) -> int:
        return self.sequence.n

    def interval(self) -> tuple[float, float]:
        """The confidence sequence for E[d] now."""
        lo, hi = self.sequence.interval()
        return 2.0 * lo - 1.0, 2.0 * hi - 1.0

    @property
    def e_value(self) -> float:
        """The larger one-sided capital: evidence for a difference (>= 2 / alpha decides)."""
        return math.exp(max(self.log_better, self.log_worse))

    @property
    def reason(self) -> str:
        lo, hi = self.interval()
        mean = self.total / self.pairs if self.pairs else 0.0
        said = (
            f"mean difference {mean:+.3f}, e-value {self.e_value:.3g} "
            f"(decides at {2 / self.alpha:.3g}), anytime-valid CI [{lo:+.3f}, {hi:+.3f}]"
        )
        if self.decision is None:
            return f"undecided after {self.pairs} of {self.max_pairs} pairs ({said})"
        done = f"decided after {self.decided_at} of {self.max_pairs} pairs"
        return f"{done}: {self.decision} ({said})"

    def _bet(self) -> float:
        """aGRAPA's fraction from the rows so far: mean / (variance + mean^2), capped."""
        t = self.pairs
        mean = self.total / (t + 1)  # shrunk towards 0 by one pseudo-row
        second = (self._sq + 1.0) / (t + 1)  # E[d^2], with a unit pseudo-row
        return max(-CAP_TEST, min(CAP_TEST, mean / max(second, 1e-12)))

    def update(self, diff: float) -> Decision | None:
        """Count one row's difference (in [-1, 1], positive: the candidate is better)."""
        if self.pairs >= self.max_pairs:
            raise ValueError(
                f"paired test: expected at most max_pairs={self.max_pairs} pairs, got one "
                "more; fix: stop scheduling once decided or exhausted, or raise max_pairs"
            )
        if not -1.0 <= diff <= 1.0:
            raise ValueError(f"expected a scaled difference in [-1, 1], got {diff!r}")
        bet = self._bet()  # predictable: from the rows before this one
        self.log_better += math.log1p(max(bet, 0.0) * diff)
        self.log_worse += math.log1p(-min(bet, 0.0) * -diff)
        self.sequence.update((diff + 1.0) / 2.0)
        self.total += diff
        self._sq += diff * diff
        if self.decision is None:
            level = math.log(2.0 / self.alpha)
            lo, hi = self.interval()
            if self.log_better >= level:
                self.decision = "better"
            elif self.log_worse >= level:
                self.decision = "worse"
            elif -self.delta < lo and hi < self.delta:
                self.decision = "no difference"
            if self.decision is not None:
                self.decided_at = self.pairs
        return self.decision
