"""Sequential gates: error rates by simulation (2,000 runs, fixed RNG), early decisions,
the fixed-n yardstick against scipy, the STEP table cache, and parameter errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from pytest_hud.evaluation import step_tables
from pytest_hud.evaluation.mixture import crossing_probability
from pytest_hud.evaluation.sequential_gates import (
    BaselineGate,
    FixedThresholdGate,
    ThresholdGate,
    Verdict,
    fixed_n_for_power,
)

RUNS = 2000
ALPHA = 0.05


def test_threshold_type_one_error_at_the_bar_is_at_most_alpha() -> None:
    """2,000 runs of a Bernoulli(bar) stream. Ville's level (valid at any horizon) errs
    ~3% of the time here, so its simulated rate is below alpha for any seed. The exact
    (default) gate spends the budget: its computed error is 4.5% (<= alpha, proven by
    the recursion), so a 2,000-run estimate is allowed 3 Monte Carlo standard errors."""
    rng = np.random.default_rng(20261201)
    for exact in (False, True):
        gate = ThresholdGate(0.6, ALPHA, 200, exact=exact)
        verdict, _ = gate.run(rng.random((RUNS, 200)) < 0.6)
        up = crossing_probability(gate.upper, 0.6)
        down = crossing_probability(np.arange(201) - gate.lower, 0.4)
        assert up + down <= ALPHA
        margin = 3 * np.sqrt(ALPHA * (1 - ALPHA) / RUNS) if exact else 0.0
        assert (verdict != 0).mean() <= ALPHA + margin
        assert (verdict == 1).mean() <= ALPHA / 2 + margin
        assert (verdict == -1).mean() <= ALPHA / 2 + margin


@pytest.mark.parametrize("bar", [0.3, 0.6, 0.9])
def test_exact_crossing_probability_within_n_max_is_at_most_half_alpha_a_side(bar: float) -> None:
    exact = ThresholdGate(bar, ALPHA, 150)
    ville = ThresholdGate(bar, ALPHA, 150, exact=False)
    up = crossing_probability(exact.upper, bar)
    down = crossing_probability(np.arange(151) - exact.lower, 1 - bar)  # failures' walk
    assert up <= ALPHA / 2 and down <= ALPHA / 2
    assert up > 0.8 * ALPHA / 2  # calibrated: the budget is spent, not wasted
    # Ville's level is valid at any horizon and never decides earlier than the exact one
    assert (ville.upper >= exact.upper).all() and (ville.lower <= exact.lower).all()
    assert crossing_probability(ville.upper, bar) <= up
    # below the bar the upper boundary is crossed even less often (p = bar is the worst)
    assert crossing_probability(exact.upper, bar - 0.05) < up


def test_crossing_probability_matches_simulation() -> None:
    gate = ThresholdGate(0.6, ALPHA, 80)
    rng = np.random.default_rng(11)
    verdict, _ = gate.run(rng.random((RUNS, 80)) < 0.75)
    # with both boundaries the BELOW side can only stop a walk that would cross ABOVE later
    assert (verdict == 1).mean() == pytest.approx(crossing_probability(gate.upper, 0.75), abs=0.03)


def test_vectorised_run_matches_update_one_episode_at_a_time() -> None:
    gate = ThresholdGate(0.6, ALPHA, 60)
    rng = np.random.default_rng(1)
    outcomes = rng.random((40, 60)) < rng.uniform(0.2, 0.95, size=(40, 1))
    verdicts, spent = gate.run(outcomes)
    for row, v, n in zip(outcomes, verdicts, spent, strict=True):
        g = ThresholdGate(0.6, ALPHA, 60)
        d = g.decision
        for x in row:
            d = g.update(bool(x))
        code = {Verdict.ABOVE: 1, Verdict.BELOW: -1, Verdict.UNDECIDED: 0}[d.verdict]
        assert code == v
        assert (d.decided_at or 60) == n


@pytest.mark.parametrize(("rate", "verdict"), [(0.95, Verdict.ABOVE), (0.2, Verdict.BELOW)])
def test_clear_cases_decide_early(rate: float, verdict: Verdict) -> None:
    gate = ThresholdGate(0.6, ALPHA, 200)
    rng = np.random.default_rng(7)
    got, spent = gate.run(rng.random((RUNS, 200)) < rate)
    code = 1 if verdict is Verdict.ABOVE else -1
    assert (got == code).mean() >= 0.99
    assert spent.mean() < 40  # of 200
    one = ThresholdGate(0.6, ALPHA, 200)
    for x in rng.random(200) < rate:
        d = one.update(bool(x))
        if d.decided:
            break
    assert d.verdict is verdict and d.decided_at is not None and d.decided_at < 60
    assert d.reason.startswith(f"decided after {d.decided_at} of 200 episodes")


def test_verdict_is_sticky_and_n_max_is_enforced() -> None:
    gate = ThresholdGate(0.5, ALPHA, 12)
    for _ in range(12):
        d = gate.update(True)
    assert d.verdict is Verdict.ABOVE and d.episodes == 12 and d.decided_at is not None
    assert d.decided_at < 12
    with pytest.raises(ValueError, match="at most n_max=12"):
        gate.update(False)
    undecided = ThresholdGate(0.5, ALPHA, 4)
    for x in (True, False, True, False):
        d = undecided.update(x)
    assert d.exhausted and d.reason == "undecided after 4 of 4 episodes"


def test_fixed_gate_is_the_exact_binomial_test() -> None:
    fixed = FixedThresholdGate(0.6, ALPHA, 50)
    for k in range(51):
        p_up = binomtest(k, 50, 0.6, alternative="greater").pvalue
        p_down = binomtest(k, 50, 0.6, alternative="less").pvalue
        want = (
            Verdict.ABOVE if p_up <= ALPHA / 2 else Verdict.BELOW if p_down <= ALPHA / 2 else None
        )
        assert fixed.decide(k).verdict is (want or Verdict.UNDECIDED)
    assert fixed.power(0.6) <= ALPHA
    n = fixed_n_for_power(0.6, ALPHA, 0.8, 0.8)
    assert FixedThresholdGate(0.6, ALPHA, n).power(0.8) >= 0.8
    assert FixedThresholdGate(0.6, ALPHA, n - 1).power(0.8) < 0.8 or n == 1


def test_baseline_gate_type_one_error_on_equal_rates(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n_max = 40
    base = rng.random((RUNS, n_max)) < 0.6
    new = rng.random((RUNS, n_max)) < 0.6
    worse = better = 0
    for i in range(RUNS):
        gate = BaselineGate(ALPHA, n_max, cache=tmp_path, seed=i)
        for b, c in zip(base[i], new[i], strict=True):
            if gate.update(bool(b), bool(c)).decided:
                break
        worse += gate.decision.verdict is Verdict.WORSE
        better += gate.decision.verdict is Verdict.BETTER
    assert worse / RUNS <= ALPHA
    assert better / RUNS <= ALPHA


def test_baseline_gate_finds_a_clear_drop_early(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    gate = BaselineGate(ALPHA, 40, cache=tmp_path)
    for _ in range(40):
        d = gate.update(bool(rng.random() < 0.9), bool(rng.random() < 0.2))
        if d.decided:
            break
    assert d.verdict is Verdict.WORSE and d.decided_at is not None and d.decided_at < 25


def test_step_table_synthesized_into_our_cache_not_site_packages(tmp_path: Path) -> None:
    import sequentialized_barnard_tests as sbt

    folder = tmp_path
    shipped = Path(sbt.__file__).parent / "policies"
    before = sorted(p.name for p in shipped.iterdir())
    table = step_tables.load_table(33, 0.05, folder)
    assert len(table) == 34
    assert [p.name for p in folder.iterdir()] == ["step_nmax33_alpha0.05.pkl"]
    assert sorted(p.name for p in shipped.iterdir()) == before


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0.0, 0.05, 10), "bar"),
        ((1.0, 0.05, 10), "bar"),
        ((0.5, 0.0, 10), "alpha"),
        ((0.5, 1.5, 10), "alpha"),
        ((0.5, 0.05, 0), "n_max"),
        ((0.5, 0.05, 2.5), "n_max"),
    ],
)
def test_bad_parameters_are_refused(args: tuple[float, float, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ThresholdGate(*args)


def test_bad_baseline_and_fixed_parameters() -> None:
    with pytest.raises(ValueError, match="alpha"):
        BaselineGate(2.0, 10)
    with pytest.raises(ValueError, match="n_max"):
        BaselineGate(0.05, -1)
    with pytest.raises(ValueError, match="successes"):
        FixedThresholdGate(0.5, 0.05, 10).decide(11)
    with pytest.raises(ValueError, match="alternative"):
        fixed_n_for_power(0.6, 0.05, 0.6, 0.8)


def test_step_table_still_usable_when_the_cache_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # (root ignores modes, so block with a file)
    with pytest.warns(UserWarning, match="STEP table not cached"):
        gate = BaselineGate(ALPHA, 31, cache=blocker / "step")
    for _ in range(31):
        d = gate.update(True, False)
        if d.decided:
            break
    assert d.verdict is Verdict.WORSE
