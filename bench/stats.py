"""Episodes spent: the anytime-valid threshold gate vs the fixed-n exact test.

For true success rates 0.3..0.9 around a 0.6 bar, simulates the sequential gate
(``ThresholdGate``, stops at its first decision or at n_max) and prints the mean
episodes it spends, how often it decides correctly (its power at that rate; at the bar
any decision is an error), and the smallest fixed n whose exact binomial test at the
same alpha has at least that power at that rate: the fixed-n gate with the same error
rates (a simulated power of 100% is matched as 1 - 1/runs). A last column is the
usual fixed design, n for 80% power at bar +/- 0.1.

    .venv/bin/python bench/stats.py [--bar 0.6] [--alpha 0.05] [--n-max 200] [--runs 4000] [--ville]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_hud.evaluation.sequential import (  # noqa: E402
    FixedThresholdGate,
    ThresholdGate,
    fixed_n_for_power,
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
    a = ap.parse_args()
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
