"""Rows as the units (evaluation/bounded.py): the betting interval and sequence, the sign-flip
permutation test and the interval that inverts it, Holm, and the design floor."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_hud.evaluation.bounded import (
    PairedBettingTest,
    betting_interval,
    design_floor,
    holm,
    paired_scores,
    permutation_interval,
    permutation_p,
    row_means,
)
from pytest_hud.evaluation.proportions import mcnemar_exact


def test_repeats_are_averaged_per_row_first() -> None:
    means = row_means([(("t", 1), 1.0), (("t", 1), 0.0), (("t", 2), 1.0)])
    assert means == {("t", 1): 0.5, ("t", 2): 1.0}


def test_repeats_of_one_row_do_not_shrink_the_interval_as_if_they_were_rows() -> None:
    """Ten rows each run ten times: the clustered comparison has ten units, and its
    interval is the one of the ten row means, not of a hundred episodes."""
    rng = np.random.default_rng(3)
    base = rng.uniform(0.2, 0.8, 10)
    effect = rng.normal(0.05, 0.1, 10)  # the candidate's gain differs from row to row
    once = [((i,), float(base[i]), float(np.clip(base[i] + effect[i], 0, 1))) for i in range(10)]
    pairs = once * 10
    clustered = paired_scores(pairs)
    assert clustered["rows"] == 10 and clustered["episodes"] == 100
    assert clustered["diff_ci"] == pytest.approx(paired_scores(once)["diff_ci"])
    as_units = paired_scores([((i,), a, b) for i, (_, a, b) in enumerate(pairs)])
    assert as_units["rows"] == 100 and clustered["floor"] == design_floor(10) > as_units["floor"]
    width = clustered["diff_ci"][1] - clustered["diff_ci"][0]
    assert as_units["diff_ci"][1] - as_units["diff_ci"][0] < width / 2  # repeats as rows


def test_the_permutation_test_on_binary_differences_is_exact_mcnemar() -> None:
    """Sign flips of -1/0/+1 differences give McNemar's exact binomial p."""
    for a_only, b_only, ties in [(1, 6, 3), (0, 5, 10), (4, 4, 2), (2, 9, 0)]:
        d = [-1.0] * a_only + [1.0] * b_only + [0.0] * ties
        assert permutation_p(d) == pytest.approx(mcnemar_exact(a_only, b_only))


@settings(max_examples=150, deadline=None)
@example([0.0, 0.0, 0.0, 0.0, 0.0, 1.0], 0.05)  # zero differences tie at a shift of exactly 0
@given(
    st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=24),
    st.sampled_from([0.01, 0.05, 0.2]),
)
def test_the_interval_never_contradicts_its_test(diffs: list[float], alpha: float) -> None:
    """0 lies outside the permutation interval exactly when the test rejects at alpha."""
    lo, hi = permutation_interval(diffs, alpha)
    assert lo <= float(np.mean(diffs)) <= hi
    rejects = permutation_p(diffs) <= alpha
    assert rejects == (not lo <= 0.0 <= hi)


def test_the_design_floor_says_when_no_outcome_can_be_significant() -> None:
    assert design_floor(5) == 2 / 32 > 0.05  # five rows cannot reach p < 0.05
    assert design_floor(6) < 0.05
    best = paired_scores([((i,), 0.0, 1.0) for i in range(5)])  # the candidate wins every row
    assert best["p_value"] == design_floor(5) and best["verdict"] == "undecided"


def test_holm_rejects_what_bonferroni_rejects_and_more() -> None:
    pvalues = {"a": 0.01, "b": 0.02, "c": 0.04}
    assert holm(pvalues, 0.05) == {"a": True, "b": True, "c": True}  # 0.01, 0.025, 0.05
    assert {k for k, p in pvalues.items() if p <= 0.05 / 3} == {"a"}  # Bonferroni: a alone
    assert holm({"a": 0.03, "b": 0.04}, 0.05) == {"a": False, "b": False}  # step-down stops


