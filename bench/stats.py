"""Episodes spent: the anytime-valid threshold gate vs the fixed-n exact test.

For true success rates 0.3..0.9 around a 0.6 bar, simulates the sequential gate
(``ThresholdGate``, stops at its first decision or at n_max) and prints the mean
episodes it spends, how often it decides correctly (its power at that rate; at the bar
any decision is an error), and the smallest fixed n whose exact binomial test at the
same alpha has at least that power at that rate: the fixed-n gate with the same error
rates (a simulated power of 100% is matched as 1 - 1/runs). A last column is the
usual fixed design, n for 80% power at bar +/- 0.1.

    .venv/bin/python bench/stats.py [--bar 0.6] [--alpha 0.05] [--n-max 200] [--runs 4000] [--ville]

``--paired``: the paired A/B test instead (``PairedSequentialTest``). At equal arms its
type-I error over ``--runs`` simulated sessions per discordance rate, with its Wilson
interval and the exact bound; at effects 2q - 1 (q: B's share of the pairs where the arms
disagree) its decisions, the mean pairs it spends, and the fixed-n exact McNemar test of
the same power (``fixed_n_pairs``), as a ratio. ``--report`` writes that table into
docs/performance.md (bench/_report.py).

    .venv/bin/python bench/stats.py --paired [--beta 0.2] [--delta 0.5] [--max-pairs 400] [--report]

``--study``: the simulation study of issue 41, every figure with its Monte-Carlo standard
error. (1) The type-I error at alpha of every test and gate, on 0/1 outcomes and bounded
scores, with and without live stopping, with repeats per row, and over K tasks (Holm vs
Bonferroni, with their power); next to them the naive procedures that exceed alpha (a
fixed-n test read after every pair, episodes taken as the units). (2) Power and pairs to a
decision: on 0/1 outcomes the paired sequential test vs the fixed-n exact McNemar test vs
STEP (``BaselineGate``); on bounded scores the betting test vs the fixed-n sign-flip
permutation test vs the after-the-fact e-value of Inspect Robots' ``compare`` (our reading
of its public description, implemented here in the bench only). (3) The 90%-vs-85% example,
paired vs unpaired. ``--runs`` sessions per vectorised row, ``--slow-runs`` per row whose
class runs one session at a time in Python (the betting test, STEP, the permutation test);
``--section`` runs one part; ``--report`` (whole study only) writes the tables into
docs/performance.md (bench:stats-study).

    .venv/bin/python bench/stats.py --study [--runs 20000] [--slow-runs 2000] [--report]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_hud.evaluation.bounded import (  # noqa: E402
    EXACT_ROWS,
    PairedBettingTest,
    betting_interval,
    holm,
    permutation_p,
    row_means,
)
from pytest_hud.evaluation.mixture import crossing_probability  # noqa: E402
from pytest_hud.evaluation.paired import (  # noqa: E402
    PairedSequentialTest,
    fixed_n_pairs,
    mcnemar_power,
    summarize_counts,
)
from pytest_hud.evaluation.paired_sequential import (  # noqa: E402
    BETTER,
    NO_DIFFERENCE,
    UNDECIDED,
    WORSE,
)
from pytest_hud.evaluation.proportions import (  # noqa: E402
    mcnemar_exact,
    newcombe_paired,
    newcombe_unpaired,
    wilson,
)
from pytest_hud.evaluation.sequential_gates import (  # noqa: E402
    BaselineGate,
    FixedThresholdGate,
    ThresholdGate,
    Verdict,
    fixed_n_for_power,
)

#: (discordance, effect 2q - 1) of the paired case; effect 0 is equal arms
PAIRED_CASES = [(d, e) for d in (0.2, 0.5) for e in (0.0, 0.3, 0.5, 0.8, 1.0)]


def sessions(
    rng: np.random.Generator, runs: int, pairs: int, discordance: float, effect: float
) -> tuple[np.ndarray, np.ndarray]:
    """Simulated paired sessions: the arms disagree on a pair with probability
    ``discordance`` and B wins a disagreement with probability (1 + effect) / 2."""
    disc = rng.random((runs, pairs)) < discordance
    b_wins = rng.random((runs, pairs)) < (1 + effect) / 2
    same = rng.random((runs, pairs)) < 0.5
    return np.where(disc, ~b_wins, same), np.where(disc, b_wins, same)


def paired(a: argparse.Namespace) -> None:
    test = PairedSequentialTest(a.alpha, a.beta, a.delta, a.max_pairs, exact=not a.ville)
    rng = np.random.default_rng(a.seed)
    bound = crossing_probability(test.upper, 0.5) + crossing_probability(
        np.arange(a.max_pairs + 1) - test.lower, 0.5
    )
    print(
        f"paired sequential test: alpha {a.alpha}, beta {a.beta}, delta {a.delta} "
        f"(B wins {(1 + a.delta) / 2:.0%} of the discordant pairs), max_pairs {a.max_pairs}, "
        f"{a.runs} simulated sessions per row; exact bound on the type-I error within "
        f"max_pairs (without the futility stop): {bound:.2%}"
    )
    head = [
        "discordance", "2q-1", "rate diff", "better", "worse", "no difference", "undecided",
        "mean pairs", "median", "fixed n, same power", "mean / fixed", "fixed n, 1-beta at delta",
    ]  # fmt: skip
    rows, null_errors = [], []
    for d, effect in PAIRED_CASES:
        code, used = test.run(*sessions(rng, a.runs, a.max_pairs, d, effect))
        share = {c: float((code == c).mean()) for c in (BETTER, WORSE, NO_DIFFERENCE, UNDECIDED)}
        design = fixed_n_pairs(a.alpha, a.beta, a.delta, d)
        same, ratio = "-", "-"
        if effect > 0 and share[BETTER] > 0:
            # a simulated power of 1.0 only says >= 1 - 1/runs: ask the fixed test for that
            target = min(share[BETTER], 1 - 1 / a.runs)
            n_fixed = fixed_n_pairs(a.alpha, 1 - target, effect, d)
            same, ratio = str(n_fixed), f"{used.mean() / n_fixed:.2f}"
        if effect == 0:
            null_errors.append((d, int(np.isin(code, (BETTER, WORSE)).sum())))
        rows.append(
            [f"{d:.1f}", f"{effect:.1f}", f"{d * effect:+.2f}"]
            + [f"{share[c]:.1%}" for c in (BETTER, WORSE, NO_DIFFERENCE, UNDECIDED)]
            + [f"{used.mean():.1f}", f"{np.median(used):.0f}", same, ratio, str(design)]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    print("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
    for r in rows:
        print("  ".join(x.rjust(w) for x, w in zip(r, widths, strict=True)))
    lines = []
    for label, errors, n in [
        *((f"discordance {d:.1f}", e, a.runs) for d, e in null_errors),
        ("pooled", sum(e for _, e in null_errors), a.runs * len(null_errors)),
    ]:
        lo, hi = wilson(errors, n)
        lines.append(
            f"Type-I error at equal arms, {label}: {errors}/{n} = {errors / n:.2%} "
            f"(Wilson 95% [{lo:.2%}, {hi:.2%}]; alpha {a.alpha})"
        )
    note = (
        "2q-1: B's net share of the pairs where the arms disagree (the rate difference is "
        "discordance x (2q-1)); better/worse/no difference/undecided: the share of sessions "
        "ending so (at 2q-1 = 0, better + worse is the type-I error); mean pairs: pairs "
        "spent, undecided sessions counted at max_pairs; fixed n, same power: the least n "
        "at which the exact two-sided McNemar test decides better at least as often as the "
        "sequential test did; fixed n, 1-beta at delta: the usual fixed design."
    )
    for line in lines:
        print(line)
    print(note)
    if a.report:
        from _report import write_table

        write_table(
            "stats-paired",
            "Paired sequential test vs fixed-n McNemar (bench/stats.py --paired)",
            head,
            rows,
            note="\n".join(
                [
                    f"alpha {a.alpha}, beta {a.beta}, delta {a.delta}, max_pairs {a.max_pairs}, "
                    f"{a.runs} simulated sessions per row, seed {a.seed}.",
                    "",
                    *(f"- {line}" for line in lines),
                    "- Exact bound on the type-I error within max_pairs, without the futility "
                    f"stop (the crossing recursion of the rejection boundaries): {bound:.2%}",
                    "",
                    note,
                ]
            ),
        )


# -- --study: the simulation study of issue 41 ------------------------------------------------
#: the level every row of the study is run at (STEP ships decision tables for 0.05 only)
ALPHA = 0.05
#: the bounded-score generators (the candidate shifted by ``shift`` on the latent scale)
SCORE_KINDS = {
    "beta": "Beta(4m, 4(1-m)) per arm, the row's m ~ Beta(2, 2) shared by the arms",
    "clipped": "clip(0.7 + shift + 0.3 (sqrt(.5) z_row + sqrt(.5) e), 0, 1): 16% of scores at 1",
}
#: repeats: R episodes per row; row interaction sd (0/1 outcomes, bounded scores), episode sd
REPEATS, TAU_BINARY, TAU_SCORES, EPISODE_SD = 5, 0.32, 0.212, 0.15
#: rows of a fixed-n permutation test, small (exact sign patterns) and large (Monte Carlo)
EXACT_N, MC_N = 12, 30
#: K tasks for Holm: rows per task, the shift of the tasks with a true effect
TASKS, TASK_ROWS, TASK_SHIFT, TRUE_TASKS = 5, 12, 0.25, 2
#: live tests' horizon (pairs or rows); STEP's shipped table is for n_max 200
HORIZON = 200
#: power on bounded scores: the candidate's shifts and the fixed n the after-the-fact tests get
SHIFTS, FIXED_ROWS = (0.1, 0.15, 0.2), 50
#: power on 0/1 outcomes: discordance and effects 2q - 1
POWER_DISCORDANCE, POWER_EFFECTS = 0.2, (0.0, 0.3, 0.5, 0.8)
#: Inspect Robots' stake cap (its public description: 0.75, the upper end of Waudby-Smith
#: and Ramdas' advice)
INSPECT_CAP = 0.75
CODES = {BETTER: "better", WORSE: "worse", NO_DIFFERENCE: "no difference", UNDECIDED: None}


@dataclass(frozen=True)
class Share:
    """``hits`` of ``n`` simulated sessions: a rate and its Monte-Carlo standard error."""

    hits: int
    n: int

    @property
    def rate(self) -> float:
        return self.hits / self.n if self.n else math.nan

    @property
    def se(self) -> float:
        return math.sqrt(self.rate * (1 - self.rate) / self.n) if self.n else math.nan

    def cell(self) -> str:
        return f"{self.rate:.2%} ± {self.se:.2%}"


def share(mask: ArrayLike) -> Share:
    m = np.asarray(mask, dtype=bool)
    return Share(int(m.sum()), int(m.size))


def mean_cell(x: ArrayLike) -> str:
    v = np.asarray(x, dtype=np.float64)
    se = v.std(ddof=1) / math.sqrt(v.size) if v.size > 1 else math.nan
    return f"{v.mean():.1f} ± {se:.1f}"


@dataclass(frozen=True)
class Check:
    """One type-I row: ``valid`` tests claim ``level``; the naive ones are shown exceeding it."""

    data: str
    test: str
    stopping: str
    share: Share
    valid: bool
    level: float = ALPHA

    @property
    def within(self) -> bool:
        """At most the level plus three Monte-Carlo standard errors."""
        return self.share.rate <= self.level + 3 * self.share.se


@dataclass
class Table:
    title: str
    head: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass
class Section:
    tables: list[Table]
    checks: list[Check] = field(default_factory=list)


@dataclass(frozen=True)
class Size:
    """Sessions per row: ``runs`` where the class is vectorised (or cheap per session),
    ``slow`` where it runs one session at a time in Python."""

    runs: int
    slow: int


def chunked(runs: int, chunk: int = 4000) -> list[int]:
    return [min(chunk, runs - i) for i in range(0, runs, chunk)]


def scores(
    rng: np.random.Generator, runs: int, rows: int, kind: str, shift: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """(reference, candidate) scores in [0, 1], shape (runs, rows), correlated within a row
    through a shared latent (SCORE_KINDS); at ``shift`` 0 the arms are exchangeable."""
    if kind == "beta":
        m = rng.beta(2.0, 2.0, (runs, rows))
        mb = np.clip(m + shift, 0.02, 0.98)
        return rng.beta(4 * m, 4 * (1 - m)), rng.beta(4 * mb, 4 * (1 - mb))
    z = math.sqrt(0.5) * rng.standard_normal((runs, rows))

    def arm(s: float) -> np.ndarray:
        e = math.sqrt(0.5) * rng.standard_normal((runs, rows))
        return np.clip(0.7 + s + 0.3 * (z + e), 0.0, 1.0)

    return arm(0.0), arm(shift)


def repeated(
    rng: np.random.Generator, runs: int, rows: int, binary: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Equal arms over the row population, R = REPEATS episodes per row (shape (runs, rows,
    R)): row i's arms sit at base_i -+ u_i / 2 with u_i ~ N(0, tau) (the candidate is better
    on some rows, worse on others, equal on average), so a row's episode differences share
    u_i: the intra-row correlation the naive test ignores. 0/1: the latent above 0.5."""
    tau = TAU_BINARY if binary else TAU_SCORES
    base = rng.normal(0.0, 0.15, (runs, rows, 1))
    u = rng.normal(0.0, tau, (runs, rows, 1))
    la = 0.5 + base - u / 2 + rng.normal(0.0, EPISODE_SD, (runs, rows, REPEATS))
    lb = 0.5 + base + u / 2 + rng.normal(0.0, EPISODE_SD, (runs, rows, REPEATS))
    if binary:
        return (la > 0.5).astype(np.float64), (lb > 0.5).astype(np.float64)
    return np.clip(la, 0.0, 1.0), np.clip(lb, 0.0, 1.0)


