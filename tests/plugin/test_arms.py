"""Several --hud-agent in one paired session (A/B, checkpoint sweeps), on the line env:
``zero`` (reference) against ``my_agents:forward`` (better on goals in (0, 3]) or
``my_agents:backwards`` (worse on goal 0). Ids carry the arm, pairs share row and seed,
the interleaved order is recorded and replayed by its seed, the same pairs and verdicts
with and without -n 2, per-arm expectation tables, the A/B gate's exit code, the
results JSON's agents/paired blocks, the html section, and the paired sequential stop."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from line_suite import AB_AGENTS, ENV, run

from pytest_hud._plugin.arms import arms_of, split_arm, task_of_nodeid
from pytest_hud.robot.agent.registry import AgentSpec

#: goal 0: both arms succeed; goal 2: only forward does (the discordant pairs)
TESTS = """
import pytest
from line_env import reach


@pytest.mark.hud(tasks=[reach.task(goal=0.0, seed=1)])
def test_easy(hud_result):
    assert hud_result.success, hud_result.summary()


@pytest.mark.hud(tasks=[reach.task(goal=2.0, seed=2)])
def test_hard(hud_result):
    assert hud_result.success, hud_result.summary()
"""
AB = ["--hud-agent=zero", "--hud-agent=my_agents:forward"]


@pytest.fixture
def ab(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(line_env=ENV, my_agents=AB_AGENTS, test_ab=TESTS)
    pytester.makeconftest("import line_env  # noqa: F401\n")
    pytester.makeini("[pytest]\nhud_agent = zero\n")
    return pytester


def _order(result: pytest.RunResult) -> list[str]:
    """The items in the order they ran (-v, no xdist)."""
    return re.findall(
        r"^(test_ab\.py::\S+) (?:PASSED|FAILED|SKIPPED|XFAIL|XPASS)", result.stdout.str(), re.M
    )


def _pairs(doc: dict) -> dict[tuple[str, str], tuple[object, object]]:
    return {
        (r["pair"], r["arm"]): (r["seed"], r["success"]) for r in doc["rollouts"] if "pair" in r
    }


def test_ids_pairs_json_and_interleaved_order(ab: pytest.Pytester) -> None:
    out = ab.path / "r.json"
    result = run(ab, *AB, "--hud-group=3", "--hud-ab-seed=7", f"--hud-results={out}", "-v")
    text = result.stdout.str()
    assert "hud A/B: 2 agents" in text and "--hud-ab-seed=7 replays it" in text, text
    assert "A = zero (reference)" in text and "B = my_agents:forward (candidate)" in text
    order = _order(result)
    assert len(order) == 12 and all(n.endswith(("@A]", "@B]")) for n in order), order
    # interleaved: the two arms of a pair run one after the other
    for i in range(0, len(order), 2):
        assert split_arm(order[i])[0] == split_arm(order[i + 1])[0], order
    doc = json.loads(out.read_text())
    pairs = _pairs(doc)
    assert len(pairs) == 12
    for (pair, arm), (seed, _) in pairs.items():
        other = "B" if arm == "A" else "A"
        assert pairs[(pair, other)][0] == seed  # same row, repeat and seed under both
    assert {r["agent"] for r in doc["rollouts"]} == {"zero", "my_agents:forward"}
    # one block per agent, a paired block, the top-level structure kept
    assert {"overall", "per_task", "rollouts", "gates"} <= set(doc)
    blocks = {b["arm"]: b for b in doc["agents"]}
    assert blocks["A"]["spec"] == "zero" and blocks["A"]["role"] == "reference"
    assert blocks["A"]["overall"]["successes"] == 3 and blocks["B"]["overall"]["successes"] == 6
    paired = doc["paired"]
    assert paired["order_seed"] == 7 and paired["reference"] == "A" and paired["candidate"] == "B"
    task = paired["comparisons"][0]["tasks"]["line/reach"]
    assert (task["n_pairs"], task["a_only"], task["b_only"], task["both"]) == (6, 0, 3, 3)
    assert task["diff"] == pytest.approx(0.5) and task["verdict"] == "undecided"
    # three repeats of two rows are two units: one row tied, one won; no p below 1 is possible
    rows_test = task["rows_test"]
    assert (rows_test["rows"], rows_test["episodes"], rows_test["floor"]) == (2, 6, 0.5)
    assert task["decided_by"] == "rows (permutation)" and task["p_value"] == 1.0
    assert "6 episodes per arm are 2 rows with repeats" in text and "below 0.5 (2/2^2)" in text
    # the terminal's one table: each arm's line and the candidate's paired columns
    assert re.search(r"line/reach\s+A\s+zero\s+6\s+50%", text), text
    assert re.search(r"B\s+my_agents:forward\s+6\s+100%.*\+50%.*\s6\s+0\s+3\s+1\s+undecided", text)
    # the same seed replays the same order; another seed gives another
    again = run(ab, *AB, "--hud-group=3", "--hud-ab-seed=7", "-v")
    assert _order(again) == order
    other = run(ab, *AB, "--hud-group=3", "--hud-ab-seed=8", "-v")
    assert sorted(_order(other)) == sorted(order) and _order(other) != order
    # a repro replays one episode with the arm's agent alone (its id has no tag then)
    row = next(r for r in doc["rollouts"] if r["arm"] == "B")
    assert "--hud-agent=my_agents:forward" in row["repro"] and "@" not in row["repro"]


def test_unseeded_order_is_printed_and_replays(ab: pytest.Pytester) -> None:
    first = run(ab, *AB, "--hud-group=2", "-v")
    seed = re.search(r"--hud-ab-seed=(\d+) replays it", first.stdout.str())
    assert seed is not None, first.stdout.str()
    again = run(ab, *AB, "--hud-group=2", f"--hud-ab-seed={seed.group(1)}", "-v")
    assert _order(again) == _order(first) and len(_order(first)) == 8


#: ``my_agents:counted``: forward, and each load appends this process's id to $LOADS
COUNTED = """
import os


