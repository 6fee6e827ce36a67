"""``python -m pytest_hud plan``: the physim-gate example (573 episodes unpaired, 173-174 pairs
paired), the fixed-n figures against simulations of the tests they plan for, the vectorised
Newcombe powers against the scalar intervals, the command line with --json and its errors,
and "about N more pairs" under an undecided A/B."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binom, multinomial

from pytest_hud.commands.plan import main
from pytest_hud.evaluation.paired_sequential import WORSE, mcnemar_power
from pytest_hud.evaluation.planning import Setting, plan
from pytest_hud.evaluation.proportions import newcombe_paired, newcombe_unpaired
from pytest_hud.evaluation.sample_size import (
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
from pytest_hud.evaluation.simulation import more_pairs, simulate_paired_sequential

RUNS = 4000


def test_the_physim_gate_example() -> None:
    """ "Showing that a 90% policy has not dropped by more than 5 points needs 573 episodes per
    run unpaired against 173 paired (4% discordance)": both rates 90%, the verdict read off
    Newcombe's 95% interval (its lower end above -5 points: one-sided at 2.5%), power 80%.
    Unpaired the exact figure is 573. Paired, physim-gate simulates 4,000 sessions per n (about
    +-0.6 points of power); exactly, 173 pairs reach 79.996% and 174 the first 80%."""
    assert newcombe_unpaired_episodes(0.9, 0.05, 0.025, 0.8) == 573
    assert (
        newcombe_unpaired_power(572, 0.9, 0.05, 0.025)
        < 0.8
        <= newcombe_unpaired_power(573, 0.9, 0.05, 0.025)
    )
    assert newcombe_paired_pairs(0.9, 0.04, 0.05, 0.025, 0.8) == 174
    at_173 = newcombe_paired_power(173, 0.9, 0.04, 0.05, 0.025)
    assert 0.7995 < at_173 < 0.8
    # the normal approximations promise fewer than the intervals deliver
    assert unpaired_noninferiority_episodes(0.9, 0.05, 0.025, 0.8) == 566
    assert paired_noninferiority_pairs(0.04, 0.05, 0.025, 0.8) == 126


def test_the_newcombe_powers_sum_the_scalar_intervals() -> None:
    """The vectorised powers equal a plain sum over every outcome of the scalar intervals in
    pytest_hud.evaluation.proportions (small n: every count is in the support)."""
    n, rate, margin, alpha = 24, 0.7, 0.15, 0.05
    z = 1.6448536269514722  # the 90% interval: one-sided at 5%
    pmf = binom.pmf(np.arange(n + 1), n, rate)
    unpaired = sum(
        pmf[s1] * pmf[s2]
        for s1, s2 in itertools.product(range(n + 1), repeat=2)
        if newcombe_unpaired(s1, n, s2, n, z)[0] > -margin
    )
    assert newcombe_unpaired_power(n, rate, margin, alpha) == pytest.approx(unpaired, abs=1e-9)
    q = 0.2
    cells = [rate - q / 2, q / 2, q / 2, 1 - rate - q / 2]
    paired = 0.0
    for a, b, c in itertools.product(range(n + 1), repeat=3):
        d = n - a - b - c
        if d >= 0 and newcombe_paired(a, b, c, d, z)[0] > -margin:
            paired += multinomial.pmf([a, b, c, d], n, cells)
    assert newcombe_paired_power(n, rate, q, margin, alpha) == pytest.approx(paired, abs=1e-9)


def test_mcnemar_plan_reaches_its_power_in_simulation() -> None:
    """At the planned n, 4,000 simulated sessions of the exact two-sided McNemar test decide
    "worse" at least as often as the target power, less 3 Monte-Carlo standard errors; its
    exact power agrees, and one pair fewer falls short."""
    q, d, alpha, power = 0.3, 0.1, 0.05, 0.8
    n = mcnemar_pairs(q, d, alpha, power)
    assert mcnemar_power(n, alpha, d / q, q) >= power > mcnemar_power(n - 1, alpha, d / q, q)
    rng = np.random.default_rng(41)
    m = rng.binomial(n, q, RUNS)  # discordant pairs
    a_only = rng.binomial(m, (1 + d / q) / 2)  # the candidate dropped: A wins more of them
    b_only = m - a_only
    p = np.minimum(1.0, 2 * binom.cdf(np.minimum(a_only, b_only), m, 0.5))
    simulated = float(((p < alpha) & (a_only > b_only)).mean())
    se = math.sqrt(power * (1 - power) / RUNS)
    assert simulated >= power - 3 * se
    assert abs(simulated - mcnemar_power(n, alpha, d / q, q)) < 3 * se


def test_unpaired_plans_reach_their_power_in_simulation() -> None:
    """Fleiss's n for the pooled z-test, one-sided: simulated power >= target - 3 SE; the
    exact Newcombe figure's power is what a simulation of its interval finds."""
    rng = np.random.default_rng(7)
    rate, d, alpha, power = 0.8, 0.1, 0.05, 0.8
    n = unpaired_episodes(rate, d, alpha, power, one_sided=True)
    base, now = rng.binomial(n, rate, RUNS) / n, rng.binomial(n, rate - d, RUNS) / n
    pooled = (base + now) / 2
    z = (base - now) / np.sqrt(pooled * (1 - pooled) * 2 / n)
    se = math.sqrt(power * (1 - power) / RUNS)
    assert float((z > 1.6448536269514722).mean()) >= power - 3 * se
    n = newcombe_unpaired_episodes(rate, d, alpha, power)
    s1, s2 = rng.binomial(n, rate, 1000), rng.binomial(n, rate, 1000)
    passed = [
        newcombe_unpaired(a, n, b, n, 1.6448536269514722)[0] > -d
        for a, b in zip(s1, s2, strict=True)
    ]
    exact = newcombe_unpaired_power(n, rate, d, alpha)
    assert exact >= power and abs(np.mean(passed) - exact) < 3 * math.sqrt(
        exact * (1 - exact) / 1000
    )