def intra_row_correlation(d: np.ndarray) -> float:
    """The one-way ANOVA estimate of the intra-row correlation of episode differences
    ``d`` (runs, rows, R)."""
    r = d.shape[2]
    within = float(d.var(axis=2, ddof=1).mean())
    between = float(d.mean(axis=2).var(axis=1, ddof=1).mean()) - within / r
    return between / (between + within)


def clipped_mean(mu: float, sd: float) -> float:
    """E[clip(X, 0, 1)] for X ~ N(mu, sd): the true mean of a 'clipped' arm."""
    from scipy.stats import norm

    lo, hi = (0.0 - mu) / sd, (1.0 - mu) / sd
    inside = mu * (norm.cdf(hi) - norm.cdf(lo)) + sd * (norm.pdf(lo) - norm.pdf(hi))
    return float(inside + norm.sf(hi))


def run_sequential(
    test: PairedSequentialTest, gen: Callable[[int], tuple[np.ndarray, np.ndarray]], runs: int
) -> tuple[np.ndarray, np.ndarray]:
    """``PairedSequentialTest.run`` over ``runs`` sessions drawn by ``gen(n)`` in chunks."""
    codes, used = [], []
    for n in chunked(runs):
        c, u = test.run(*gen(n))
        codes.append(c)
        used.append(u)
    return np.concatenate(codes), np.concatenate(used)


