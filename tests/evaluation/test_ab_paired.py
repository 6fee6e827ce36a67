"""Paired A/B statistics: summaries checked by hand and against scipy and a published
interval, coverage of the intervals, and the paired sequential test's error rates, early
stops and bookkeeping by simulation (fixed RNG seeds: deterministic, no flakes)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import binomtest

from pytest_hud.evaluation.mixture import crossing_probability
from pytest_hud.evaluation.paired import (
    PairedSequentialTest,
    fixed_n_pairs,
    mcnemar_power,
    pair_counts,
    summarize_counts,
    summarize_pairs,
)
from pytest_hud.evaluation.paired_sequential import BETTER, NO_DIFFERENCE, UNDECIDED, WORSE
from pytest_hud.evaluation.proportions import mcnemar_exact

ALPHA, BETA = 0.05, 0.2


def pairs_of(both: int, a_only: int, b_only: int, neither: int) -> list[tuple[bool, bool]]:
    return (
        [(True, True)] * both
        + [(True, False)] * a_only
        + [(False, True)] * b_only
        + [(False, False)] * neither
    )


def sessions(
    rng: np.random.Generator, runs: int, pairs: int, discordance: float, share: float
) -> tuple[np.ndarray, np.ndarray]:
    """``runs`` sessions of ``pairs`` pairs: the arms disagree with probability
    ``discordance``, B wins a disagreement with probability (1 + share) / 2."""
    disc = rng.random((runs, pairs)) < discordance
    b_wins = rng.random((runs, pairs)) < (1 + share) / 2
    same = rng.random((runs, pairs)) < 0.5
    return np.where(disc, ~b_wins, same), np.where(disc, b_wins, same)


def test_summary_by_hand_and_against_scipy() -> None:
    s = summarize_pairs(pairs_of(10, 1, 6, 3))
    assert (s["n_pairs"], s["a_successes"], s["b_successes"], (s["a_only"] + s["b_only"])) == (
        20,
        11,
        16,
        7,
    )
    assert (s["rate_a"], s["rate_b"], s["diff"]) == (0.55, 0.8, 0.25)
    assert s["p_value"] == pytest.approx(16 / 128)  # 2 * (C(7,0) + C(7,1)) / 2^7
    assert s["verdict"] == "undecided"  # not significant, and the interval is wide
    for rate, ci, k in ((s["rate_a"], s["rate_a_ci"], 11), (s["rate_b"], s["rate_b_ci"], 16)):
        want = binomtest(k, 20).proportion_ci(0.95, method="wilson")
        assert ci == pytest.approx((want.low, want.high), abs=1e-9)
        assert ci[0] < rate < ci[1]
    for a_only, b_only in itertools.product(range(0, 9, 2), range(0, 12, 3)):
        got = summarize_counts(5, a_only, b_only, 5)["p_value"]
        m = a_only + b_only
        assert got == pytest.approx(binomtest(b_only, m, 0.5).pvalue if m else 1.0, rel=1e-9)
    better = summarize_pairs(pairs_of(4, 0, 6, 2))
    assert better["p_value"] == pytest.approx(2 / 64) and better["verdict"] == "better"
    worse = summarize_pairs(pairs_of(4, 6, 0, 2))
    assert worse["verdict"] == "worse" and worse["diff"] == -0.5


def test_paired_difference_interval_is_newcombes_method_10() -> None:
    # Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables, ch. 8:
    # Cavo et al. (2012), 59 / 6 / 16 / 80 pairs, Newcombe square-and-add -0.1186 to
    # -0.0046 for the first arm minus the second; ours is B - A, the mirror
    s = summarize_counts(59, 6, 16, 80)
    assert s["diff"] == pytest.approx(10 / 161)
    assert (round(s["diff_ci"][0], 4), round(s["diff_ci"][1], 4)) == (0.0046, 0.1186)
    # a wider level (alpha 0.01) widens every interval
    wide = summarize_counts(59, 6, 16, 80, alpha=0.01)
    assert wide["diff_ci"][0] < s["diff_ci"][0] and wide["diff_ci"][1] > s["diff_ci"][1]
    assert wide["rate_a_ci"][0] < s["rate_a_ci"][0]


def test_no_difference_needs_an_interval_inside_the_minimal_effect() -> None:
    tight = summarize_counts(100, 1, 1, 98)  # 200 pairs agreeing but for two
    assert tight["p_value"] == 1.0 and tight["diff_ci"][0] > -0.1 and tight["diff_ci"][1] < 0.1
    assert tight["verdict"] == "no difference"
    assert summarize_counts(100, 1, 1, 98, min_effect=0.01)["verdict"] == "undecided"
    assert summarize_counts(3, 1, 1, 3)["verdict"] == "undecided"  # 8 pairs: cannot tell


def test_summary_is_json_able_and_empty_and_bad_input_are_handled() -> None:
    s = summarize_pairs(pairs_of(3, 1, 2, 0), alpha=0.1, min_effect=0.2)
    doc = json.loads(json.dumps(s))
    assert doc["diff_ci"] == s["diff_ci"] and doc["a_successes"] == 4
    assert doc["verdict"] == s["verdict"] and doc["alpha"] == 0.1 and doc["min_effect"] == 0.2
    empty = summarize_pairs([])
    assert (empty["n_pairs"], empty["rate_a"], empty["diff"], empty["verdict"]) == (
        0,
        None,
        None,
        "undecided",
    )
    assert empty["diff_ci"] == [-1.0, 1.0] and empty["rate_b_ci"] == [0.0, 1.0]
    assert pair_counts(np.array([[1, 1], [0, 1], [0, 1], [0, 0]], dtype=bool)) == (1, 0, 2, 1)
    with pytest.raises(ValueError, match="alpha"):
        summarize_pairs([], alpha=1.5)
    with pytest.raises(ValueError, match="min_effect"):
        summarize_pairs([], min_effect=0)
    with pytest.raises(ValueError, match="non-negative int pair counts"):
        summarize_counts(1, -1, 0, 0)


@pytest.mark.parametrize(
    "probs",
    [(0.5, 0.1, 0.1, 0.3), (0.6, 0.05, 0.25, 0.1), (0.1, 0.02, 0.08, 0.8), (0.85, 0.0, 0.1, 0.05)],
    ids=["equal", "better", "rare-success", "near-one"],
)
def test_intervals_cover_near_nominally(probs: tuple[float, float, float, float]) -> None:
    """1,000 tables of 40 pairs from (both, A only, B only, neither) probabilities: the
    95% intervals of the difference and of each rate cover the truth >= 92% of the time
    (nominal 95% less a generous allowance for discreteness and simulation)."""
    rng = np.random.default_rng(28)
    tables = rng.multinomial(40, probs, size=1000)
    true_a, true_b = probs[0] + probs[1], probs[0] + probs[2]
    hits = np.zeros(3)
    for both, a_only, b_only, neither in tables:
        s = summarize_counts(int(both), int(a_only), int(b_only), int(neither))
        for i, (ci, truth) in enumerate(
            ((s["diff_ci"], true_b - true_a), (s["rate_a_ci"], true_a), (s["rate_b_ci"], true_b))
        ):
            hits[i] += ci[0] <= truth <= ci[1]
    assert (hits / len(tables) >= 0.92).all(), hits / len(tables)


def test_type_one_error_at_equal_arms_whatever_the_stopping() -> None:
    test = PairedSequentialTest(ALPHA, BETA, 0.5, max_pairs=120)
    # the guarantee: even without the futility stop, the chance that a fair coin among
    # the discordant pairs ever crosses either rejection boundary within max_pairs
    up = crossing_probability(test.upper, 0.5)
    down = crossing_probability(np.arange(121) - test.lower, 0.5)
    assert up <= ALPHA / 2 and down <= ALPHA / 2
    rng = np.random.default_rng(20261202)
    for discordance in (0.2, 0.6):
        code, used = test.run(*sessions(rng, 500, 120, discordance, 0.0))
        error = np.isin(code, (BETTER, WORSE)).mean()
        assert error <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / 500)  # 3 standard errors
        assert (code == NO_DIFFERENCE).mean() > 0.5  # and equal arms mostly say so
        assert used.mean() < 120


def test_clearly_better_arm_is_decided_better_early_and_sooner_than_fixed_n() -> None:
    test = PairedSequentialTest(ALPHA, BETA, 0.5, max_pairs=200)
    rng = np.random.default_rng(7)
    a, b = sessions(rng, 400, 200, 0.4, 0.8)  # B wins 90% of the disagreements
    code, used = test.run(a, b)
    power = (code == BETTER).mean()
    assert power >= 0.98 and (code == WORSE).sum() == 0
    # the fixed-n exact McNemar test with the same power needs more pairs than the mean
    fixed = fixed_n_pairs(ALPHA, 1 - min(power, 0.99), 0.8, 0.4)
    assert used.mean() < fixed
    mirrored, used_mirrored = test.run(b, a)  # the same sessions, arms swapped
    assert (mirrored == -code).all() and (used_mirrored == used).all()


def test_no_difference_is_wrong_at_most_beta_at_the_effect_delta() -> None:
    test = PairedSequentialTest(ALPHA, BETA, 0.5, max_pairs=300)
    rng = np.random.default_rng(5)
    code, _ = test.run(*sessions(rng, 500, 300, 0.5, 0.5))  # B wins 75%: the effect delta
    assert (code == NO_DIFFERENCE).mean() <= BETA + 3 * math.sqrt(BETA * (1 - BETA) / 500)
    assert (code == BETTER).mean() >= 1 - BETA - 0.05


def test_update_one_pair_at_a_time_matches_the_vectorised_run() -> None:
    rng = np.random.default_rng(1)
    rows = [sessions(rng, 1, 50, 0.5, share) for share in rng.uniform(-1, 1, size=60)]
    a, b = np.vstack([r[0] for r in rows]), np.vstack([r[1] for r in rows])
    test = PairedSequentialTest(ALPHA, BETA, 0.5, max_pairs=50)
    codes, used = test.run(a, b)
    names = {BETTER: "better", WORSE: "worse", NO_DIFFERENCE: "no difference", UNDECIDED: None}
    for row_a, row_b, code, n in zip(a, b, codes, used, strict=True):
        one = PairedSequentialTest(ALPHA, BETA, 0.5, max_pairs=50)
        for x, y in zip(row_a, row_b, strict=True):
            one.update(bool(x), bool(y))
        assert one.decision == names[int(code)]
        assert one.pairs_used == (n if one.decision else 50) and one.pairs == 50
        assert (one.a_only, one.b_only) == (
            int((row_a & ~row_b).sum()),
            int((row_b & ~row_a).sum()),
        )
    assert test.pairs == 0  # run() leaves the object's own counts alone


def test_decision_sticks_counts_continue_and_max_pairs_is_enforced() -> None:
    test = PairedSequentialTest(ALPHA, BETA, 0.5, max_pairs=12)
    assert test.decision is None and test.reason == (
        "undecided after 0 of 12 pairs (B won 0 of 0 discordant pairs)"
    )
    for _ in range(6):  # within 12 pairs the calibrated boundary is 6 straight wins
        test.update(False, True)
    assert test.decision == "better" and test.decided_at == 6 and test.pairs_used == 6
    assert test.reason == "decided after 6 of 12 pairs: better (B won 6 of 6 discordant pairs)"
    for _ in range(6):  # pairs in flight: counted, the decision stays
        assert test.update(True, False) == "better"
    assert (test.pairs, test.pairs_used, test.a_only) == (12, 6, 6)
    with pytest.raises(ValueError, match="at most max_pairs=12"):
        test.update(True, True)
    stuck = PairedSequentialTest(ALPHA, BETA, 0.5, max_pairs=4)
    for _ in range(4):
        stuck.update(True, True)
    assert stuck.exhausted and stuck.decision is None and stuck.pairs_used == 4


def test_one_object_per_task_and_one_overall() -> None:
    """Two tasks where B wins 4 of 4 disagreements each: neither task alone has the
    evidence, the overall test (every pair, in order) has it at its 7th pair."""
    tasks = {t: PairedSequentialTest(max_pairs=20) for t in ("reach", "push")}
    overall = PairedSequentialTest(max_pairs=40)
    for i in range(20):
        for test in tasks.values():
            a, b = (False, True) if i < 4 else (i % 2 == 0, i % 2 == 0)
            test.update(a, b)
            overall.update(a, b)
    assert [t.decision for t in tasks.values()] == [None, None]
    assert overall.decision == "better" and overall.decided_at == 7
    assert summarize_counts(overall.both, overall.a_only, overall.b_only, overall.neither)[
        "verdict"
    ] == ("better")


def test_fixed_n_power_is_the_exact_mcnemar_power() -> None:
    """mcnemar_power by brute force over every 12-pair outcome count (multinomial over
    concordant, A only, B only) with the exact McNemar p-value."""
    n, d, share = 12, 0.5, 0.6
    q = (1 + share) / 2
    probs = (1 - d, d * (1 - q), d * q)
    want = 0.0
    for a_only in range(n + 1):
        for b_only in range(n + 1 - a_only):
            conc = n - a_only - b_only
            if b_only > a_only and mcnemar_exact(a_only, b_only) < ALPHA:
                ways = math.comb(n, a_only) * math.comb(n - a_only, b_only)
                want += ways * probs[0] ** conc * probs[1] ** a_only * probs[2] ** b_only
    assert mcnemar_power(n, ALPHA, share, d) == pytest.approx(want, rel=1e-9)
    need = fixed_n_pairs(ALPHA, BETA, 0.5, 0.3)
    assert mcnemar_power(need, ALPHA, 0.5, 0.3) >= 1 - BETA
    assert mcnemar_power(need - 1, ALPHA, 0.5, 0.3) < 1 - BETA
    assert fixed_n_pairs(ALPHA, BETA, 0.5, 0.6) < need  # more disagreement, fewer pairs


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 0}, "alpha"),
        ({"beta": 1}, "beta"),
        ({"delta": 1.0}, "delta"),
        ({"max_pairs": 0}, "max_pairs"),
        ({"max_pairs": True}, "max_pairs"),
    ],
)
def test_bad_parameters_are_named(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PairedSequentialTest(**kwargs)  # type: ignore[arg-type]


def test_bad_fixed_n_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="discordance"):
        fixed_n_pairs(ALPHA, BETA, 0.5, 0.0)
    with pytest.raises(ValueError, match="no n <= 10 pairs"):
        fixed_n_pairs(ALPHA, BETA, 0.1, 0.1, n_limit=10)
