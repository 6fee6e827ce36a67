"""Planning an evaluation before it runs (``python -m pytest_hud plan``): the episodes, pairs and
rows a question needs at a baseline rate, an effect, alpha and power, with a fixed n and under
the sequential tests; and "about N more pairs" for an A/B its pairs left undecided.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any, Literal, NoReturn, TypedDict, Unpack

import numpy as np
from numpy.typing import NDArray

from pytest_hud.plumbing.cli import from_args

__all__ = [
    "DISCORDANCES",
    "Figure",
    "Setting",
    "connor_pairs",
    "design_rows",
    "main",
    "mcnemar_pairs",
    "more_pairs",
    "newcombe_paired_pairs",
    "newcombe_paired_power",
    "newcombe_unpaired_episodes",
    "newcombe_unpaired_power",
    "paired_noninferiority_pairs",
    "plan",
    "simulate_paired_sequential",
    "simulate_threshold_gate",
    "unpaired_episodes",
    "unpaired_noninferiority_episodes",
]

Mode = Literal["two-sided", "one-sided", "non-inferiority"]
FloatArray = NDArray[np.float64]

#: the discordances the paired figures are shown for when none is given or known
DISCORDANCES = (0.02, 0.05, 0.1, 0.2)
#: simulated sessions per sequential figure
SESSIONS = 4000
#: the longest sequential horizon simulated: the exact boundaries cost O(horizon^2)
MAX_HORIZON = 2000
#: most simulated outcomes held at once (sessions x horizon)
_CHUNK = 2_000_000


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
    _check_share(effect, discordance)
    spread = _z(1 - alpha) * math.sqrt(discordance) + _z(power) * math.sqrt(discordance - effect**2)
    return _ceil(spread**2 / effect**2)


def _check_share(effect: float, discordance: float) -> None:
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

    _check_share(effect, discordance)
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

    cells = _cells(rate, discordance, 0.0)
    z = _z(1 - alpha)
    log_p = np.log(np.maximum(cells, 1e-300))
    a_range = _support(n, cells[0]).astype(np.float64)[None, :]
    c_range = _support(n, cells[2]).astype(np.float64)[:, None]
    total = 0.0
    for b in _support(n, cells[1]).astype(np.float64):
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


def _cells(rate: float, discordance: float, drop: float) -> tuple[float, float, float, float]:
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
    """``sessions`` runs of :class:`~pytest_hud.evaluation.sequential.ThresholdGate` (bar,
    alpha, ``horizon`` episodes) on a task whose true rate is ``rate``: right is "above"
    when the rate is above the bar, else "below" (as ``bench/stats.py`` simulates it)."""
    from pytest_hud.evaluation.sequential import ThresholdGate

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


# -- the plan ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """What ``plan`` is asked: a baseline ``rate``, the ``effect`` in rate points, the
    family ``alpha`` over ``tasks`` tests, ``power``, ``repeats`` episodes per row with
    intra-row correlation ``icc``, the discordance of paired arms (None: unknown), and
    whether the question is two-sided, one-sided or non-inferiority."""

    rate: float
    effect: float
    alpha: float = 0.05
    power: float = 0.8
    tasks: int = 1
    repeats: int = 1
    icc: float = 0.0
    discordance: float | None = None
    mode: Mode = "two-sided"
    sessions: int = SESSIONS
    seed: int = 0
    horizon: int | None = None
    rate_from: str = "--rate"
    discordance_from: str | None = None

    @property
    def test_alpha(self) -> float:
        """Each task's level: Holm's first step and Bonferroni's split, alpha / K (the worst
        case; Holm's later steps test at more)."""
        return self.alpha / self.tasks

    @property
    def one_sided(self) -> bool:
        return self.mode != "two-sided"


@dataclass(frozen=True)
class Figure:
    """One line of the plan: ``n`` units (``unit``) needed, or expected for a sequential test
    (None: not applicable, ``note`` says why); ``rows`` and ``episodes`` carry the design
    effect of repeats; ``power`` is exact or simulated (with ``power_se``)."""

    design: str
    method: str
    unit: str
    n: float | None
    rows: int | None = None
    episodes: int | None = None
    discordance: float | None = None
    power: float | None = None
    power_se: float | None = None
    mean_se: float | None = None
    horizon: int | None = None
    note: str = ""