def run_betting(
    diffs: np.ndarray, delta: float = 0.1, max_pairs: int = HORIZON
) -> tuple[np.ndarray, np.ndarray]:
    """One ``PairedBettingTest`` per row of ``diffs`` (candidate minus reference, in
    [-1, 1]), fed until it decides: its decision code and the rows it used."""
    codes = np.zeros(len(diffs), dtype=np.int8)
    used = np.zeros(len(diffs), dtype=np.int64)
    named = {v: k for k, v in CODES.items()}
    for i, row in enumerate(diffs):
        test = PairedBettingTest(ALPHA, delta, max_pairs)
        for d in row[:max_pairs].tolist():
            if test.update(d) is not None:
                break
        codes[i], used[i] = named[test.decision], test.pairs_used
    return codes, used


def run_step(
    a: np.ndarray, b: np.ndarray, seed: int, n_max: int = HORIZON
) -> tuple[np.ndarray, np.ndarray]:
    """One ``BaselineGate`` (mirrored STEP) per session, fed (reference, candidate) pairs
    until it decides: +1 better, -1 worse, 0 undecided, and the pairs it used."""
    codes = np.zeros(len(a), dtype=np.int8)
    used = np.full(len(a), n_max, dtype=np.int64)
    for i, (ra, rb) in enumerate(zip(a, b, strict=True)):
        gate = BaselineGate(ALPHA, n_max, seed=seed + i)
        for x, y in zip(ra.tolist(), rb.tolist(), strict=True):
            decision = gate.update(x, y)
            if decision.decided:
                codes[i] = 1 if decision.verdict is Verdict.BETTER else -1
                used[i] = decision.episodes
                break
    return codes, used


def inspect_eprocess(x: np.ndarray, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Our reading of the e-value Inspect Robots' ``compare`` reports (from its public
    description and source, inspect_robots.evidence.anytime_valid_test; reimplemented here
    for the bench only, vectorised over sessions). Per session (a row of ``x``: per-scene
    values in [-1, 1], the sign of the difference or the difference itself, positive when
    the candidate did better) two test martingales bet on the next scene, one on each
    direction, with a predictable plug-in stake mean / (variance + mean^2) from the scenes
    before (one pseudo-scene of mean 0 and variance 1/4), capped at INSPECT_CAP; their
    average is the e-process. Returns the first scene at which it reached 1 / alpha (0:
    never) and the side it favoured then (+1 candidate, -1 reference)."""
    runs, n = x.shape
    log_up, log_down = np.zeros(runs), np.zeros(runs)
    total, total_sq = np.zeros(runs), np.zeros(runs)
    crossed = np.zeros(runs, dtype=np.int64)
    side = np.zeros(runs, dtype=np.int8)
    level = math.log(1.0 / alpha)
    for t in range(n):
        mean = total / (t + 1)
        var = (0.25 + total_sq - t * mean * mean) / (t + 1)
        denom = np.maximum(var + mean * mean, 1e-12)
        up = np.clip(mean / denom, 0.0, INSPECT_CAP)
        down = np.clip(-mean / denom, 0.0, INSPECT_CAP)
        xt = x[:, t]
        log_up += np.log1p(up * xt)
        log_down += np.log1p(-down * xt)
        new = (crossed == 0) & (np.logaddexp(log_up, log_down) - math.log(2.0) >= level)
        crossed[new] = t + 1
        side[new] = np.where(log_up[new] >= log_down[new], 1, -1)
        total += xt
        total_sq += xt * xt
    return crossed, side


def mcnemar_first(alpha: float, m_max: int) -> np.ndarray:
    """Per m in 0..m_max the least k >= m/2 (of m discordant pairs won by one side) at which
    ``mcnemar_exact`` is below alpha, m + 1 when none: the exact McNemar test's decision as
    a table, so that reading it after every pair can be vectorised."""
    first = np.arange(m_max + 1) + 1
    for m in range(1, m_max + 1):
        lo, hi = (m + 1) // 2, m
        if mcnemar_exact(0, m) >= alpha:
            continue
        while lo < hi:  # p falls as k grows past m/2
            mid = (lo + hi) // 2
            if mcnemar_exact(m - mid, mid) < alpha:
                hi = mid
            else:
                lo = mid + 1
        first[m] = lo
    return first


def pair_counts_of(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(both, a_only, b_only, neither) per session of 0/1 pairs (runs, n)."""
    a, b = a.astype(bool), b.astype(bool)
    return np.stack(
        [(a & b).sum(1), (a & ~b).sum(1), (~a & b).sum(1), (~a & ~b).sum(1)], axis=1
    ).astype(np.int64)


