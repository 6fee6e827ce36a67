"""How many episodes, pairs or rows a fixed-n evaluation needs: closed forms (normal
approximations, McNemar's and Connor's) and exact powers of the Newcombe intervals, at a
baseline rate, an effect, alpha and power; and a design's rows under repeats and intra-row
correlation. Pure functions of numbers (the planner, :mod:`.planning`, adds the sequential
tests' simulated figures).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "cells",
    "check_share",
    "connor_pairs",
    "design_rows",
    "mcnemar_pairs",
    "newcombe_paired_pairs",
    "newcombe_paired_power",
    "newcombe_unpaired_episodes",
    "newcombe_unpaired_power",
    "paired_noninferiority_pairs",
    "unpaired_episodes",
    "unpaired_noninferiority_episodes",
]

FloatArray = NDArray[np.float64]


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def _ceil(x: float) -> int:
    """ceil, forgiving the float noise of a formula that lands on an integer."""
    return max(1, math.ceil(x - 1e-9))


# -- fixed-n figures -------------------------------------------------------------------------


def design_rows(n: float, repeats: int = 1, icc: float = 0.0) -> int:
    """Rows that carry the evidence of ``n`` independent episodes (or pairs) when each row runs
    ``repeats`` episodes correlated by ``icc`` (Kish's design effect 1 + (R - 1) rho):
    ceil(n (1 + (R - 1) rho) / R). Rows, not episodes, are the units: repeats of one row
    share its initial condition, so they count fully only at rho = 0."""
    if repeats < 1:
        raise ValueError(f"repeats: expected episodes per row >= 1, got {repeats!r}")
    if not 0.0 <= icc <= 1.0:
        raise ValueError(f"icc: expected an intra-row correlation in [0, 1], got {icc!r}")
    return _ceil(n * (1.0 + (repeats - 1) * icc) / repeats)


def unpaired_episodes(
    rate: float, effect: float, alpha: float, power: float, *, one_sided: bool = False
) -> int:
    """Episodes per arm for the pooled two-proportion z-test to tell ``rate`` from
    ``rate - effect``: Fleiss's normal approximation without continuity correction (Fleiss,
    Levin & Paik 2003, Statistical Methods for Rates and Proportions, ch. 4),
    n = (z_a sqrt(2 pbar qbar) + z_b sqrt(p0 q0 + p1 q1))^2 / D^2 with z_a at alpha/2 a side
    (alpha one-sided). One-sided it is the test ``--hud-baseline`` runs."""
    p0, p1 = rate, rate - effect
    pbar = (p0 + p1) / 2
    z_a = _z(1 - (alpha if one_sided else alpha / 2))
    spread = z_a * math.sqrt(2 * pbar * (1 - pbar)) + _z(power) * math.sqrt(
        p0 * (1 - p0) + p1 * (1 - p1)
    )
    return _ceil(spread**2 / effect**2)


def unpaired_noninferiority_episodes(rate: float, margin: float, alpha: float, power: float) -> int:
    """Episodes per arm to show, one-sided at ``alpha``, that a candidate as good as the
    baseline has not dropped by ``margin`` (Blackwelder 1982's normal approximation,
    both rates equal): (z_a + z_b)^2 2 p q / D^2."""
    return _ceil((_z(1 - alpha) + _z(power)) ** 2 * 2 * rate * (1 - rate) / margin**2)


def paired_noninferiority_pairs(
    discordance: float, margin: float, alpha: float, power: float
) -> int:
    """Pairs for the same question on paired outcomes (the Wald test of the paired difference,
    whose variance at equal rates is the discordance Q): (z_a + z_b)^2 Q / D^2."""
    return _ceil((_z(1 - alpha) + _z(power)) ** 2 * discordance / margin**2)


def connor_pairs(discordance: float, effect: float, alpha: float, power: float) -> int:
    """Pairs for a one-sided test at ``alpha`` of a difference ``effect`` in paired rates that
    disagree on a share ``discordance`` of rows (Connor 1987, after Miettinen 1968):
    n = (z_a sqrt(Q) + z_b sqrt(Q - D^2))^2 / D^2."""
    check_share(effect, discordance)
    spread = _z(1 - alpha) * math.sqrt(discordance) + _z(power) * math.sqrt(discordance - effect**2)
    return _ceil(spread**2 / effect**2)


def check_share(effect: float, discordance: float) -> None:
    if effect > discordance:
        raise ValueError(
            f"discordance: expected at least the effect {effect:g} (a rate difference can "
            f"only come from rows where the arms disagree), got {discordance:g}; fix: a larger "
            "--discordance or a smaller --effect, or --non-inferiority"
        )


def mcnemar_pairs(
    discordance: float, effect: float, alpha: float, power: float, *, one_sided: bool = False
) -> int:
    """Pairs for the exact McNemar test to see a rate difference ``effect`` when the arms
    disagree on a share ``discordance`` of rows: the candidate then wins a disagreement with
    probability q = (1 + D/Q) / 2, so the effect 2q - 1 is D/Q
    (:func:`~pytest_hud.evaluation.paired_sequential.fixed_n_pairs`). One-sided at alpha is
    the two-sided test at 2 alpha read on one side."""
    from pytest_hud.evaluation.paired_sequential import fixed_n_pairs

    check_share(effect, discordance)
    level = 2 * alpha if one_sided else alpha
    approx = connor_pairs(discordance, effect, level / 2, power) if effect < discordance else 10
    return fixed_n_pairs(
        level, 1 - power, effect / discordance, discordance, n_limit=max(10_000, 3 * approx)
    )


# -- exact verdict probabilities of Newcombe's intervals (non-inferiority) -------------------


def _wilson(s: FloatArray, n: int, z: float) -> tuple[FloatArray, FloatArray]:
    p = s / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)


def _support(n: int, p: float) -> NDArray[np.int64]:
    """The counts of Binomial(n, p) within 9 standard deviations (and 10) of its mean:
    all but a negligible tail of its mass."""
    width = 9 * math.sqrt(n * p * (1 - p)) + 10
    return np.arange(max(0, math.floor(n * p - width)), min(n, math.ceil(n * p + width)) + 1)


def newcombe_unpaired_power(n: int, rate: float, margin: float, alpha: float) -> float:
    """P(the lower end of Newcombe's hybrid score interval for p_new - p_base, at level
    1 - 2 alpha, lies above -``margin``) with ``n`` episodes an arm, both rates ``rate``:
    exact, summing over both binomial counts (the interval of
    :func:`~pytest_hud.evaluation.proportions.newcombe_unpaired`)."""
    from scipy.stats import binom

    z = _z(1 - alpha)
    s = _support(n, rate).astype(np.float64)
    lo, hi = _wilson(s, n, z)
    p = s / n
    base, new = p[:, None], p[None, :]
    lower = (new - base) - np.hypot(new - lo[None, :], hi[:, None] - base)
    weight = binom.pmf(s, n, rate)
    return float(weight @ (lower > -margin) @ weight)


def newcombe_paired_power(
    n: int, rate: float, discordance: float, margin: float, alpha: float
) -> float:
    """The same for ``n`` pairs whose arms, both at ``rate``, disagree on a share
    ``discordance`` of rows (each way half of it), decided by Newcombe's paired interval
    (method 10, :func:`~pytest_hud.evaluation.proportions.newcombe_paired`): exact, summing
    the multinomial over the four pair counts."""
    from scipy.special import gammaln

    probabilities = cells(rate, discordance, 0.0)
    z = _z(1 - alpha)
    log_p = np.log(np.maximum(probabilities, 1e-300))
    a_range = _support(n, probabilities[0]).astype(np.float64)[None, :]
    c_range = _support(n, probabilities[2]).astype(np.float64)[:, None]
    total = 0.0
    for b in _support(n, probabilities[1]).astype(np.float64):
        a, c = np.broadcast_arrays(a_range, c_range)
        d = n - a - b - c
        ok = d >= 0
        a, c, d = a[ok], c[ok], d[ok]
        log_w = (
            gammaln(n + 1) - gammaln(a + 1) - gammaln(b + 1) - gammaln(c + 1) - gammaln(d + 1)
        ) + (a * log_p[0] + b * log_p[1] + c * log_p[2] + d * log_p[3])
        x_base, x_new = a + b, a + c
        base, new = x_base / n, x_new / n
        _, hi_base = _wilson(x_base, n, z)
        lo_new, _ = _wilson(x_new, n, z)
        margins = x_base * (c + d) * x_new * (b + d)
        cross = a * d - b * c
        corrected = np.where(cross > n / 2, cross - n / 2, np.minimum(cross, 0.0))
        phi = np.where(margins > 0, corrected / np.sqrt(np.maximum(margins, 1.0)), 0.0)
        down = (
            (new - lo_new) ** 2
            - 2 * phi * (new - lo_new) * (hi_base - base)
            + (hi_base - base) ** 2
        )
        lower = (new - base) - np.sqrt(np.maximum(down, 0.0))
        total += float(np.exp(log_w[lower > -margin]).sum())
    return min(total, 1.0)


def _first_n(power_at: Callable[[int], float], target: float, guess: int, n_limit: int) -> int:
    """The least n reaching ``target`` power, from a normal-approximation ``guess``: doubling
    and bisection to a crossing, then down while the n below reaches it too (exact power
    rises unevenly with n; this is the first n of the crossing found)."""
    lo = max(1, guess // 2)
    while lo > 1 and power_at(lo) >= target:
        lo //= 2
    hi = max(guess, lo + 1)
    while power_at(hi) < target:
        if hi >= n_limit:
            raise ValueError(
                f"n: expected at most {n_limit} to reach power {target:g}, got more; fix: a "
                "larger --effect, a lower --power or more --repeats per row"
            )
        lo, hi = hi, min(n_limit, 2 * hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= target else (mid, hi)
    while hi > 1 and power_at(hi - 1) >= target:
        hi -= 1
    return hi


def newcombe_unpaired_episodes(
    rate: float, margin: float, alpha: float, power: float, *, n_limit: int = 200_000
) -> int:
    """The least episodes per arm at which :func:`newcombe_unpaired_power` reaches ``power``."""
    guess = unpaired_noninferiority_episodes(rate, margin, alpha, power)
    return _first_n(
        lambda n: newcombe_unpaired_power(n, rate, margin, alpha), power, guess, n_limit
    )


def newcombe_paired_pairs(
    rate: float,
    discordance: float,
    margin: float,
    alpha: float,
    power: float,
    *,
    n_limit: int = 50_000,
) -> int:
    """The least pairs at which :func:`newcombe_paired_power` reaches ``power``."""
    guess = paired_noninferiority_pairs(discordance, margin, alpha, power)
    return _first_n(
        lambda n: newcombe_paired_power(n, rate, discordance, margin, alpha), power, guess, n_limit
    )


def cells(rate: float, discordance: float, drop: float) -> tuple[float, float, float, float]:
    """(both, a_only, b_only, neither) probabilities: A at ``rate``, B at ``rate - drop``,
    disagreeing on a share ``discordance`` of rows."""
    a_only, b_only = (discordance + drop) / 2, (discordance - drop) / 2
    both = rate - a_only
    neither = 1.0 - both - a_only - b_only
    if b_only < -1e-12 or both < -1e-12 or neither < -1e-12:
        raise ValueError(
            f"discordance: expected at most {2 * min(rate - drop, 1 - rate):.3g} with a "
            f"{rate:.1%} baseline and a drop of {drop:g} (and at least the drop), got "
            f"{discordance:g}; fix: a discordance the arms can have"
        )
    return max(both, 0.0), a_only, max(b_only, 0.0), max(neither, 0.0)