class _Measures(TypedDict, total=False):
    """What a :class:`Figure` may say beside its number of units (its rows and episodes
    follow from the number)."""

    discordance: float | None
    power: float | None
    power_se: float | None
    mean_se: float | None
    horizon: int | None
    note: str


def _figure(
    s: Setting, design: str, method: str, unit: str, n: float | None, **kw: Unpack[_Measures]
) -> Figure:
    rows = design_rows(n, s.repeats, s.icc) if n is not None else None
    episodes = rows * s.repeats if rows is not None else None
    return Figure(design, method, unit, n, rows, episodes, **kw)


def _sequential(
    s: Setting,
    design: str,
    method: str,
    unit: str,
    horizon: int | None,
    simulate: Callable[[int], Simulated],
    note: Callable[[Simulated, int], str],
    *,
    unsimulated: str | None = None,
    discordance: float | None = None,
) -> Figure:
    """A sequential test's figure: its mean ``unit`` over ``simulate(horizon)``'s sessions
    of at most ``horizon``, with the power and the standard errors, and ``note(sim,
    horizon)``; a horizon too long to simulate (or none) gives no number and says why
    (``unsimulated``: the method named then, if not ``method``)."""
    if horizon is None or horizon > MAX_HORIZON:
        return _figure(
            s,
            design,
            unsimulated or method,
            unit,
            None,
            discordance=discordance,
            note=_too_long(horizon),
        )
    sim = simulate(horizon)
    return _figure(
        s,
        design,
        method,
        unit,
        round(sim.mean, 1),
        discordance=discordance,
        power=sim.power,
        power_se=sim.power_se,
        mean_se=sim.mean_se,
        horizon=horizon,
        note=note(sim, horizon),
    )


def _horizon(s: Setting, fixed: int | None) -> int | None:
    if s.horizon is not None:
        return s.horizon
    return None if fixed is None else max(2 * fixed, 10)


def _too_long(horizon: int | None) -> str:
    if horizon is None:
        return f"not simulated: the fixed-n design needs more than {MAX_HORIZON}"
    return (
        f"not simulated: a horizon of {horizon} > {MAX_HORIZON} (the exact boundaries cost "
        "O(horizon^2)); pass --horizon to simulate a shorter session"
    )


def _unpaired(s: Setting) -> list[Figure]:
    a, d = s.test_alpha, s.effect

    def figure(method: str, n: float, power: float | None = None) -> Figure:
        return _figure(s, "unpaired, fixed n", method, "episodes per arm", n, power=power)

    if s.mode == "non-inferiority":
        exact = newcombe_unpaired_episodes(s.rate, d, a, s.power)
        level = 1 - 2 * a
        return [
            figure(
                f"exact: Newcombe's interval ({level:.0%}) for B - A above -{d:g}, both "
                f"rates {s.rate:.1%}",
                exact,
                power=newcombe_unpaired_power(exact, s.rate, d, a),
            ),
            figure(
                "normal approximation (z_a + z_b)^2 2pq / D^2 (Blackwelder 1982)",
                unpaired_noninferiority_episodes(s.rate, d, a, s.power),
            ),
        ]
    side = "one-sided" if s.one_sided else "two-sided"
    return [
        figure(
            f"pooled two-proportion z-test, {side}, {s.rate:.1%} vs {s.rate - d:.1%} "
            "(Fleiss, Levin & Paik 2003)",
            unpaired_episodes(s.rate, d, a, s.power, one_sided=s.one_sided),
        )
    ]


