"""A/B on a score (``--hud-ab-metric=score``) with rows as the units: PushT's coverage (gym-pusht's
``info["coverage"]``, the episode's best, as partial credit through ``env.gym(score_key=...)``)
judged by the anytime-valid betting test, which stops the session live; the min-coverage rule
refuses a verdict when too many episodes errored."""

from __future__ import annotations

import importlib.util
import json

import pytest
from line_suite import TESTS, make_suite, run
from needs import require

PUSHT_ENV = """
from pytest_hud import Environment

env = Environment("pusht")
sim = env.gym(
    "gym_pusht:gym_pusht/PushT-v0",
    make_kwargs={"obs_type": "state"},
    score_key="coverage",
    inline=True,
)


@env.template()
async def push(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": "Push the T onto its target.", "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
"""

PUSHT_TESTS = """
import pytest
from pusht_env import push


@pytest.mark.hud(tasks=[push.task(seed=s) for s in range(ROWS)])
def test_push(hud_result):
    pass
"""


@pytest.fixture
def pusht(pytester: pytest.Pytester) -> pytest.Pytester:
    require(importlib.util.find_spec("gym_pusht"), "gym_pusht", "pip install 'pytest-hud[pusht]'")
    pytester.makepyfile(pusht_env=PUSHT_ENV)
    pytester.makeconftest("import pusht_env  # noqa: F401\n")
    return pytester


def test_partial_credit_reaches_the_rows_and_the_rows_test(pusht: pytest.Pytester) -> None:
    pusht.makepyfile(test_push=PUSHT_TESTS.replace("ROWS", "6"))
    out = pusht.path / "r.json"
    agents = ["--hud-agent=zero", "--hud-agent=random:1", "--hud-ab-metric=score,success"]
    result = run(pusht, *agents, "--hud-max-steps=40", "--hud-ab-gate", f"--hud-results={out}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    doc = json.loads(out.read_text())
    scores = [r["score"] for r in doc["rollouts"]]
    assert all(0.0 <= s <= 1.0 for s in scores) and 0.0 < max(scores) < 1.0  # coverage, not 0/1
    task = doc["paired"]["comparisons"][0]["tasks"]["pusht/push"]
    assert task["decided_by"] == "rows (permutation)" and task["rows_test"]["metric"] == "score"
    assert task["rows_test"]["rows"] == 6 and doc["paired"]["metric"] == "score"
    assert doc["paired"]["metrics"] == ["score", "success"] and "success" in task["metrics"]
    assert "paired on score, success, Holm at 0.05 over 1 tasks and overall x 2 metrics" in (
        result.stdout.str()
    )
    bad = run(pusht, *agents[:2], "--hud-ab-metric=score,reward")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "expected distinct metrics among success, score, steps" in bad.stderr.str()


def test_a_score_ab_stops_live_on_pusht_coverage(pusht: pytest.Pytester) -> None:
    """zero against random on PushT: within 20 steps neither moves the T much, so the rows'
    coverage differences sit near 0 and the betting test's confidence sequence closes
    inside +-0.1: 'no difference', decided live, the remaining rows skipped."""
    rows = 160
    pusht.makepyfile(test_push=PUSHT_TESTS.replace("ROWS", str(rows)))
    out = pusht.path / "r.json"
    args = ["--hud-agent=zero", "--hud-agent=random:1", "--hud-ab-metric=score"]
    args += ["--hud-gate=sequential", "--hud-max-steps=20", "--hud-ab-seed=3", "-rs"]
    result = run(pusht, *args, f"--hud-results={out}")
    doc = json.loads(out.read_text())
    task = doc["paired"]["comparisons"][0]["tasks"]["pusht/push"]
    seq = task["sequential"]
    assert seq["decision"] == "no difference", (seq, result.stdout.str()[-3000:])
    assert seq["max_pairs"] == rows and seq["pairs_used"] < rows
    assert "anytime-valid CI" in seq["reason"] and task["verdict"] == "no difference"
    skipped = result.parseoutcomes().get("skipped", 0)
    assert skipped == seq["saved"] > 0
    assert len([r for r in doc["rollouts"] if r["outcome"] == "passed"]) == 2 * rows - skipped


def test_no_verdict_below_the_coverage_threshold(pytester: pytest.Pytester) -> None:
    """One of three episodes errors (the line suite's broken task): a gate over them has
    no verdict at the default 95% and names the errored row; at 60% it judges."""
    make_suite(pytester)
    pytester.makepyfile(test_line=TESTS)
    low = run(pytester, "--hud-min-success=0.0")
    text = low.stdout.str()
    assert low.ret == pytest.ExitCode.TESTS_FAILED
    assert "NO VERDICT: coverage 67% (2 scored of 3 attempted)" in text, text
    assert "below --hud-min-coverage 95%" in text and "broken" in text
    ok = run(pytester, "--hud-min-success=0.0", "--hud-min-coverage=0.6")
    assert "NO VERDICT" not in ok.stdout.str()
    assert "overall: success rate" in ok.stdout.str()
