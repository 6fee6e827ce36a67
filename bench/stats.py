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
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_hud.evaluation.mixture import crossing_probability  # noqa: E402
from pytest_hud.evaluation.proportions import wilson  # noqa: E402
from pytest_hud.evaluation.sequential import (  # noqa: E402
    FixedThresholdGate,
    ThresholdGate,
    fixed_n_for_power,
)
from pytest_hud.features.ab.paired import PairedSequentialTest, fixed_n_pairs  # noqa: E402
from pytest_hud.features.ab.paired_sequential import (  # noqa: E402
    BETTER,
    NO_DIFFERENCE,
    UNDECIDED,
    WORSE,
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bar", type=float, default=0.6)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--n-max", type=int, default=200)
    ap.add_argument("--runs", type=int, default=4000)
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
    ap.add_argument("--report", action="store_true", help="paired: write docs/performance.md")
    a = ap.parse_args()
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
