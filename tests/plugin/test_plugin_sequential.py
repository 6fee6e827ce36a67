"""--hud-gate=sequential in real pytest runs: a clearly good and a clearly bad agent stop
their repeats early (the rest reported skipped, with the reason), with and without
xdist; the per-task sequential gates give the right verdicts."""

from __future__ import annotations

import json
import re

import pytest
from line_suite import BACKWARDS_AGENTS, ENV, run

GROUP = 16
#: ThresholdGate(bar=0.5, alpha=0.05, n_max=16) decides an all-success (or all-failure)
#: sequence after 6 episodes (pytest_hud.evaluation.sequential_gates)
DECIDED_AT = 6

TESTS = """
import pytest
from line_env import reach


@pytest.mark.hud(tasks=[reach.task(goal=0.0)], min_success=0.5)
def test_good(hud_result):
    assert hud_result.success


@pytest.mark.hud(tasks=[reach.task(goal=5.0)], min_success=0.5)
def test_bad(hud_result):
    assert hud_result.success
"""


@pytest.fixture
def seq(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(line_env=ENV, test_seq=TESTS)
    pytester.makeconftest("import line_env  # noqa: F401\n")
    pytester.makeini("[pytest]\nhud_agent = zero\n")
    return pytester


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_good_and_bad_agents_stop_early(seq: pytest.Pytester, xdist: list[str]) -> None:
    out = seq.path / "r.json"
    result = run(
        seq,
        "--hud-gate=sequential",
        f"--hud-group={GROUP}",
        "--hud-seed=1",
        f"--hud-results={out}",
        "-rs",
        *xdist,
    )
    text = result.stdout.str()
    outcomes = result.parseoutcomes()
    ran = outcomes.get("passed", 0) + outcomes.get("failed", 0)
    skipped = outcomes.get("skipped", 0)
    assert ran + skipped == 2 * GROUP, text
    # each task decided after DECIDED_AT episodes; under -n 2 each worker may already
    # hold two more items of it when the decision lands
    slack = 0 if not xdist else 4
    assert 2 * DECIDED_AT <= ran <= 2 * (DECIDED_AT + slack), text
    assert outcomes.get("passed", 0) >= DECIDED_AT and outcomes.get("failed", 0) >= DECIDED_AT
    assert re.search(rf"decided after {DECIDED_AT} of {GROUP} episodes: above", text), text
    assert re.search(rf"decided after {DECIDED_AT} of {GROUP} episodes: below", text), text
    doc = json.loads(out.read_text())
    gates = {g["name"]: g for g in doc["gates"]}
    good = [g for n, g in gates.items() if n.startswith("sequential") and "test_good" in n]
    bad = [g for n, g in gates.items() if n.startswith("sequential") and "test_bad" in n]
    assert len(good) == 1 and good[0]["passed"], gates
    assert len(bad) == 1 and not bad[0]["passed"], gates
    # skipped repeats are rows too (counted in the table), but never graded
    assert len([r for r in doc["rollouts"] if r["outcome"] != "skipped"]) == ran
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_without_sequential_every_repeat_runs(seq: pytest.Pytester) -> None:
    result = run(seq, "--hud-group=8", "-k", "good")
    result.assert_outcomes(passed=8)


def test_sequential_baseline_pairs_seeds_and_finds_the_worse_agent(seq: pytest.Pytester) -> None:
    seq.makepyfile(my_agents=BACKWARDS_AGENTS)
    base = seq.path / "base.json"
    opts = [f"--hud-group={GROUP}", "--hud-seed=1", "-k", "good"]
    run(seq, *opts, f"--hud-results={base}").assert_outcomes(passed=GROUP)
    out = seq.path / "new.json"
    result = run(
        seq,
        *opts,
        "--hud-agent=my_agents:backwards",
        "--hud-gate=sequential",
        f"--hud-baseline={base}",
        f"--hud-results={out}",
    )
    doc = json.loads(out.read_text())
    gate = next(g for g in doc["gates"] if g["name"].startswith("sequential baseline"))
    assert not gate["passed"] and ": worse (" in gate["message"], gate
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) > 0 and outcomes["failed"] + outcomes["skipped"] == GROUP
