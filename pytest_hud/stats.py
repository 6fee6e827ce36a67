"""Success-rate statistics for gates: Wilson intervals and the two-proportion test."""

from __future__ import annotations

import math

__all__ = ["two_proportion_drop", "wilson"]


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
