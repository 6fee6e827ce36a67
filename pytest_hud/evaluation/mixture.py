"""Decision boundaries of the threshold gate: one-sided beta-mixture likelihood ratios (Robbins
1970; Howard et al. 2021), exact within ``n_max`` when asked (Armitage et al. 1969).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

__all__ = ["boundaries", "crossing_probability", "log_mixture"]

Bounds = tuple[NDArray[np.int64], NDArray[np.int64]]


def log_mixture(
    k: NDArray[np.float64], n: NDArray[np.float64], bar: float, above: bool
) -> NDArray[np.float64]:
    """log M after ``k`` of ``n`` successes; ``above``: against H0 p <= bar, else p >= bar."""
    from scipy.special import betainc, betaincc, betaln

    a, b = k + 1.0, n - k + 1.0
    tail = betaincc(a, b, bar) if above else betainc(a, b, bar)
    width = (1.0 - bar) if above else bar
    with np.errstate(divide="ignore"):
        log_tail = np.log(tail)
    return np.asarray(
        betaln(a, b) + log_tail - math.log(width) - k * math.log(bar) - (n - k) * math.log1p(-bar)
    )


def crossing_probability(first: NDArray[np.int64], p: float) -> float:
    """Exact probability that successes reach ``first[n]`` (``first[n] > n``: cannot)
    at some n <= len(first) - 1, for i.i.d. Bernoulli(p) outcomes."""
    n_max = len(first) - 1
    dist: NDArray[np.float64] = np.zeros(n_max + 2)
    dist[0] = 1.0
    crossed = 0.0
    for n in range(1, n_max + 1):
        nxt = dist * (1.0 - p)
        nxt[1:] += dist[:-1] * p
        edge = int(first[n])
        if edge <= n:
            crossed += float(nxt[edge:].sum())
            nxt[edge:] = 0.0
        dist = nxt
    return crossed


def _first_at(grid: NDArray[np.float64], level: float) -> NDArray[np.int64]:
    hit = grid >= level
    none = np.arange(len(grid)) + 1
    return np.where(hit.any(axis=1), np.argmax(hit, axis=1), none).astype(np.int64)


def _calibrate(grid: NDArray[np.float64], p: float, budget: float, top: float) -> float:
    """The least level in [0, top] whose boundary is crossed with probability <= budget."""
    lo, hi = 0.0, top
    if crossing_probability(_first_at(grid, lo), p) <= budget:
        return lo
    for _ in range(40):
        mid = (lo + hi) / 2
        if crossing_probability(_first_at(grid, mid), p) <= budget:
            hi = mid
        else:
            lo = mid
    return hi


@lru_cache(maxsize=32)
def boundaries(bar: float, alpha: float, n_max: int, exact: bool = True) -> Bounds:
    """Per n in 0..n_max: the least k that decides ABOVE (n + 1: none) and the greatest
    k that decides BELOW (-1: none)."""
    n = np.arange(n_max + 1, dtype=np.float64)[:, None]
    k = np.arange(n_max + 1, dtype=np.float64)[None, :]
    kk, nn = np.broadcast_arrays(np.minimum(k, n), n)
    valid = k <= n
    up = np.where(valid, log_mixture(kk, nn, bar, True), -np.inf)
    # BELOW in failures: k <= n - f  <=>  failures >= f, a walk with step 1 - bar
    rows = np.arange(n_max + 1)[:, None]
    fail_k = np.clip(rows - np.arange(n_max + 1)[None, :], 0, None).astype(np.float64)
    down = np.where(valid, log_mixture(fail_k, nn, bar, False), -np.inf)
    ville = math.log(2.0 / alpha)
    up_level = _calibrate(up, bar, alpha / 2, ville) if exact else ville
    down_level = _calibrate(down, 1.0 - bar, alpha / 2, ville) if exact else ville
    hi = _first_at(up, up_level)
    lo = np.arange(n_max + 1) - _first_at(down, down_level)
    hi[0], lo[0] = 1, -1
    return hi, lo.astype(np.int64)
