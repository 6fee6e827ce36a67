"""The sequential tests simulated: sessions of the paired sequential test and of the threshold
gate drawn at a setting's rates, their units spent and decisions (:class:`Simulated`), and
"about N more pairs" for an A/B whose pairs left it undecided. Used by the planner
(:mod:`.planning`) and the A/B's verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pytest_hud.evaluation.sample_size import mcnemar_pairs

__all__ = [
    "MAX_HORIZON",
    "SESSIONS",
    "Simulated",
    "more_pairs",
    "simulate_paired_sequential",
    "simulate_threshold_gate",
]

#: simulated sessions per sequential figure
SESSIONS = 4000
#: the longest sequential horizon simulated: the exact boundaries cost O(horizon^2)
MAX_HORIZON = 2000
#: most simulated outcomes held at once (sessions x horizon)
_CHUNK = 2_000_000


# -- the sequential tests, simulated --------------------------------------------------------


@dataclass(frozen=True)
class Simulated:
    """Simulated sessions of a sequential test: the mean units spent (undecided sessions count
    the horizon) with its Monte-Carlo standard error, the share deciding right with its
    error, and the share of every outcome."""

    mean: float
    mean_se: float
    median: float
    power: float
    power_se: float
    shares: dict[str, float]
    horizon: int
    sessions: int


def _summarise(
    used: NDArray[np.int64],
    outcome: NDArray[np.int8],
    right: int,
    names: dict[int, str],
    horizon: int,
) -> Simulated:
    runs = len(used)
    p = float((outcome == right).mean())
    return Simulated(
        mean=float(used.mean()),
        mean_se=float(used.std(ddof=1) / math.sqrt(runs)) if runs > 1 else 0.0,
        median=float(np.median(used)),
        power=p,
        power_se=math.sqrt(p * (1 - p) / runs),
        shares={name: float((outcome == code).mean()) for code, name in names.items()},
        horizon=horizon,
        sessions=runs,
    )


def _chunked(
    run: Callable[[np.random.Generator, int], tuple[NDArray[Any], NDArray[Any]]],
    sessions: int,
    horizon: int,
    seed: int,
) -> tuple[NDArray[Any], NDArray[Any]]:
    """``run(rng, m)`` (m sessions' decision codes and episodes used) over ``sessions``
    sessions in chunks that keep the arrays small, from one seeded generator."""
    rng = np.random.default_rng(seed)
    codes, spent = [], []
    chunk = max(1, _CHUNK // horizon)
    for start in range(0, sessions, chunk):
        code, used = run(rng, min(chunk, sessions - start))
        codes.append(code)
        spent.append(used)
    return np.concatenate(codes), np.concatenate(spent)


def simulate_paired_sequential(
    discordance: float,
    delta: float,
    share_a: float,
    *,
    alpha: float,
    beta: float,
    horizon: int,
    right: int,
    sessions: int = SESSIONS,
    seed: int = 0,
) -> Simulated:
    """``sessions`` sessions of the paired sequential test (:mod:`.paired_sequential`)
    (alpha, beta, delta, at most ``horizon`` pairs): the arms disagree on a pair with
    probability ``discordance``, A wins a disagreement with probability ``share_a``;
    ``right`` is the decision code (:data:`~pytest_hud.evaluation.paired_sequential.DECISIONS`)
    counted as right. Vectorised, in chunks; a fixed ``seed`` gives the same figures."""
    from pytest_hud.evaluation.paired_sequential import DECISIONS, PairedSequentialTest

    test = PairedSequentialTest(alpha, beta, delta, horizon)

    def one(rng: np.random.Generator, m: int) -> tuple[NDArray[Any], NDArray[Any]]:
        disc = rng.random((m, horizon)) < discordance
        a_wins = rng.random((m, horizon)) < share_a
        return test.run(~disc | a_wins, ~disc | ~a_wins)  # only disagreements count

    code, used = _chunked(one, sessions, horizon, seed)
    names: dict[int, str] = {c: name or "undecided" for c, name in DECISIONS.items()}
    return _summarise(used, code, right, names, horizon)


def simulate_threshold_gate(
    bar: float,
    rate: float,
    *,
    alpha: float,
    horizon: int,
    sessions: int = SESSIONS,
    seed: int = 0,
) -> Simulated:
    """``sessions`` runs of :class:`~pytest_hud.evaluation.sequential_gates.ThresholdGate` (bar,
    alpha, ``horizon`` episodes) on a task whose true rate is ``rate``: right is "above"
    when the rate is above the bar, else "below" (as ``bench/stats.py`` simulates it)."""
    from pytest_hud.evaluation.sequential_gates import ThresholdGate

    gate = ThresholdGate(bar, alpha, horizon)
    want = 1 if rate > bar else -1
    verdict, used = _chunked(
        lambda rng, m: gate.run(rng.random((m, horizon)) < rate), sessions, horizon, seed
    )
    names = {1: "above", -1: "below", 0: "undecided"}
    return _summarise(used, verdict, want, names, horizon)


# -- "about N more pairs" ---------------------------------------------------------------------


def more_pairs(
    both: int,
    a_only: int,
    b_only: int,
    neither: int,
    alpha: float = 0.05,
    power: float = 0.8,
    effect: float = 0.1,
) -> int | None:
    """About how many more pairs an undecided A/B needs: the pairs the fixed-n exact McNemar
    test at ``alpha`` needs to see a rate difference ``effect`` with ``power`` at the
    discordance observed so far, less the pairs already run (0 when those were enough for
    that effect: the true one is likely smaller). None when there is nothing to go on: no
    disagreement yet, or fewer than ``effect`` of the rows disagree (a difference that large
    cannot come from them)."""
    n = both + a_only + b_only + neither
    if n <= 0 or a_only + b_only == 0:
        return None
    discordance = (a_only + b_only) / n
    if effect > discordance:
        return None
    return max(mcnemar_pairs(discordance, effect, alpha, power) - n, 0)