def counted():
    with open(os.environ["LOADS"], "a") as f:
        f.write(f"{os.getpid()}\\n")
    return forward()
"""


def test_same_pairs_and_verdicts_with_and_without_xdist(
    ab: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    ab.makepyfile(my_agents=AB_AGENTS + COUNTED)
    docs = []
    # under -n a copy per worker: a model shared by the workers loads once (issue 54)
    for extra in ([], ["-n", "2", "--hud-model-placement=worker"]):
        out, loads = ab.path / f"r{len(extra)}.json", ab.path / f"loads{len(extra)}.txt"
        monkeypatch.setenv("LOADS", str(loads))
        args = ["--hud-agent=zero", "--hud-agent=my_agents:counted", "--hud-group=4"]
        args += ["--hud-seed=3", "--hud-concurrency=2", f"--hud-results={out}", *extra]
        run(ab, *args)
        docs.append(json.loads(out.read_text()))
        pids = loads.read_text().split()
        assert len(pids) == len(set(pids)) == (2 if extra else 1), pids  # once per process
    serial, xdist = docs
    assert _pairs(serial) == _pairs(xdist) and len(_pairs(serial)) == 16
    assert serial["paired"]["comparisons"] == xdist["paired"]["comparisons"]
    assert serial["paired"]["order_seed"] != 0  # chosen by the controller, one for all workers


def test_gate_owns_the_arms_failures_and_fails_on_a_worse_candidate(ab: pytest.Pytester) -> None:
    better = run(ab, *AB, "--hud-group=3", "--hud-ab-gate")
    assert better.ret == pytest.ExitCode.OK, better.stdout.str()  # A's failures are owned
    assert re.search(
        r"PASSED a/b B vs A .*not worse .*\[owns 3 episode failures\]", better.stdout.str()
    )
    without = run(ab, *AB, "--hud-group=3")
    assert without.ret == pytest.ExitCode.TESTS_FAILED  # ungated failures, as with one agent
    backwards = ["--hud-agent=zero", "--hud-agent=my_agents:backwards", "--hud-ab-gate"]
    # one row six times is one unit: six lost repeats are no evidence against a row count
    once = run(ab, *backwards, "--hud-group=6", "-k", "easy")
    assert once.ret == pytest.ExitCode.OK, once.stdout.str()
    assert re.search(r"PASSED a/b B vs A .*not worse", once.stdout.str())
    # eight rows (seeds of goal 0), all lost: p = 2/2^8 decides
    ab.makepyfile(test_rows=ROWS)
    worse = run(ab, *backwards, "test_rows.py")
    assert worse.ret == pytest.ExitCode.TESTS_FAILED, worse.stdout.str()
    assert re.search(r"FAILED a/b B vs A .*worse on line/reach, overall", worse.stdout.str())


ROWS = """
import pytest
from line_env import reach


