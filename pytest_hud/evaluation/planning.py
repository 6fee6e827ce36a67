"""Planning an evaluation before it runs (``python -m pytest_hud plan``): the episodes, pairs and
rows a question needs at a baseline rate, an effect, alpha and power, with a fixed n
(:mod:`.sample_size`) and under the sequential tests (simulated here); and "about N more
pairs" for an A/B its pairs left undecided.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypedDict, Unpack

import numpy as np
from numpy.typing import NDArray

from pytest_hud.evaluation.sample_size import (
    cells,
    check_share,
    connor_pairs,
    design_rows,
    mcnemar_pairs,
    newcombe_paired_pairs,
    newcombe_paired_power,
    newcombe_unpaired_episodes,
    newcombe_unpaired_power,
    paired_noninferiority_pairs,
    unpaired_episodes,
    unpaired_noninferiority_episodes,
)
from pytest_hud.evaluation.simulation import (
    MAX_HORIZON,
    SESSIONS,
    Simulated,
    simulate_paired_sequential,
    simulate_threshold_gate,
)

__all__ = [
    "DISCORDANCES",
    "Figure",
    "Setting",
    "plan",
]

Mode = Literal["two-sided", "one-sided", "non-inferiority"]
FloatArray = NDArray[np.float64]

#: the discordances the paired figures are shown for when none is given or known
DISCORDANCES = (0.02, 0.05, 0.1, 0.2)


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
        cells(s.rate, q, drop)
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
    from pytest_hud.evaluation.sequential_gates import fixed_n_for_power

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
            check_share(s.effect, s.discordance)
        cells(s.rate, s.discordance, 0.0 if s.mode == "non-inferiority" else s.effect)


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
