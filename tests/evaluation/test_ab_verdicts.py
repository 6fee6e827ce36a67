"""pytest_hud.evaluation.paired_verdicts from rows alone: pairs matched by pair id whatever
order the rows came in, a pair with an errored side dropped, each arm's own aggregates, a decided
sequential test's verdict over the fixed-n one, and the one table."""

from __future__ import annotations

import random
from typing import Any

import pytest

from pytest_hud.evaluation.paired_verdicts import (
    agent_blocks,
    format_ab_table,
    paired_block,
    pairs_of,
)

ARMS = [{"arm": "A", "label": "zero"}, {"arm": "B", "label": "forward"}]


def _row(pair: int, arm: str, success: bool | None, error: str | None = None) -> dict[str, Any]:
    return {
        "nodeid": f"t.py::t[line/reach[{pair}]@{arm}]",
        "pair": f"t.py::t[line/reach[{pair}]]",
        "arm": arm,
        "task": "line/reach" if pair < 6 else "line/other",
        "env": "line",
        "outcome": "error" if error else ("passed" if success else "failed"),
        "success": success,
        "error": error,
        "seed": pair,
    }


def _rows() -> list[dict[str, Any]]:
    rows = []
    for pair in range(8):
        rows.append(_row(pair, "A", pair % 2 == 0))  # A: every other seed
        rows.append(_row(pair, "B", True))  # B: every seed
    rows[-1] = _row(7, "B", None, error="the env server went away")  # pair 7: no pair
    return rows


def test_pairs_are_matched_by_pair_id_not_order() -> None:
    rows = _rows()
    shuffled = rows[:]
    random.Random(0).shuffle(shuffled)
    assert pairs_of(rows, "A", "B") == pairs_of(shuffled, "A", "B")
    pairs = pairs_of(rows, "A", "B")
    assert pairs["line/reach"] == [(p % 2 == 0, True) for p in range(6)]
    assert pairs["line/other"] == [(True, True)]  # pair 7's B errored: only pair 6 counts
    assert paired_block(rows, ARMS, alpha=0.05) == paired_block(shuffled, ARMS, alpha=0.05)


def test_blocks_summaries_and_the_sequential_verdict() -> None:
    rows = _rows()
    blocks = {b["arm"]: b for b in agent_blocks(rows, ARMS)}
    assert blocks["A"]["overall"]["successes"] == 4 and blocks["A"]["overall"]["episodes"] == 8
    assert blocks["B"]["overall"]["episodes"] == 7 and blocks["B"]["overall"]["errors"] == 1
    (fixed,) = paired_block(rows, ARMS, alpha=0.05)
    reach = fixed["tasks"]["line/reach"]
    assert (reach["n_pairs"], reach["a_only"], reach["b_only"]) == (6, 0, 3)
    assert reach["verdict"] == reach["summary_verdict"] == "undecided"  # 3 discordant pairs
    assert fixed["overall"]["n_pairs"] == 7
    state = {("B", "line/reach"): {"decision": "better", "pairs_used": 5, "max_pairs": 6}}
    (seq,) = paired_block(rows, ARMS, alpha=0.05, sequential=state)
    assert seq["tasks"]["line/reach"]["verdict"] == "better"
    assert seq["tasks"]["line/reach"]["summary_verdict"] == "undecided"
    assert seq["tasks"]["line/reach"]["sequential"]["pairs_used"] == 5
    lines = format_ab_table(rows, ARMS, [seq])
    at = next(i for i, line in enumerate(lines) if line.startswith("line/reach"))
    assert lines[at].split()[1:3] == ["A", "zero"] and "reference" in lines[at]
    reach_b = lines[at + 1]
    assert "5/6" in reach_b and reach_b.rstrip().endswith("better")


def test_the_gate_judges_every_task_at_the_family_level() -> None:
    """A gate over K tasks and overall runs K + 1 tests: each counts "worse" below
    alpha / (K + 1), so a p of 0.03 on one of four tasks no longer fails the gate at
    alpha 0.05, while a sequential test that decided "worse" (at the family level) does."""
    from pytest_hud.evaluation.paired_verdicts import family_alpha, worse_for_the_gate

    assert family_alpha(0.05, 4) == 0.01 and family_alpha(0.05, 1) == 0.05  # one: overall
    fine = {"verdict": "undecided", "p_value": 1.0}
    comparison = {
        "tasks": {
            "e/a": {"verdict": "worse", "p_value": 0.03},
            "e/b": {"verdict": "worse", "p_value": 0.004},
            "e/c": {
                "verdict": "worse",
                "summary_verdict": "undecided",
                "p_value": 0.2,
                "sequential": {"decision": "worse"},
            },
            "e/d": fine,
        },
        "overall": {"verdict": "worse", "p_value": 0.02},
    }
    assert worse_for_the_gate(comparison, 0.05) == ["e/b", "e/c"]
    assert worse_for_the_gate(comparison, 0.2) == ["e/a", "e/b", "e/c", "overall"]