def _paired(s: Setting, q: float) -> list[Figure]:
    """The fixed-n paired figures at discordance ``q``, then the sequential test's."""
    a, d = s.test_alpha, s.effect
    drop = 0.0 if s.mode == "non-inferiority" else d

    def figure(
        method: str, n: float | None, *, power: float | None = None, note: str = ""
    ) -> Figure:
        return _figure(
            s, "paired, fixed n", method, "pairs", n, discordance=q, power=power, note=note
        )

    if d > q and s.mode != "non-inferiority":
        note = (
            f"n/a: a difference of {d:g} needs the arms to disagree on at least {d:g} of the rows"
        )
        return [figure("exact McNemar", None, note=note)]
    try:
        _cells(s.rate, q, drop)
    except ValueError as exc:
        return [figure("-", None, note=str(exc))]
    out: list[Figure] = []
    if s.mode == "non-inferiority":
        try:
            fixed: int | None = newcombe_paired_pairs(s.rate, q, d, a, s.power)
        except ValueError as exc:
            return [figure("-", None, note=str(exc))]
        level = 1 - 2 * a
        out.append(
            figure(
                f"exact: Newcombe's paired interval ({level:.0%}) for B - A above -{d:g}",
                fixed,
                power=newcombe_paired_power(int(fixed or 0), s.rate, q, d, a),
            )
        )
        out.append(
            figure(
                "normal approximation (z_a + z_b)^2 Q / D^2",
                paired_noninferiority_pairs(q, d, a, s.power),
            )
        )
    else:
        fixed = mcnemar_pairs(q, d, a, s.power, one_sided=s.one_sided)
        side = "one-sided" if s.one_sided else "two-sided"
        out.append(figure(f"exact McNemar, {side}, effect 2q-1 = D/Q = {d / q:.3g}", fixed))
        if s.one_sided:
            out.append(
                figure(
                    "normal approximation (Connor 1987), one-sided",
                    connor_pairs(q, d, a, s.power),
                )
            )
    out.append(_paired_sequential(s, q, fixed))
    return out


def _paired_sequential(s: Setting, q: float, fixed: int | None) -> Figure:
    from pytest_hud.evaluation.paired_sequential import NO_DIFFERENCE, WORSE

    a, d = s.test_alpha, s.effect
    name = "paired sequential test"
    if d >= q:
        return _figure(
            s,
            name,
            "PairedSequentialTest",
            "mean pairs",
            None,
            discordance=q,
            note=f"n/a: its effect 2q-1 = D/Q = {d / q:.3g} must be below 1: the arms must "
            f"disagree on more than {d:g} of the rows",
        )
    if s.mode == "non-inferiority":  # equal arms; "no difference" errs at most beta = alpha
        share, alpha, beta, right = 0.5, a, a, NO_DIFFERENCE
        what = f"equal arms: 'no difference' (rules out 2q-1 >= {d / q:.3g}) at beta {a:g}"
    else:
        share, alpha, beta, right = (1 + d / q) / 2, 2 * a if s.one_sided else a, 1 - s.power, WORSE
        what = f"B worse by {d:g}: 'worse', delta = D/Q = {d / q:.3g}, beta {1 - s.power:.3g}"

    def simulate(horizon: int) -> Simulated:
        return simulate_paired_sequential(
            q,
            d / q,
            share,
            alpha=alpha,
            beta=beta,
            horizon=horizon,
            right=right,
            sessions=s.sessions,
            seed=s.seed,
        )

    def note(sim: Simulated, horizon: int) -> str:
        return (
            f"{sim.sessions} simulated sessions of at most {horizon} pairs, seed {s.seed}; "
            f"median {sim.median:.0f}; {_shares(sim)}"
        )

    horizon = _horizon(s, fixed)
    method = "PairedSequentialTest"
    return _sequential(
        s,
        name,
        f"{method}, {what}",
        "mean pairs",
        horizon,
        simulate,
        note,
        unsimulated=method,
        discordance=q,
    )


def _shares(sim: Simulated) -> str:
    return ", ".join(f"{name} {share:.1%}" for name, share in sim.shares.items() if share)