@pytest.mark.hud(tasks=[reach.task(goal=0.0, seed=s) for s in range(8)])
def test_rows(hud_result):
    assert hud_result.success, hud_result.summary()
"""


EXPECT = """
[zero]
xfail = { "line/reach*" = "zero never moves" }
"""


def test_expectation_tables_apply_per_arm(ab: pytest.Pytester) -> None:
    expect = ab.path / "expect.toml"
    expect.write_text(EXPECT)
    out = ab.path / "r.json"
    args = (*AB, "--hud-group=2", "-k", "hard", f"--hud-expect={expect}")
    result = run(ab, *args, f"--hud-results={out}")
    result.assert_outcomes(passed=2, xfailed=2)  # zero's xfails hold, forward's rows pass
    outcomes = {(r["arm"], r["outcome"]) for r in json.loads(out.read_text())["rollouts"]}
    assert outcomes == {("A", "xfailed"), ("B", "passed")}
    expect.write_text(EXPECT.replace("[zero]", '["my_agents:forward"]'))
    flipped = run(ab, *args)
    flipped.assert_outcomes(failed=4)  # zero fails unexpected; forward XPASSes strictly
    # each strict XPASS's report (the summary lines are cut to the terminal's width off CI)
    xpassed = [line for line in flipped.stdout.lines if line.startswith("[XPASS(strict)]")]
    assert xpassed == ["[XPASS(strict)] [my_agents:forward] zero never moves"] * 2


def test_html_shows_the_arms_side_by_side(ab: pytest.Pytester) -> None:
    report = ab.path / "report.html"
    run(ab, *AB, "--hud-group=2", f"--html={report}", "--self-contained-html")
    page = report.read_text()
    assert "hud A/B: 2 agents" in page and "Arms side by side" in page
    assert "A: zero" in page and "B: my_agents:forward" in page
    assert page.count('class="hud-grid"') == 1  # one task: line/reach
    assert 'class="ok discordant"' in page and 'class="fail discordant"' in page
    assert "all 2 agents pooled" in page


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_paired_sequential_stops_a_decided_task(ab: pytest.Pytester, xdist: list[str]) -> None:
    out = ab.path / "r.json"
    ab.makepyfile(test_rows=HARD_ROWS)
    args = [*AB, "--hud-ab-seed=1", "--hud-gate=sequential", "test_rows.py"]
    result = run(ab, *args, f"--hud-results={out}", "-rs", *xdist)
    text = result.stdout.str()
    # 16 rows, every pair discordant (B won): decided after 6 of 16, whatever the process
    assert "B vs A decided after 6 of 16 pairs: better" in text, text
    doc = json.loads(out.read_text())
    seq = doc["paired"]["comparisons"][0]["tasks"]["line/reach"]["sequential"]
    assert seq["decision"] == "better" and seq["pairs_used"] == 6 and seq["max_pairs"] == 16
    skipped = result.parseoutcomes().get("skipped", 0)
    assert skipped == seq["saved"] == doc["paired"]["saved"] > 0
    if xdist:  # each worker may hold two more items when the decision lands
        assert 0 < skipped <= 32 - 12
    else:
        assert skipped == 32 - 12
    assert f"{skipped} episodes saved" in text


HARD_ROWS = """
import pytest
from line_env import reach


@pytest.mark.hud(tasks=[reach.task(goal=2.0, seed=s) for s in range(16)])
def test_rows(hud_result):
    assert hud_result.success, hud_result.summary()