def test_without_live_stopping_the_gate_is_holm_over_tasks_and_overall() -> None:
    """Holm's step-down at 0.05 over 3 tasks and overall rejects 0.004 (<= 0.05/4), 0.014
    (<= 0.05/3) and 0.02 (<= 0.05/2), stops at 1.0; the 0.0125 split would reject only
    0.004. A p that is small but on the better side is never 'worse'."""
    from pytest_hud.evaluation.paired_verdicts import worse_for_the_gate

    comparison = {
        "tasks": {
            "e/a": {"verdict": "worse", "p_value": 0.014},
            "e/b": {"verdict": "worse", "p_value": 0.004},
            "e/c": {"verdict": "undecided", "p_value": 1.0},
        },
        "overall": {"verdict": "worse", "p_value": 0.02},
    }
    assert worse_for_the_gate(comparison, 0.05) == ["e/a", "e/b", "overall"]
    comparison["tasks"]["e/a"]["verdict"] = "better"
    assert worse_for_the_gate(comparison, 0.05) == ["e/b", "overall"]
    one = {"tasks": {"e/a": {"verdict": "worse", "p_value": 0.04}}, "overall": {}}
    assert worse_for_the_gate(one, 0.05) == ["e/a", "overall"]  # one task: one test


def test_time_to_success_is_compared_lower_better_with_failures_at_the_bound() -> None:
    """--hud-ab-metric=steps: a row's speed 1 - steps/max_steps (0 when it failed); B
    succeeds in 10 steps where A needs 30 or fails, on eight rows: B is better."""
    from pytest_hud.evaluation.paired_verdicts import metric_value, paired_block

    assert metric_value({"success": True, "steps": 25, "error": None}, "steps", 100) == 0.75
    assert metric_value({"success": False, "steps": 100, "error": None}, "steps", 100) == 0.0
    assert metric_value({"success": True, "steps": 25, "error": None}, "steps", None) is None
    rows = []
    for i in range(8):
        for arm, steps, ok in (("A", 30, i % 2 == 0), ("B", 10, True)):
            rows.append({
                "nodeid": f"t.py::t[e/t[{i}]@{arm}]", "pair": f"t.py::t[e/t[{i}]]",
                "arm": arm, "task": "e/t", "group": "t.py::t", "key": f"row{i}",
                "outcome": "passed" if ok else "failed", "success": ok,
                "steps": steps if ok else 100, "error": None,
            })  # fmt: skip
    arms = [{"arm": "A", "label": "slow"}, {"arm": "B", "label": "fast"}]
    (comparison,) = paired_block(rows, arms, alpha=0.05, metric="steps", max_steps=100)
    task = comparison["tasks"]["e/t"]
    assert task["decided_by"] == "rows (permutation)" and task["verdict"] == "better"
    assert task["rows_test"]["metric"] == "steps" and task["rows_test"]["diff"] > 0
    assert task["p_value"] == pytest.approx(2 / 2**8)


def test_several_metrics_are_one_holm_family() -> None:
    """--hud-ab-metric=success,score: equal success, a lower score on all eight rows: the
    gate finds the candidate worse on the score only (2/2^8 against Holm's 0.05/2)."""
    from pytest_hud.evaluation.paired_verdicts import paired_block, worse_for_the_gate

    rows = []
    for i in range(8):
        for arm, score in (("A", 0.9), ("B", 0.6)):
            rows.append({
                "nodeid": f"t.py::t[e/t[{i}]@{arm}]", "pair": f"t.py::t[e/t[{i}]]",
                "arm": arm, "task": "e/t", "group": "t.py::t", "key": f"row{i}",
                "outcome": "passed", "success": True, "score": score, "error": None,
            })  # fmt: skip
    arms = [{"arm": "A", "label": "ref"}, {"arm": "B", "label": "cand"}]
    (comparison,) = paired_block(rows, arms, alpha=0.05, also=["score"])
    task = comparison["tasks"]["e/t"]
    assert task["verdict"] == "undecided" and task["metrics"]["score"]["verdict"] == "worse"
    assert worse_for_the_gate(comparison, 0.05) == ["e/t [score]", "overall [score]"]
