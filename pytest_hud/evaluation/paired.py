"""Paired A/B statistics (:func:`summarize_pairs`: Wilson, Newcombe, exact McNemar) and the
re-exported sequential test. Pure functions of outcomes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import NormalDist
from typing import Literal, TypedDict

from pytest_hud.evaluation.paired_sequential import (
    PairedDecision,
    PairedSequentialTest,
    fixed_n_pairs,
    mcnemar_power,
)
from pytest_hud.evaluation.proportions import mcnemar_exact, newcombe_paired, wilson

__all__ = [
    "PairedDecision",
    "PairedFields",
    "PairedSequentialTest",
    "PairedVerdict",
    "fixed_n_pairs",
    "mcnemar_power",
    "pair_counts",
    "summarize_counts",
    "summarize_pairs",
]

PairedVerdict = Literal["better", "worse", "no difference", "undecided"]

#: the default smallest difference in success rates that "no difference" must rule out
MIN_EFFECT = 0.1


class PairedFields(TypedDict):
    """What ``n_pairs`` paired outcomes say about candidate B against reference A, as the
    results JSON holds it.

    ``a_only``: pairs where only A succeeded, ``b_only``: only B (the discordant pairs);
    ``both``/``neither``: the concordant ones; ``a_successes``/``b_successes`` each arm's
    total. Rates are None and intervals (``[low, high]``) the whole range when there are no
    pairs. ``diff`` is ``rate_b - rate_a``; every interval is at level ``1 - alpha``.
    ``verdict``: "better"/"worse" when the exact McNemar p-value is below ``alpha`` (the side
    the discordant pairs lean to), "no difference" when it is not and the difference's
    interval lies strictly inside (-min_effect, +min_effect), else "undecided" (too few pairs
    to tell either).
    """

    n_pairs: int
    both: int
    a_only: int
    b_only: int
    neither: int
    rate_a: float | None
    rate_b: float | None
    rate_a_ci: list[float]
    rate_b_ci: list[float]
    diff: float | None
    diff_ci: list[float]
    p_value: float
    alpha: float
    min_effect: float
    verdict: PairedVerdict
    a_successes: int
    b_successes: int


def pair_counts(pairs: Iterable[tuple[bool, bool]]) -> tuple[int, int, int, int]:
    """(both, a_only, b_only, neither) of (A succeeded, B succeeded) pairs."""
    counts = [0, 0, 0, 0]
    for a, b in pairs:
        counts[(not a) * 2 + (not b)] += 1  # (1,1)->0, (1,0)->1, (0,1)->2, (0,0)->3
    return counts[0], counts[1], counts[2], counts[3]


def _check_level(alpha: float, min_effect: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha!r}")
    if not 0.0 < min_effect <= 1.0:
        raise ValueError(
            f"min_effect: expected a difference in success rates in (0, 1], got {min_effect!r}"
        )


def summarize_counts(
    both: int,
    a_only: int,
    b_only: int,
    neither: int,
    *,
    alpha: float = 0.05,
    min_effect: float = MIN_EFFECT,
) -> PairedFields:
    """:func:`summarize_pairs` from the four pair counts (e.g. a running tally)."""
    _check_level(alpha, min_effect)
    counts = (both, a_only, b_only, neither)
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
        raise ValueError(f"expected four non-negative int pair counts, got {counts!r}")
    n = sum(counts)
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    p = mcnemar_exact(a_only, b_only)
    rate_a = (both + a_only) / n if n else None
    rate_b = (both + b_only) / n if n else None
    diff = (b_only - a_only) / n if n else None
    diff_ci = newcombe_paired(both, a_only, b_only, neither, z)
    verdict: PairedVerdict = "undecided"
    if n and p < alpha and b_only != a_only:
        verdict = "better" if b_only > a_only else "worse"
    elif n and -min_effect < diff_ci[0] and diff_ci[1] < min_effect:
        verdict = "no difference"
    return {
        "n_pairs": n,
        "both": both,
        "a_only": a_only,
        "b_only": b_only,
        "neither": neither,
        "rate_a": rate_a,
        "rate_b": rate_b,
        "rate_a_ci": list(wilson(both + a_only, n, z)),
        "rate_b_ci": list(wilson(both + b_only, n, z)),
        "diff": diff,
        "diff_ci": list(diff_ci),
        "p_value": p,
        "alpha": float(alpha),
        "min_effect": float(min_effect),
        "verdict": verdict,
        "a_successes": both + a_only,
        "b_successes": both + b_only,
    }


def summarize_pairs(
    pairs: Sequence[tuple[bool, bool]],
    *,
    alpha: float = 0.05,
    min_effect: float = MIN_EFFECT,
) -> PairedFields:
    """Summarize paired outcomes, each (reference A succeeded, candidate B succeeded) on
    the same row and seed.

    Rates: Wilson score intervals. Difference ``rate_b - rate_a``: Newcombe's hybrid score
    interval for paired proportions (method 10 of Newcombe 1998, Stat. Med. 17:2635-2650),
    near-nominal at small n and extreme rates where the Wald interval is not. Test: exact
    two-sided McNemar, the binomial test of the discordant pairs against 1/2. The verdict
    is defined on :class:`PairedFields`.
    """
    return summarize_counts(*pair_counts(pairs), alpha=alpha, min_effect=min_effect)