@pytest.mark.parametrize("rate", [0.05, 0.3, 0.5, 0.9])
def test_the_betting_interval_covers_at_its_level(rate: float) -> None:
    """Coverage over simulated samples at or above 1 - alpha (a Bernoulli and a bounded
    continuous metric), and the same interval whatever the rows' order."""
    rng = np.random.default_rng(int(rate * 100))
    missed = 0
    for _ in range(200):
        x = np.clip(rng.normal(rate, 0.2, 25), 0, 1) if rate != 0.5 else (rng.random(25) < rate)
        lo, hi = betting_interval(x.astype(float))
        mean = rate if rate != 0.5 else 0.5
        if rate not in (0.5,):  # clipped normal: its mean moves a little towards the middle
            mean = float(np.mean(np.clip(rng.normal(rate, 0.2, 200_000), 0, 1)))
        missed += not lo <= mean <= hi
    assert missed / 200 <= 0.05 + 3 * (0.05 * 0.95 / 200) ** 0.5
    x = list(rng.random(20))
    assert betting_interval(x) == betting_interval(sorted(x)) == betting_interval(x[::-1])


def test_bad_values_name_the_bounds_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"expected values in \[0.0, 1.0\], got 1.5.*bounds"):
        betting_interval([0.2, 1.5])
    with pytest.raises(ValueError, match="alpha"):
        holm({"a": 0.1}, 1.5)


def test_the_betting_test_keeps_its_level_under_live_stopping() -> None:
    """Null: symmetric differences; the test is read after every row and stops at its first
    decision. 'better' or 'worse' in at most alpha of the sessions (binomial margin)."""
    rng = np.random.default_rng(11)
    wrong = 0
    sessions = 300
    for _ in range(sessions):
        test = PairedBettingTest(alpha=0.05, delta=0.2, max_pairs=150)
        for d in rng.uniform(-1, 1, 150):
            if test.update(float(d)) is not None:
                break
        wrong += test.decision in ("better", "worse")
    assert wrong / sessions <= 0.05 + 3 * (0.05 * 0.95 / sessions) ** 0.5


def test_the_betting_test_decides_a_clear_effect_and_says_so() -> None:
    rng = np.random.default_rng(5)
    test = PairedBettingTest(alpha=0.05, delta=0.1, max_pairs=200)
    for d in np.clip(rng.normal(0.4, 0.3, 200), -1, 1):
        if test.update(float(d)) is not None:
            break
    assert test.decision == "better" and test.pairs_used < 60
    assert test.reason.startswith(f"decided after {test.pairs_used} of 200 pairs: better")
    with pytest.raises(ValueError, match=r"scaled difference in \[-1, 1\]"):
        test.update(2.0)


def test_exact_and_monte_carlo_permutations_agree() -> None:
    """Past 16 rows the p is Monte Carlo over a fixed set of sign patterns: close to the
    exact enumeration (checked at 18 rows by brute force)."""
    d = np.linspace(-0.2, 0.5, 18)
    exact = np.mean(
        [abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12 for s in itertools.product((1, -1), repeat=18)]
    )
    assert permutation_p(d) == pytest.approx(exact, abs=0.01)


def test_a_success_interval_counts_rows_not_repeats() -> None:
    """Eight rows run five times: when every row's repeats agree the interval is Wilson's
    over the 8 rows (not the 40 episodes); when they differ, the betting interval over the
    row means; with one episode per row, Wilson's over the episodes."""
    from pytest_hud.evaluation.proportions import wilson
    from pytest_hud.evaluation.results import stats

    def rows(outcome: object) -> list[dict]:
        return [
            {"nodeid": f"t[{i}-{rep}]", "outcome": "passed", "group": "t", "key": f"r{i}",
             "success": outcome(i, rep), "score": None, "error": None}
            for i in range(8) for rep in range(5)
        ]  # fmt: skip

    agree = stats(rows(lambda i, rep: i < 6))
    assert agree["rate_ci_method"] == "wilson (rows)" and agree["rate_ci"] == list(wilson(6, 8))
    assert agree["wilson_95"] == list(wilson(30, 40))  # the episodes' interval, kept beside
    mixed = stats(rows(lambda i, rep: (i + rep) % 3 != 0))
    assert mixed["rate_ci_method"] == "rows (betting)"
    once = stats([r for r in rows(lambda i, rep: i < 6) if r["nodeid"].endswith("-0]")])
    assert once["rate_ci_method"] == "wilson" and once["rate_ci"] == list(wilson(6, 8))
    binary = [{**r, "score": float(r["success"])} for r in rows(lambda i, rep: i < 6)]
    assert stats(binary)["score_ci"] == list(wilson(6, 8))  # a 0/1 score: the same interval