def mcnemar_rejects(counts: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """``summarize_counts``' verdict (exact McNemar, fixed n) is better or worse."""
    return np.array(
        [
            summarize_counts(*map(int, c), alpha=alpha)["verdict"] in ("better", "worse")
            for c in counts
        ]
    )


def permutation_rejects(diffs: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """``permutation_p`` on each session's row differences is at most alpha (the rule of
    ``paired_scores``)."""
    return np.array([permutation_p(d) <= alpha for d in diffs])


def typeone(rng: np.random.Generator, size: Size) -> Section:
    """Part 1: the type-I error at alpha of every test and gate (equal arms)."""
    checks: list[Check] = []
    live, fixed = f"live, <= {HORIZON}", "fixed n"

    # 0/1 outcomes: the paired sequential test, exact McNemar, naive reading, STEP, betting
    for d in (0.2, 0.5):
        test = PairedSequentialTest(ALPHA, 0.2, 0.5, 2 * HORIZON)
        code, _ = run_sequential(
            test, lambda n, d=d: sessions(rng, n, 2 * HORIZON, d, 0.0), size.runs
        )
        checks.append(
            Check(
                f"0/1, discordance {d}",
                "paired sequential (PairedSequentialTest)",
                f"live, <= {2 * HORIZON} pairs",
                share(np.isin(code, (BETTER, WORSE))),
                True,
            )
        )
    d = 0.2
    a, b = sessions(rng, size.runs, 100, d, 0.0)
    checks.append(
        Check(
            f"0/1, discordance {d}",
            "exact McNemar (summarize_counts)",
            "fixed n = 100 pairs",
            share(mcnemar_rejects(pair_counts_of(a, b))),
            True,
        )
    )
    first = mcnemar_first(ALPHA, 2 * HORIZON)
    hits = []
    for n in chunked(size.runs):
        a, b = sessions(rng, n, 2 * HORIZON, d, 0.0)
        m = np.cumsum(a != b, axis=1)
        k = np.cumsum(b & ~a, axis=1)
        hits.append(((k >= first[m]) | (m - k >= first[m])).any(axis=1))
    checks.append(
        Check(
            f"0/1, discordance {d}",
            "naive: exact McNemar read after every pair, stop at p < alpha",
            f"live, <= {2 * HORIZON} pairs",
            share(np.concatenate(hits)),
            False,
        )
    )
    a, b = sessions(rng, size.slow, HORIZON, d, 0.0)
    code, _ = run_step(a, b, seed=int(rng.integers(1 << 30)))
    for side, name in ((-1, "WORSE"), (1, "BETTER")):
        checks.append(
            Check(
                f"0/1, discordance {d}",
                f"STEP (BaselineGate), {name} (alpha a side)",
                f"live, <= {HORIZON} pairs",
                share(code == side),
                True,
            )
        )
    a, b = sessions(rng, size.slow, HORIZON, d, 0.0)
    code, _ = run_betting(b.astype(np.float64) - a)
    checks.append(
        Check(
            f"0/1, discordance {d}",
            "betting (PairedBettingTest) on differences in {-1, 0, 1}",
            f"live, <= {HORIZON} pairs",
            share(np.isin(code, (BETTER, WORSE))),
            True,
        )
    )
    a, b = sessions(rng, size.runs, HORIZON, d, 0.0)
    crossed, _ = inspect_eprocess(np.sign(b.astype(np.float64) - a))
    checks.append(
        Check(
            f"0/1, discordance {d}",
            "Inspect-style e-process (sign), our reading",
            f"live, <= {HORIZON} pairs",
            share(crossed > 0),
            True,
        )
    )
    gate = ThresholdGate(0.6, ALPHA, HORIZON)
    verdict = np.concatenate(
        [gate.run(rng.random((n, HORIZON)) < 0.6)[0] for n in chunked(size.runs)]
    )
    checks.append(
        Check(
            "0/1, one arm at the bar 0.6",
            "threshold gate (ThresholdGate)",
            f"live, <= {HORIZON} episodes",
            share(verdict != 0),
            True,
        )
    )

    # bounded scores, equal arms
    for kind in SCORE_KINDS:
        data = f"scores, {kind}"
        a, b = scores(rng, size.runs, EXACT_N, kind)
        checks.append(
            Check(
                data,
                "sign-flip permutation (permutation_p), exact",
                f"{fixed} = {EXACT_N} rows",
                share(permutation_rejects(b - a)),
                True,
            )
        )
        a, b = scores(rng, size.slow, MC_N, kind)
        checks.append(
            Check(
                data,
                "sign-flip permutation (permutation_p), Monte Carlo",
                f"{fixed} = {MC_N} rows",
                share(permutation_rejects(b - a)),
                True,
            )
        )
        a, b = scores(rng, size.slow, HORIZON, kind)
        code, _ = run_betting(b - a)
        checks.append(
            Check(
                data,
                "betting (PairedBettingTest)",
                f"{live} rows",
                share(np.isin(code, (BETTER, WORSE))),
                True,
            )
        )
        a, b = scores(rng, size.slow, EXACT_ROWS, kind)
        naive = [
            any(permutation_p(row[:n]) <= ALPHA for n in range(1, EXACT_ROWS + 1)) for row in b - a
        ]
        checks.append(
            Check(
                data,
                "naive: permutation_p read after every row, stop at p <= alpha",
                f"live, <= {EXACT_ROWS} rows",
                share(naive),
                False,
            )
        )
        a, b = scores(rng, size.runs, HORIZON, kind)
        for form, x in (("sign", np.sign(b - a)), ("mean", b - a)):
            crossed, _ = inspect_eprocess(x)
            checks.append(
                Check(
                    data,
                    f"Inspect-style e-process ({form}), our reading",
                    f"{live} rows",
                    share(crossed > 0),
                    True,
                )
            )
        a, _ = scores(rng, size.slow, MC_N, kind)
        truth = 0.5 if kind == "beta" else clipped_mean(0.7, 0.3)
        miss = [not lo <= truth <= hi for lo, hi in map(betting_interval, a)]
        checks.append(
            Check(
                data + ", one arm",
                "betting_interval misses the true mean",
                f"{fixed} = {MC_N} rows",
                share(miss),
                True,
            )
        )

    # repeats per row: rows as units (row_means) vs episodes as units
    icc = {}
    keys = [(i,) for i in range(EXACT_N) for _ in range(REPEATS)]
    for binary in (True, False):
        data = f"{'0/1' if binary else 'scores'}, {REPEATS} repeats per row"
        a, b = repeated(rng, size.runs, EXACT_N, binary)
        icc[binary] = intra_row_correlation(b - a)
        clustered = [
            permutation_p(list(row_means(zip(keys, x.tolist(), strict=True)).values())) <= ALPHA
            for x in (b - a).reshape(size.runs, -1)
        ]
        checks.append(
            Check(
                data,
                "rows as units: permutation_p on row_means",
                f"{fixed} = {EXACT_N} rows",
                share(clustered),
                True,
            )
        )
        episodes = f"{fixed} = {EXACT_N * REPEATS} episodes"
        if binary:
            counts = pair_counts_of(a.reshape(size.runs, -1), b.reshape(size.runs, -1))
            test, rejects = "naive: exact McNemar on episodes as units", mcnemar_rejects(counts)
        else:
            a, b = repeated(rng, size.slow, EXACT_N, binary)
            test = "naive: permutation_p on episodes as units"
            rejects = permutation_rejects((b - a).reshape(size.slow, -1))
        checks.append(Check(data, test, episodes, share(rejects), False))
    a, b = repeated(rng, size.slow, HORIZON, False)
    code, _ = run_betting((b - a).mean(axis=2))
    checks.append(
        Check(
            f"scores, {REPEATS} repeats per row",
            "betting (PairedBettingTest) on row means",
            f"{live} rows",
            share(np.isin(code, (BETTER, WORSE))),
            True,
        )
    )

    head = [
        "data",
        "test",
        "stopping",
        "sessions",
        "type-I error ± SE",
        "claims alpha",
        "<= alpha + 3 SE",
    ]
    rows = [
        [
            c.data,
            c.test,
            c.stopping,
            str(c.share.n),
            c.share.cell(),
            f"{c.level:g}" if c.valid else "no (naive)",
            "yes" if c.within else "NO",
        ]
        for c in checks
    ]
    note = (
        f"Equal arms, alpha {ALPHA}: a row's type-I error is the share of sessions deciding "
        "better or worse (both sides), except STEP, whose guarantee is alpha on each side "
        "(BaselineGate: P(worse) <= alpha when the candidate is at least as good, P(better) "
        "<= alpha when it is at most as good), so each side is a row. 0/1 pairs: the arms "
        "disagree with the given probability, a disagreement is won by either with 1/2. "
        f"Scores: {SCORE_KINDS['beta']} (arms' correlation about 0.56), or "
        f"{SCORE_KINDS['clipped']} (correlation about 0.48 after clipping); the betting "
        "test's delta is 0.1. Repeats: row i's arms at base_i -+ u_i/2, u_i ~ N(0, "
        f"{TAU_BINARY} for 0/1, {TAU_SCORES} for scores), episode noise sd {EPISODE_SD}, so the "
        "candidate is better on some rows and worse on others, equal over the rows; measured "
        f"intra-row correlation of the episode differences {icc[True]:.2f} (0/1) and "
        f"{icc[False]:.2f} (scores). Naive rows (claims alpha: no) are the procedures the "
        "anytime-valid and clustered tests replace; they are expected to exceed alpha."
    )
    return Section([Table("Type-I error at alpha 0.05", head, rows, note)], checks)


def holm_tasks(rng: np.random.Generator, size: Size) -> Section:
    """K tasks, one permutation test each: Holm vs Bonferroni vs no correction."""
    head = [
        "tasks with an effect",
        "procedure",
        "family-wise error ± SE",
        "claims alpha",
        "power per true effect ± SE",
        "all true effects found ± SE",
    ]
    rows, checks = [], []
    names = [f"task{j}" for j in range(TASKS)]
    for true in (0, TRUE_TASKS):
        p = np.empty((size.runs, TASKS))
        for j in range(TASKS):
            a, b = scores(rng, size.runs, TASK_ROWS, "clipped", TASK_SHIFT if j < true else 0.0)
            p[:, j] = [permutation_p(x) for x in b - a]
        holm_rejects = np.array(
            [
                [holm(dict(zip(names, row.tolist(), strict=True)), ALPHA)[k] for k in names]
                for row in p
            ]
        )
        for procedure, rejects, valid in (
            ("Holm (bounded.holm)", holm_rejects, True),
            (f"Bonferroni (p <= alpha/{TASKS})", p <= ALPHA / TASKS, True),
            ("none (p <= alpha per task)", p <= ALPHA, False),
        ):
            fwe = share(rejects[:, true:].any(axis=1))
            checks.append(
                Check(
                    f"{TASKS} tasks, {true} with an effect",
                    procedure,
                    f"fixed n = {TASK_ROWS} rows a task",
                    fwe,
                    valid,
                )
            )
            found = rejects[:, :true]
            rows.append(
                [
                    f"{true} of {TASKS}",
                    procedure,
                    fwe.cell(),
                    f"{ALPHA:g}" if valid else "no",
                    share(found).cell() if true else "-",
                    share(found.all(axis=1)).cell() if true else "-",
                ]
            )
    note = (
        f"{TASKS} tasks, {TASK_ROWS} rows each, scores 'clipped'; a task with an effect has its "
        f"candidate shifted by {TASK_SHIFT} (mean difference "
        f"{clipped_mean(0.7 + TASK_SHIFT, 0.3) - clipped_mean(0.7, 0.3):.3f}); one sign-flip "
        "permutation test per task (exact); family-wise error: the share of sessions that "
        "reject at least one task without an effect. Under the global null Holm and "
        "Bonferroni reject exactly the same sessions (Holm's first step is Bonferroni's test)."
    )
    return Section([Table(f"K = {TASKS} tasks: Holm vs Bonferroni", head, rows, note)], checks)


def power_binary(rng: np.random.Generator, size: Size) -> Section:
    """Part 2, 0/1: power and pairs to a decision, ours vs fixed-n McNemar vs STEP."""
    d = POWER_DISCORDANCE
    head = [
        "2q-1",
        "rate diff",
        "test",
        "alpha a side",
        "sessions",
        "better ± SE",
        "worse ± SE",
        "mean pairs ± SE",
        "fixed n, same power",
        "mean / fixed",
    ]
    rows, checks = [], []
    for effect in POWER_EFFECTS:
        lead = [f"{effect:.1f}", f"{d * effect:+.2f}"]
        results = []
        for alpha in (ALPHA, 2 * ALPHA):
            test = PairedSequentialTest(alpha, 0.2, 0.5, HORIZON)
            code, used = run_sequential(
                test, lambda n, e=effect: sessions(rng, n, HORIZON, d, e), size.runs
            )
            results.append((f"paired sequential, alpha {alpha:g} two-sided", alpha, code, used))
        a, b = sessions(rng, size.slow, HORIZON, d, effect)
        code, used = run_step(a, b, seed=int(rng.integers(1 << 30)))
        results.append((f"STEP (BaselineGate, n_max {HORIZON})", 2 * ALPHA, code, used))
        for name, alpha, code, used in results:
            better, worse = share(code == BETTER), share(code == WORSE)
            same, ratio = "-", "-"
            if effect > 0 and better.rate > 0:
                target = min(better.rate, 1 - 1 / better.n)
                n_fixed = fixed_n_pairs(alpha, 1 - target, effect, d)
                same, ratio = str(n_fixed), f"{used.mean() / n_fixed:.2f}"
            if effect == 0:
                checks.append(
                    Check(
                        f"0/1, discordance {d}",
                        name,
                        f"live, <= {HORIZON} pairs",
                        share(np.isin(code, (BETTER, WORSE))),
                        True,
                        level=alpha,
                    )
                )
            rows.append(
                [
                    *lead,
                    name,
                    f"{alpha / 2:g}",
                    str(better.n),
                    better.cell(),
                    worse.cell(),
                    mean_cell(used),
                    same,
                    ratio,
                ]
            )
        for alpha in (ALPHA, 2 * ALPHA):
            power = mcnemar_power(HORIZON, alpha, effect, d) if effect > 0 else math.nan
            rows.append(
                [
                    *lead,
                    f"exact McNemar, fixed n = {HORIZON}, alpha {alpha:g} two-sided",
                    f"{alpha / 2:g}",
                    "exact",
                    "-" if effect == 0 else f"{power:.2%}",
                    "-",
                    str(HORIZON),
                    "-",
                    "-",
                ]
            )
    note = (
        f"0/1 pairs, discordance {d}; B wins a disagreement with q = (1 + (2q-1))/2. STEP's "
        "guarantee is alpha on each side, so ours and the fixed test are shown at two-sided "
        f"{ALPHA:g} and {2 * ALPHA:g} (alpha a side {ALPHA / 2:g} and {ALPHA:g}). Ours: "
        f"PairedSequentialTest(beta 0.2, delta 0.5, max_pairs {HORIZON}), which may stop for "
        "'no difference' (futility); STEP has no futility stop and runs to n_max. Mean pairs "
        "counts undecided sessions at the horizon. Fixed n, same power: the least n at which "
        "the exact two-sided McNemar test at the same alpha a side decides better at least "
        "as often (fixed_n_pairs); the fixed rows' power is exact (mcnemar_power). At 2q-1 = "
        "0 'better' and 'worse' are each side's type-I error."
    )
    return Section([Table("Power and pairs to a decision, 0/1 outcomes", head, rows, note)], checks)


def power_scores(rng: np.random.Generator, size: Size) -> Section:
    """Part 2, bounded scores: the betting test vs fixed-n permutation vs Inspect's e-value."""
    head = [
        "shift",
        "mean diff",
        "test",
        "rows",
        "sessions",
        "better ± SE",
        "worse ± SE",
        "mean rows ± SE",
    ]
    rows = []
    for shift in SHIFTS:
        lead = [f"{shift:g}", f"{clipped_mean(0.7 + shift, 0.3) - clipped_mean(0.7, 0.3):+.3f}"]
        a, b = scores(rng, size.slow, HORIZON, "clipped", shift)
        code, used = run_betting(b - a)
        early = (code == BETTER) & (used <= FIXED_ROWS)
        rows.append(
            [
                *lead,
                "betting (PairedBettingTest), live",
                f"<= {HORIZON}",
                str(len(code)),
                share(code == BETTER).cell(),
                share(code == WORSE).cell(),
                mean_cell(used),
            ]
        )
        rows.append(
            [
                *lead,
                "betting, decided better by row " + str(FIXED_ROWS),
                f"<= {FIXED_ROWS}",
                str(len(code)),
                share(early).cell(),
                "-",
                "-",
            ]
        )
        for n in (FIXED_ROWS, round(used.mean())):
            a, b = scores(rng, size.slow, n, "clipped", shift)
            p = np.array([permutation_p(x) for x in b - a])
            rows.append(
                [
                    *lead,
                    "sign-flip permutation (permutation_p), fixed n",
                    str(n),
                    str(len(p)),
                    share((p <= ALPHA) & ((b - a).sum(1) > 0)).cell(),
                    share((p <= ALPHA) & ((b - a).sum(1) < 0)).cell(),
                    str(n),
                ]
            )
        a, b = scores(rng, size.runs, HORIZON, "clipped", shift)
        for form, x in (("sign", np.sign(b - a)), ("mean", b - a)):
            crossed, side = inspect_eprocess(x)
            by = (crossed > 0) & (crossed <= FIXED_ROWS)
            rows.append(
                [
                    *lead,
                    f"Inspect-style e-value ({form}) >= 1/alpha after the fact",
                    str(FIXED_ROWS),
                    str(len(x)),
                    share(by & (side > 0)).cell(),
                    share(by & (side < 0)).cell(),
                    str(FIXED_ROWS),
                ]
            )
            spent = np.where(crossed > 0, crossed, HORIZON)
            rows.append(
                [
                    *lead,
                    f"Inspect-style e-process ({form}) read live",
                    f"<= {HORIZON}",
                    str(len(x)),
                    share((crossed > 0) & (side > 0)).cell(),
                    share((crossed > 0) & (side < 0)).cell(),
                    mean_cell(spent),
                ]
            )
    note = (
        f"Scores 'clipped' ({SCORE_KINDS['clipped']}), the candidate shifted by 'shift' on the "
        "latent scale (mean diff: the true difference of the clipped means). Betting: "
        f"PairedBettingTest(alpha {ALPHA:g}, delta 0.1, max_pairs {HORIZON}) on the row "
        "differences, stopped at its first decision (it may stop for 'no difference'); mean "
        "rows counts undecided sessions at the horizon. The fixed-n permutation test is run "
        f"at n = {FIXED_ROWS} and at n = the betting test's mean rows. Inspect-style: our "
        "reading of the e-value Inspect Robots' compare reports after the fact (its public "
        "description: a betting e-process over the per-scene differences, sign by default, "
        "or the mean; two one-sided martingales averaged, plug-in stake mean / (variance + "
        f"mean^2) capped at {INSPECT_CAP}; 'e' is its value at the first crossing of 1/alpha "
        "or at the last scene); a session counts as separated when that e-value is >= "
        f"1/alpha with n = {FIXED_ROWS} scenes, and 'read live' stops at the first crossing. "
        "Its own 'separated' verdict reads a fixed-n sign-flip permutation test, the same "
        "test as our permutation_p row."
    )
    return Section([Table("Power on bounded scores", head, rows, note)])


def least_n(decides: Callable[[int], np.ndarray], target: float = 0.8, start: int = 16) -> int:
    """The least n at which the share of simulated sessions ``decides(n)`` that decide
    reaches ``target`` (doubling, then bisection; simulated power is noisy and exact power
    saw-toothed: read it as about n)."""
    lo, hi = 1, start
    while decides(hi).mean() < target:
        lo, hi = hi, 2 * hi
    while lo < hi:
        mid = (lo + hi) // 2
        if decides(mid).mean() >= target:
            hi = mid
        else:
            lo = mid + 1
    return hi


def example(rng: np.random.Generator, size: Size) -> Section:
    """Part 3: a 90% baseline, a candidate at 90% (not dropped by more than 5 points?) or
    at 85% (dropped?), paired vs unpaired, episodes for 80% power."""
    base, margin, disc, z = 0.9, 0.05, 0.04, 1.959964
    runs = size.runs

    def unpaired_pass(n: int, cand: float) -> np.ndarray:
        sa, sb = rng.binomial(n, base, runs), rng.binomial(n, cand, runs)
        return np.array(
            [
                newcombe_unpaired(int(x), n, int(y), n, z)[0] > -margin
                for x, y in zip(sa, sb, strict=True)
            ]
        )

    def paired_counts(n: int, a_only: float, b_only: float, r: int = runs) -> np.ndarray:
        both = base - a_only
        return rng.multinomial(n, [both, a_only, b_only, 1 - both - a_only - b_only], r)

    def paired_pass(n: int, a_only: float, b_only: float) -> np.ndarray:
        return np.array(
            [
                newcombe_paired(*map(int, c), z)[0] > -margin
                for c in paired_counts(n, a_only, b_only)
            ]
        )

    head = ["question", "design", "test", "episodes per arm", "power ± SE", "physim-gate"]
    rows, checks = [], []
    q = f"not dropped by > {margin:.0%} (both at {base:.0%})"
    n_u = least_n(lambda n: unpaired_pass(n, base))
    power_u = share(unpaired_pass(n_u, base))
    n_p = least_n(lambda n: paired_pass(n, disc / 2, disc / 2))
    power_p = share(paired_pass(n_p, disc / 2, disc / 2))
    rows.append(
        [
            q,
            "unpaired",
            "Newcombe hybrid score 95% interval above -5 points (newcombe_unpaired)",
            str(n_u),
            power_u.cell(),
            "573",
        ]
    )
    rows.append(
        [
            q,
            f"paired, discordance {disc:.0%}",
            "Newcombe paired 95% interval above -5 points (newcombe_paired)",
            str(n_p),
            power_p.cell(),
            "173",
        ]
    )
    rows.append([q, "unpaired / paired", "-", f"{n_u / n_p:.2f}", "-", f"{573 / 173:.2f}"])
    # the same verdicts when the candidate truly dropped by the margin: 'not dropped' is wrong
    q = f"wrongly 'not dropped' (candidate at {base - margin:.0%})"
    for design, test, n, passes in (
        ("unpaired", "newcombe_unpaired", n_u, unpaired_pass(n_u, base - margin)),
        (
            f"paired, only A {disc / 2 + margin:.1%}, only B {disc / 2:.0%}",
            "newcombe_paired",
            n_p,
            paired_pass(n_p, disc / 2 + margin, disc / 2),
        ),
    ):
        check = Check(q, test, f"fixed n = {n}", share(passes), True, level=ALPHA / 2)
        checks.append(check)
        rows.append(
            [q, design, f"{test}, at most {ALPHA / 2:g} claimed", str(n), check.share.cell(), "-"]
        )

    cand = base - margin
    q = f"dropped? (candidate at {cand:.0%})"

    def unpaired_drop(n: int) -> np.ndarray:
        sa, sb = rng.binomial(n, base, runs), rng.binomial(n, cand, runs)
        return np.array(
            [newcombe_unpaired(int(x), n, int(y), n, z)[1] < 0 for x, y in zip(sa, sb, strict=True)]
        )

    n_d = least_n(unpaired_drop)
    rows.append(
        [
            q,
            "unpaired",
            "Newcombe hybrid score 95% interval below 0",
            str(n_d),
            share(unpaired_drop(n_d)).cell(),
            "-",
        ]
    )
    for d in (0.07, 0.10, 0.15):
        a_only, b_only = (d + margin) / 2, (d - margin) / 2

        def mcnemar_drop(n: int, a_only: float = a_only, b_only: float = b_only) -> np.ndarray:
            return np.array(
                [
                    summarize_counts(*map(int, c))["verdict"] == "worse"
                    for c in paired_counts(n, a_only, b_only)
                ]
            )

        n_m = least_n(mcnemar_drop)
        design = f"paired, discordance {d:.0%}"
        rows.append(
            [
                q,
                design,
                "exact McNemar (summarize_counts), fixed n",
                str(n_m),
                share(mcnemar_drop(n_m)).cell(),
                "-",
            ]
        )
        effect = -margin / d
        exact = fixed_n_pairs(ALPHA, 0.2, -effect, d)
        rows.append(
            [
                q,
                design,
                "exact McNemar, computed (fixed_n_pairs)",
                str(exact),
                ">= 80% (exact)",
                "-",
            ]
        )
        test = PairedSequentialTest(ALPHA, 0.2, -effect, 1000)  # designed for this effect
        probs = [base - a_only, a_only, b_only, 1 - base - b_only]

        def gen(n: int, probs: list[float] = probs) -> tuple[np.ndarray, np.ndarray]:
            cat = rng.choice(4, size=(n, 1000), p=probs)
            return cat <= 1, (cat == 0) | (cat == 2)

        code, used = run_sequential(test, gen, runs)
        rows.append(
            [
                q,
                design,
                "paired sequential (PairedSequentialTest), mean pairs, live",
                mean_cell(used),
                share(code == WORSE).cell(),
                "-",
            ]
        )
    note = (
        f"Baseline at {base:.0%}. Non-inferiority (physim-gate's example, `plan --rate 0.9 "
        f"--margin 0.05 --discordance 0.04`): both arms truly at {base:.0%}, the verdict "
        "'not dropped by more than 5 points' when the two-sided 95% interval of the "
        "difference lies above -5 points; paired pairs disagree 4% of the time (2% each "
        "way); at the same n with the candidate truly at 85% that verdict is an error (the "
        "interval's lower end is a one-sided 2.5% test). Drop: the candidate truly at "
        "85%; paired at discordance d, A alone succeeds (d + 5%)/2 of the pairs and B "
        "alone (d - 5%)/2 (a 5-point drop needs d >= 5%). "
        f"Episodes per arm: the least n whose simulated power ({runs} sessions per n, "
        "doubling then bisection) reaches 80%, read as about n (simulated power is noisy "
        "and exact power saw-toothed); the sequential rows give their mean pairs to a "
        "decision and their power (PairedSequentialTest designed for the effect: beta 0.2, "
        "delta = 5 points / d, max_pairs 1000). physim-gate's figures are from its "
        "release notes (v0.2.0, v0.3.0)."
    )
    return Section([Table("The 90%-vs-85% example: paired vs unpaired", head, rows, note)], checks)


SECTIONS: dict[str, Callable[[np.random.Generator, Size], Section]] = {
    "typeone": typeone,
    "tasks": holm_tasks,
    "power-binary": power_binary,
    "power-scores": power_scores,
    "example": example,
}


def print_table(table: Table) -> None:
    widths = [max(len(h), *(len(r[i]) for r in table.rows)) for i, h in enumerate(table.head)]
    print(f"\n== {table.title}")
    print("  ".join(h.rjust(w) for h, w in zip(table.head, widths, strict=True)))
    for r in table.rows:
        print("  ".join(x.rjust(w) for x, w in zip(r, widths, strict=True)))
    if table.note:
        print(table.note)


def study(a: argparse.Namespace) -> list[Section]:
    size = Size(a.runs or 20_000, a.slow_runs)
    names = a.section or list(SECTIONS)
    if a.report and set(names) != set(SECTIONS):
        raise SystemExit("--report writes the whole study: drop --section")
    print(
        f"simulation study (issue 41): alpha {ALPHA}, {size.runs} sessions per vectorised row, "
        f"{size.slow} per row run one session at a time, seed {a.seed}"
    )
    out = []
    for name in names:
        start = time.perf_counter()
        section = SECTIONS[name](np.random.default_rng([a.seed, list(SECTIONS).index(name)]), size)
        for table in section.tables:
            print_table(table)
        print(f"({name}: {time.perf_counter() - start:.0f} s)")
        out.append(section)
    exceeded = [c for s in out for c in s.checks if c.valid and not c.within]
    print(
        "\nvalid tests above alpha + 3 SE: "
        + (
            "none"
            if not exceeded
            else "; ".join(f"{c.data}: {c.test} {c.share.cell()}" for c in exceeded)
        )
    )
    if a.report:
        from _report import write_tables

        write_tables(
            "stats-study",
            "Statistics: the simulation study (issue 41)",
            [(t.title, t.head, t.rows, t.note) for s in out for t in s.tables],
            note=(
                f"No GPU (numpy on the CPU). {size.runs} simulated sessions per row where the "
                f"class is vectorised or cheap per session, {size.slow} where it runs one "
                "session at a time in Python (PairedBettingTest, BaselineGate/STEP, "
                "permutation_p beyond 16 rows, betting_interval); each row says its count. "
                f"Seed {a.seed}; ± is one Monte-Carlo standard error."
            ),
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bar", type=float, default=0.6)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--n-max", type=int, default=200)
    ap.add_argument(
        "--runs", type=int, default=None, help="sessions per row (4000; --study: 20000)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--ville",
        action="store_true",
        help="Ville's 2/alpha level (any horizon) instead of the exact n_max one",
    )
    ap.add_argument("--paired", action="store_true", help="the paired A/B test instead")
    ap.add_argument("--beta", type=float, default=0.2, help="paired: futility error at delta")
    ap.add_argument("--delta", type=float, default=0.5, help="paired: the effect 2q - 1")
    ap.add_argument("--max-pairs", type=int, default=400, help="paired: pairs per session")
    ap.add_argument(
        "--report", action="store_true", help="paired, study: write docs/performance.md"
    )
    ap.add_argument("--study", action="store_true", help="the simulation study of issue 41")
    ap.add_argument(
        "--slow-runs",
        type=int,
        default=2000,
        help="study: sessions per row whose class runs one session at a time",
    )
    ap.add_argument(
        "--section", action="append", choices=list(SECTIONS), help="study: run only this part"
    )
    a = ap.parse_args()
    if a.study:
        study(a)
        return
    a.runs = a.runs or 4000
    if a.paired:
        paired(a)
        return
    gate = ThresholdGate(a.bar, a.alpha, a.n_max, exact=not a.ville)
    rng = np.random.default_rng(a.seed)
    design = max(
        fixed_n_for_power(a.bar, a.alpha, a.bar + 0.1, 0.8),
        fixed_n_for_power(a.bar, a.alpha, a.bar - 0.1, 0.8),
    )
    fixed_design = FixedThresholdGate(a.bar, a.alpha, design)
    print(
        f"bar {a.bar:.0%}, alpha {a.alpha} (alpha/2 a side), sequential n_max {a.n_max} "
        f"({'Ville level' if a.ville else 'level exact within n_max'}), "
        f"{a.runs} simulated runs per rate; fixed design: n={design} (80% power at bar+/-0.1)"
    )
    head = (
        f"{'true rate':>9}  {'seq mean eps':>12}  {'seq median':>10}  {'seq power':>9}  "
        f"{'seq wrong':>9}  {'fixed n, same power':>19}  {'saved':>6}  "
        f"{'fixed design power':>18}"
    )
    print(head)
    print("-" * len(head))
    for p in np.round(np.arange(0.3, 0.91, 0.1), 2):
        verdict, spent = gate.run(rng.random((a.runs, a.n_max)) < p)
        right = 1 if p > a.bar else -1 if p < a.bar else 0
        wrong = (verdict != 0) if right == 0 else (verdict == -right)
        power = float((verdict == right).mean()) if right else float("nan")
        if right and power > 0:
            # a simulated power of 1.0 only says >= 1 - 1/runs: ask the fixed test for that
            target = min(power, 1 - 1 / a.runs)
            n_fixed = fixed_n_for_power(a.bar, a.alpha, float(p), target)
            same, saved = f"{n_fixed}", f"{1 - spent.mean() / n_fixed:.0%}"
        else:
            same, saved = "- (at the bar)", "-"
        print(
            f"{p:>9.1f}  {spent.mean():>12.1f}  {np.median(spent):>10.0f}  "
            f"{'-' if not right else f'{power:.1%}':>9}  {wrong.mean():>9.2%}  "
            f"{same:>19}  {saved:>6}  {fixed_design.power(float(p)):>18.1%}"
        )
    print(
        "seq wrong at the bar = type-I error (either side); fixed n, same power = the exact "
        "test's n with at least the sequential gate's power at that rate"
    )


if __name__ == "__main__":
    main()