def _threshold(s: Setting) -> Figure:
    from pytest_hud.evaluation.sequential import fixed_n_for_power

    a, d = s.test_alpha, s.effect
    gate_alpha = 2 * a if s.one_sided else a  # the gate splits alpha over its two sides
    if s.mode == "non-inferiority":
        bar, true = s.rate - d, s.rate
        what = f"bar {bar:.1%}, true rate {true:.1%}: 'above'"
    else:
        bar, true = s.rate, s.rate - d
        what = f"the baseline's {bar:.1%} taken as a known bar, true rate {true:.1%}: 'below'"
    name = "threshold gate (one run)"
    try:
        fixed = fixed_n_for_power(bar, gate_alpha, true, s.power, n_limit=MAX_HORIZON)
    except ValueError:
        fixed = None
    fixed_note = f"the fixed-n exact binomial test needs {fixed}" if fixed else ""

    def simulate(horizon: int) -> Simulated:
        return simulate_threshold_gate(
            bar, true, alpha=gate_alpha, horizon=horizon, sessions=s.sessions, seed=s.seed
        )

    def note(sim: Simulated, horizon: int) -> str:
        parts = (
            f"{sim.sessions} simulated runs of at most {horizon} episodes, seed {s.seed}",
            f"median {sim.median:.0f}",
            _shares(sim),
            fixed_note,
        )
        return "; ".join(x for x in parts if x)

    horizon = _horizon(s, fixed)
    return _sequential(s, name, f"ThresholdGate, {what}", "mean episodes", horizon, simulate, note)


def plan(s: Setting) -> dict[str, object]:
    """Every figure for ``s``: unpaired fixed n, paired fixed n and the paired sequential
    test (at ``s.discordance``, else at each of :data:`DISCORDANCES`), and the threshold
    gate; with the setting and notes, as ``--json`` prints them."""
    _check_setting(s)
    figures = _unpaired(s)
    for q in [s.discordance] if s.discordance is not None else DISCORDANCES:
        figures += _paired(s, q)
    figures.append(_threshold(s))
    p1 = s.rate if s.mode == "non-inferiority" else s.rate - s.effect
    independent = s.rate * (1 - p1) + p1 * (1 - s.rate)
    notes = [
        f"alpha {s.alpha:g} over {s.tasks} task(s): {s.test_alpha:.3g} per test (Holm's first "
        "step and Bonferroni's split, the worst case)"
        + ("; one-sided" if s.one_sided else "; two-sided"),
        f"independent arms would disagree on {independent:.1%} of rows; pairing (same rows, "
        "same seeds) helps when they disagree less",
    ]
    if s.repeats > 1:
        notes.append(
            f"rows, not episodes, are the unit: {s.repeats} episodes per row with intra-row "
            f"correlation {s.icc:g} count as {s.repeats / (1 + (s.repeats - 1) * s.icc):.3g} "
            "independent ones (design effect 1 + (R-1) rho); sequential figures are per "
            "independent episode or pair"
        )
    from pytest_hud.evaluation.bounded import design_floor

    two_sided = 2 * s.test_alpha if s.one_sided else s.test_alpha
    floor_rows = next(r for r in range(1, 64) if design_floor(r) <= two_sided)
    notes.append(
        f"the exact paired tests need at least {floor_rows} rows (or disagreeing pairs) "
        f"before any p-value can reach {s.test_alpha:.3g} (floor 2/2^rows)"
    )
    return {
        "setting": asdict(s) | {"test_alpha": s.test_alpha},
        "figures": [asdict(f) for f in figures],
        "notes": notes,
    }


