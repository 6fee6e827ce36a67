"""Success rates in pure Python: Wilson intervals, the two-proportion test, exact tests (Fisher,
McNemar) and Newcombe's hybrid score intervals for two rates.
"""

from __future__ import annotations

import math

__all__ = [
    "fisher_exact",
    "mcnemar_exact",
    "newcombe_paired",
    "newcombe_unpaired",
    "two_proportion_drop",
    "wilson",
]


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a success rate (95% by default); (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def two_proportion_drop(s_base: int, n_base: int, s_now: int, n_now: int) -> float:
    """One-sided p-value that the success rate dropped from baseline to now (pooled z-test).

    Small values mean the drop is more than chance explains. 1.0 when it did not drop
    or there is nothing to compare.
    """
    if n_base <= 0 or n_now <= 0:
        return 1.0
    p1, p2 = s_base / n_base, s_now / n_now
    if p2 >= p1:
        return 1.0
    pooled = (s_base + s_now) / (n_base + n_now)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_base + 1 / n_now))
    if se == 0:
        return 0.0
    z = (p1 - p2) / se
    return 0.5 * math.erfc(z / math.sqrt(2))


#: relative tolerance when collecting tables "as or less likely" than the observed one
#: (R's fisher.test and scipy use the same 1 + 1e-7)
_REL = 1 + 1e-7


def fisher_exact(s1: int, n1: int, s2: int, n2: int) -> float:
    """Two-sided Fisher exact p-value for s1/n1 vs s2/n2 (tables no more likely than
    the observed one, margins fixed)."""
    for s, n in ((s1, n1), (s2, n2)):
        if n < 0 or not 0 <= s <= n:
            raise ValueError(f"expected 0 <= successes <= episodes, got {s}/{n}")
    k, n = s1 + s2, n1 + n2
    if n1 == 0 or n2 == 0 or k == 0 or k == n:
        return 1.0
    total = math.comb(n, k)
    lo, hi = max(0, k - n2), min(k, n1)

    def weight(x: int) -> int:
        return math.comb(n1, x) * math.comb(n2, k - x)

    observed = weight(s1)
    p = sum(w for x in range(lo, hi + 1) if (w := weight(x)) * 1 <= observed * _REL)
    return min(1.0, p / total)


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value from the discordant pairs: ``b`` seeds where only
    the baseline succeeded, ``c`` where only the candidate did (binomial, p = 1/2)."""
    if b < 0 or c < 0:
        raise ValueError(f"expected non-negative discordant counts, got b={b}, c={c}")
    m = b + c
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**m)


def newcombe_unpaired(
    s1: int, n1: int, s2: int, n2: int, z: float = 1.959964
) -> tuple[float, float]:
    """Interval for p2 - p1 (independent samples), Newcombe's hybrid score method."""
    if n1 <= 0 or n2 <= 0:
        return -1.0, 1.0
    p1, p2 = s1 / n1, s2 / n2
    l1, u1 = wilson(s1, n1, z)
    l2, u2 = wilson(s2, n2, z)
    d = p2 - p1
    return (
        max(-1.0, d - math.hypot(p2 - l2, u1 - p1)),
        min(1.0, d + math.hypot(u2 - p2, p1 - l1)),
    )


def newcombe_paired(a: int, b: int, c: int, d: int, z: float = 1.959964) -> tuple[float, float]:
    """Interval for p_new - p_base on paired outcomes: ``a`` both succeeded, ``b`` only
    the baseline, ``c`` only the candidate, ``d`` neither (Newcombe's paired method 10,
    the hybrid score interval with the pairs' correlation phi, whose numerator
    ``ad - bc`` is continuity-corrected as the method specifies: less ``n/2`` above it,
    0 between 0 and ``n/2``, unchanged below 0)."""
    if min(a, b, c, d) < 0:
        raise ValueError(f"expected non-negative pair counts, got {(a, b, c, d)}")
    n = a + b + c + d
    if n == 0:
        return -1.0, 1.0
    base, new = (a + b) / n, (a + c) / n
    lb, ub = wilson(a + b, n, z)
    ln, un = wilson(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    corrected = cross - n / 2 if cross > n / 2 else min(cross, 0)
    phi = corrected / math.sqrt(margins) if margins else 0.0
    diff = new - base
    down = (new - ln) ** 2 - 2 * phi * (new - ln) * (ub - base) + (ub - base) ** 2
    up = (un - new) ** 2 - 2 * phi * (un - new) * (base - lb) + (base - lb) ** 2
    return max(-1.0, diff - math.sqrt(max(down, 0.0))), min(1.0, diff + math.sqrt(max(up, 0.0)))