def test_the_sequential_figure_is_reproducible_within_its_error() -> None:
    """Two seeds give means within 4 standard errors of each other; one seed, the same."""
    kw: dict[str, Any] = dict(alpha=0.05, beta=0.2, horizon=160, right=WORSE, sessions=1500)
    one = simulate_paired_sequential(0.5, 0.5, 0.75, seed=1, **kw)
    two = simulate_paired_sequential(0.5, 0.5, 0.75, seed=2, **kw)
    assert one == simulate_paired_sequential(0.5, 0.5, 0.75, seed=1, **kw)
    assert abs(one.mean - two.mean) < 4 * math.hypot(one.mean_se, two.mean_se)
    assert one.power > 0.8 and one.mean < mcnemar_pairs(0.5, 0.25, 0.05, 0.8)
    assert sum(one.shares.values()) == pytest.approx(1.0)


def test_rows_carry_the_design_effect_and_tasks_split_alpha() -> None:
    assert design_rows(100, 1, 0.0) == 100
    assert design_rows(100, 4, 0.0) == 25  # independent repeats count fully
    assert design_rows(100, 4, 1.0) == 100  # perfectly correlated ones count as one
    assert design_rows(100, 3, 0.5) == math.ceil(100 * 2 / 3)
    s = Setting(rate=0.7, effect=0.2, tasks=4, repeats=3, icc=0.5, discordance=0.4, horizon=60)
    out = plan(Setting(**{**s.__dict__, "sessions": 200}))
    unpaired = out["figures"][0]
    assert unpaired["n"] == unpaired_episodes(0.7, 0.2, 0.05 / 4, 0.8)
    assert unpaired["rows"] == math.ceil(unpaired["n"] * 2 / 3)
    assert unpaired["episodes"] == 3 * unpaired["rows"]
    assert any("rows, not episodes, are the unit" in note for note in out["notes"])


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest_hud", "plan", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_the_command_line_prints_the_example_as_json() -> None:
    done = _run(
        "--rate=0.9", "--effect=0.05", "--non-inferiority", "--alpha=0.025",
        "--discordance=0.04", "--sessions=300", "--horizon=200", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["setting"]["mode"] == "non-inferiority" and out["setting"]["test_alpha"] == 0.025
    by = [(f["design"], f["n"]) for f in out["figures"]]
    assert by[0] == ("unpaired, fixed n", 573) and by[2] == ("paired, fixed n", 174)
    sequential = next(f for f in out["figures"] if f["design"] == "paired sequential test")
    assert sequential["n"] is None and "must be below 1" in sequential["note"]
    gate = out["figures"][-1]
    assert gate["design"].startswith("threshold gate") and gate["mean_se"] > 0


def test_the_table_and_the_results_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--results: the overall rate and the last candidate's discordance over every task."""
    doc = {
        "rollouts": [],
        "per_task": {},
        "overall": {"success_rate": 0.8},
        "paired": {
            "comparisons": [
                {
                    "reference": "A",
                    "candidate": "B",
                    "tasks": {},
                    "overall": {
                        "both": 70,
                        "a_only": 25,
                        "b_only": 5,
                        "neither": 0,
                        "n_pairs": 100,
                    },
                }
            ]
        },
    }
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(doc))
    argv = ["--results", str(path), "--effect=0.15", "--horizon=80", "--sessions=200"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["setting"]["rate"] == 0.8 and out["setting"]["discordance"] == 0.3
    assert str(path) in out["setting"]["discordance_from"]
    mcnemar = next(f for f in out["figures"] if f["method"].startswith("exact McNemar"))
    assert mcnemar["n"] == mcnemar_pairs(0.3, 0.15, 0.05, 0.8)
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "exact McNemar, two-sided" in table and "paired sequential test" in table


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--rate=1.2", "--effect=0.05"], "rate"),
        (["--rate=0.9", "--effect=0"], "effect"),
        (["--rate=0.9", "--effect=-0.1"], "effect"),
        (["--rate=0.9", "--effect=0.1", "--discordance=0.05"], "discordance"),
        (["--results=/nonexistent/r.json", "--effect=0.1"], "/nonexistent/r.json"),
        (["--effect=0.1"], "rate"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    args: list[str], names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and names in err
    assert "expected" in err and "got" in err and "fix" in err


def test_bad_input_has_no_traceback(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    for args in (["--rate=abc", "--effect=0.1"], [f"--results={broken}", "--effect=0.1"]):
        done = _run(*args)
        assert done.returncode == 2 and done.stdout == ""
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert "fix" in done.stderr


def test_more_pairs() -> None:
    """The fixed-n McNemar pairs at the observed discordance, less the pairs run."""
    assert more_pairs(3, 0, 3, 0, effect=0.1) == mcnemar_pairs(0.5, 0.1, 0.05, 0.8) - 6
    assert more_pairs(10, 0, 0, 10) is None  # no disagreement: nothing to go on
    assert more_pairs(95, 1, 1, 3, effect=0.1) is None  # 2% disagree: 10 points cannot show
    assert more_pairs(0, 0, 0, 0) is None
    assert more_pairs(200, 100, 100, 200, effect=0.3) == 0  # enough pairs for 30 points


def test_an_undecided_ab_says_about_how_many_more_pairs() -> None:
    from pytest_hud.evaluation.paired_verdicts import format_ab_table, paired_block

    arms = [{"arm": "A", "label": "zero"}, {"arm": "B", "label": "forward"}]
    rows = []
    for pair in range(6):
        for arm, success in (("A", pair % 2 == 0), ("B", True)):
            rows.append({
                "nodeid": f"t.py::t[line/reach[{pair}]@{arm}]",
                "pair": f"t.py::t[line/reach[{pair}]]",
                "arm": arm, "task": "line/reach", "env": "line",
                "outcome": "passed" if success else "failed", "success": success,
                "error": None, "seed": pair, "group": "t.py::t", "key": f"row{pair}",
            })  # fmt: skip
    (comparison,) = paired_block(rows, arms, alpha=0.05)
    assert comparison["overall"]["verdict"] == "undecided"
    lines = format_ab_table(rows, arms, [comparison])
    expected = more_pairs(3, 0, 3, 0, alpha=0.05, effect=0.1)
    assert expected is not None and expected > 0
    said = f"undecided: about {expected} more pairs to detect a 10-point difference"
    assert sum(said in line for line in lines) == 2