def _check_setting(s: Setting) -> None:
    if not 0.0 < s.rate < 1.0:
        raise ValueError(
            f"rate: expected a success rate in (0, 1), got {s.rate!r}; fix: the baseline's "
            "rate as a fraction, e.g. --rate 0.9"
        )
    if not 0.0 < s.effect < s.rate:
        raise ValueError(
            f"effect: expected a drop in rate points in (0, {s.rate:g}), got {s.effect!r}; "
            "fix: e.g. --effect 0.05 for 5 points"
        )
    top = 0.5 if s.one_sided else 1.0
    if not 0.0 < s.alpha < top:
        raise ValueError(
            f"alpha: expected a level in (0, {top:g}), got {s.alpha!r}; fix: e.g. 0.05"
        )
    if not 0.0 < s.power < 1.0:
        raise ValueError(f"power: expected a probability in (0, 1), got {s.power!r}; fix: e.g. 0.8")
    if s.tasks < 1 or s.repeats < 1 or s.sessions < 2:
        raise ValueError(
            f"expected --tasks >= 1, --repeats >= 1 and --sessions >= 2, got {s.tasks}, "
            f"{s.repeats}, {s.sessions}; fix: positive counts"
        )
    if not 0.0 <= s.icc <= 1.0:
        raise ValueError(f"icc: expected a correlation in [0, 1], got {s.icc!r}; fix: e.g. 0.3")
    if s.horizon is not None and not 1 <= s.horizon <= MAX_HORIZON:
        raise ValueError(
            f"horizon: expected 1..{MAX_HORIZON} pairs or episodes, got {s.horizon}; fix: a "
            "shorter session"
        )
    if s.discordance is not None:
        if not 0.0 < s.discordance <= 1.0:
            raise ValueError(
                f"discordance: expected P(arms disagree on a row) in (0, 1], got "
                f"{s.discordance!r}; fix: e.g. --discordance 0.1"
            )
        if s.mode != "non-inferiority":
            _check_share(s.effect, s.discordance)
        _cells(s.rate, s.discordance, 0.0 if s.mode == "non-inferiority" else s.effect)


# -- the command line -------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def format_plan(result: dict[str, Any]) -> list[str]:
    """The plan as a table: one line per figure, then its method and notes."""
    s = result["setting"]
    points = f"{100 * s['effect']:.3g} points"
    question = {
        "two-sided": f"a change of {points} from a {s['rate']:.1%} baseline",
        "one-sided": f"a drop of {points} from a {s['rate']:.1%} baseline",
        "non-inferiority": f"that the candidate has not dropped by more than {points} from a "
        f"{s['rate']:.1%} baseline",
    }[s["mode"]]
    where = f"rate from {s['rate_from']}"
    if s["discordance"] is not None:
        where += f", discordance from {s['discordance_from']}"
    lines = [
        f"plan: to show {question} ({s['mode']}; {where})",
        f"alpha {s['alpha']:g} ({s['test_alpha']:.3g} per test over {s['tasks']} task(s)), "
        f"power {s['power']:.0%}, {s['repeats']} episode(s) per row"
        + (f", intra-row correlation {s['icc']:g}" if s["repeats"] > 1 else ""),
        "",
    ]
    repeats = s["repeats"] > 1
    head = ["", "design", "discordance", "needed", "unit"]
    head += ["rows", "episodes"] if repeats else []
    head += ["power", "how"]
    table = [head]
    for i, f in enumerate(result["figures"], 1):
        n = f["n"]
        needed = "n/a" if n is None else (f"{n:.1f}" if isinstance(n, float) else str(n))
        if n is not None and f["mean_se"] is not None:
            needed += f" +-{f['mean_se']:.1f}"
        power = _pct(f["power"])
        if f["power_se"] is not None:
            power += f" +-{f['power_se']:.1%}"
        row = [f"({i})", f["design"], _pct(f["discordance"]), needed, f["unit"]]
        if repeats:
            row += [str(f["rows"] or "-"), str(f["episodes"] or "-")]
        row += [power, f["method"]]
        table.append(row)
    widths = [max(len(r[j]) for r in table) for j in range(len(head) - 1)]
    for r in table:
        cells = [
            c.ljust(w) if j in (1, 4) else c.rjust(w)
            for j, (c, w) in enumerate(zip(r[:-1], widths, strict=True))
        ]
        lines.append("  ".join([*cells, r[-1]]).rstrip())
    notes = [(i, f["note"]) for i, f in enumerate(result["figures"], 1) if f["note"]]
    if notes:
        lines.append("")
        lines += [f"({i}) {note}" for i, note in notes]
    lines.append("")
    lines += [f"- {note}" for note in result["notes"]]
    lines.append(
        "- +-: one Monte-Carlo standard error; sequential figures count an undecided session "
        "at its horizon"
    )
    return lines


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage block
        self.exit(2, f"plan: {message}; fix: see python -m pytest_hud plan --help\n")