"""


def test_repeats_of_one_row_never_stop_a_paired_session_live(ab: pytest.Pytester) -> None:
    """Sixteen repeats of one row are one unit: the live test cannot decide on them (it
    did when pairs were the units), so every repeat runs and the verdict stays undecided."""
    out = ab.path / "r.json"
    args = [*AB, "--hud-group=16", "--hud-ab-seed=1", "--hud-gate=sequential", "-k", "hard"]
    result = run(ab, *args, f"--hud-results={out}")
    doc = json.loads(out.read_text())
    task = doc["paired"]["comparisons"][0]["tasks"]["line/reach"]
    assert task["sequential"]["decision"] is None and task["sequential"]["max_pairs"] == 1
    assert task["verdict"] == "undecided" and task["rows_test"]["rows"] == 1
    assert result.parseoutcomes().get("skipped", 0) == 0


def test_repeated_rows_stop_live_on_their_row_means(ab: pytest.Pytester) -> None:
    """16 rows x 2 repeats, forward winning every row: the betting test on the rows' mean
    differences decides 'better' before the rows run out, and their rest is skipped."""
    out = ab.path / "r.json"
    ab.makepyfile(test_rows=HARD_ROWS)
    args = [*AB, "--hud-group=2", "--hud-ab-seed=1", "--hud-gate=sequential", "test_rows.py"]
    result = run(ab, *args, f"--hud-results={out}", "-rs")
    doc = json.loads(out.read_text())
    task = doc["paired"]["comparisons"][0]["tasks"]["line/reach"]
    seq = task["sequential"]
    assert seq["decision"] == "better" and seq["max_pairs"] == 16 and seq["pairs_used"] < 16
    assert "anytime-valid CI" in seq["reason"] and task["decided_by"] == "sequential"
    assert result.parseoutcomes().get("skipped", 0) == seq["saved"] > 0


OVERRIDE = """
import pytest
from line_env import reach


@pytest.fixture
def hud_agent():
    return None


@pytest.mark.hud(tasks=[reach.task(goal=0.0, seed=1)])
def test_own_agent(hud_result):
    pass
"""


def test_usage_errors(ab: pytest.Pytester, tmp_path: Path) -> None:
    ab.makepyfile(test_override=OVERRIDE)
    own = run(ab, *AB, "test_override.py")
    assert own.ret == pytest.ExitCode.USAGE_ERROR
    assert "this test overrides the hud_agent fixture" in own.stderr.str()
    one = run(ab, "--hud-ab-gate", "test_ab.py")
    assert one.ret == pytest.ExitCode.USAGE_ERROR
    assert "--hud-ab-gate compares agents" in one.stderr.str()
    named = run(ab, *AB, "--hud-checkpoint=500")
    assert (
        named.ret == pytest.ExitCode.USAGE_ERROR and "drop --hud-checkpoint" in named.stderr.str()
    )
    glob = run(ab, f"--hud-agent=lerobot:{tmp_path}/checkpoints/*/pretrained_model")
    assert glob.ret == pytest.ExitCode.USAGE_ERROR
    assert "expected the glob to match checkpoint folders, got none" in glob.stderr.str()
    steps = run(ab, *AB, "--hud-ab-metric=steps")
    assert steps.ret == pytest.ExitCode.USAGE_ERROR
    assert "needs a bound: expected --hud-max-steps=N" in steps.stderr.str()


def test_a_sweep_glob_is_sorted_by_step_and_counts_last_once(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    for step in ("010000", "002000", "000500"):
        (root / step / "pretrained_model").mkdir(parents=True)
    (root / "last").symlink_to(root / "010000")
    specs = AgentSpec(f"lerobot:{root}/*/pretrained_model").expand()
    assert [s.text for s in specs] == [
        f"lerobot:{root}/{s}/pretrained_model" for s in ("000500", "002000", "010000")
    ]
    arms = arms_of(specs)
    assert [(a.letter, a.label, a.step) for a in arms] == [
        ("A", "500", 500),
        ("B", "2000", 2000),
        ("C", "10000", 10000),
    ]
    assert arms_of([AgentSpec("zero")]) == []  # one agent: no arms
    labels = [a.label for a in arms_of([AgentSpec("zero"), specs[0]])]
    assert labels == ["zero", specs[0].text]


def test_node_ids_split_into_pair_and_arm() -> None:
    nodeid = "t.py::test_x[line/reach[goal=2.0,seed=2][1]@B]"
    assert split_arm(nodeid) == ("t.py::test_x[line/reach[goal=2.0,seed=2][1]]", "B")
    assert split_arm("t.py::test_x[line/reach]") is None
    assert task_of_nodeid(nodeid) == "line/reach"
    assert task_of_nodeid("t.py::test_x[metaworld/drawer-open-v3-1a2b3c4d@AB-3]") == (
        "metaworld/drawer-open-v3"
    )