def _from_results(path: str) -> tuple[float | None, float | None, str | None]:
    """The results file's overall success rate and, with a ``paired`` block, the last
    candidate's observed discordance (a_only + b_only) / n_pairs over every task."""
    from pytest_hud.evaluation.results import read_results

    try:
        doc = read_results(path)
    except ValueError as exc:
        raise ValueError(f"{exc}; fix: a file written by --hud-results, or --rate P") from None
    overall = doc.get("overall")
    rate = overall.get("success_rate") if overall else None
    if rate is not None and not isinstance(rate, int | float):
        raise ValueError(f"{path}: overall.success_rate: expected a number, got {rate!r}")
    paired = doc.get("paired")
    comparisons = (paired.get("comparisons") if paired else None) or []
    if not comparisons:
        return rate, None, None
    last = comparisons[-1] if isinstance(comparisons, list) else None
    if not isinstance(last, dict):
        last = {}
    counts = last.get("overall")
    try:
        disagree = int(counts["a_only"]) + int(counts["b_only"])  # type: ignore[index]
        n_pairs = int(counts["n_pairs"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        raise ValueError(
            f"{path}: paired.comparisons[-1].overall: expected a_only, b_only and n_pairs "
            "counts, got none; fix: a results JSON written by --hud-results"
        ) from None
    if n_pairs <= 0 or disagree <= 0:
        return rate, None, None
    where = f"{path} ({last.get('candidate')} vs {last.get('reference')}, {n_pairs} pairs)"
    return rate, disagree / n_pairs, where


def main(argv: Sequence[str] | None = None) -> int:
    ap = _Parser(prog="python -m pytest_hud plan", description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, help="the baseline success rate, e.g. 0.9")
    ap.add_argument("--results", metavar="FILE", help="a --hud-results JSON to take it from")
    ap.add_argument("--effect", type=float, required=True, help="in rate points, e.g. 0.05")
    ap.add_argument("--alpha", type=float, default=0.05, help="the family's level (0.05)")
    ap.add_argument("--power", type=float, default=0.8, help="0.8")
    ap.add_argument("--tasks", type=int, default=1, help="tests in the family: alpha/K each")
    ap.add_argument("--repeats", type=int, default=1, help="episodes per row (1)")
    ap.add_argument("--icc", type=float, default=0.0, help="intra-row correlation (0)")
    ap.add_argument("--discordance", type=float, help="P(paired arms disagree on a row)")
    side = ap.add_mutually_exclusive_group()
    side.add_argument("--one-sided", action="store_true", help="a drop, one-sided at alpha")
    side.add_argument(
        "--non-inferiority",
        action="store_true",
        help="show the candidate has not dropped by more than the effect, one-sided at alpha",
    )
    ap.add_argument("--sessions", type=int, default=SESSIONS, help="simulated sessions (4000)")
    ap.add_argument("--seed", type=int, default=0, help="of the simulations (0)")
    ap.add_argument("--horizon", type=int, help="a sequential session's most pairs/episodes")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    try:
        rate, discordance, found = None, None, None
        if args.results is not None:
            rate, discordance, found = _from_results(args.results)
        if args.rate is not None:
            rate = args.rate
        elif rate is None:
            raise ValueError(
                "rate: expected --rate P or a --results file with an overall success rate, "
                "got neither; fix: e.g. --rate 0.9"
            )
        if args.discordance is not None:
            discordance, found = args.discordance, "--discordance"
        mode: Mode = (
            "non-inferiority"
            if args.non_inferiority
            else "one-sided"
            if args.one_sided
            else "two-sided"
        )
        setting = from_args(
            Setting,
            args,
            rate=float(rate),
            discordance=discordance,
            mode=mode,
            rate_from="--rate" if args.rate is not None else str(args.results),
            discordance_from=found,
        )
        result = plan(setting)
    except ImportError as exc:
        print(
            f"plan: expected scipy, got {exc}; fix: pip install 'pytest-hud[stats]'",
            file=sys.stderr,
        )
        return 2
    except ValueError as exc:
        print(f"plan: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("\n".join(format_plan(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
