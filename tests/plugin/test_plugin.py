"""The pytest plugin, tested the way pytest plugins test themselves: real pytest runs
(pytester, in subprocesses) over a deterministic env where a row's ``goal`` decides the
episode: the built-in ``zero`` agent succeeds exactly when ``goal <= 0``."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from line_suite import TESTS, run


def many(pytester: pytest.Pytester, rows: str) -> None:
    """A test module ``test_many`` over ``rows`` (Python source of task rows)."""
    pytester.makepyfile(
        test_many=f"""
import pytest
from line_env import reach

@pytest.mark.hud(tasks=[{rows}])
def test_many(hud_result):
    assert hud_result.success
"""
    )


def counted(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run with the counting agent, which writes each process's peak concurrency."""
    import os

    os.environ["PEAK_DIR"] = str(pytester.path)
    try:
        return run(pytester, "--hud-agent=my_agents:counting", *args)
    finally:
        del os.environ["PEAK_DIR"]


def test_rows_become_items_pass_fail_and_error(suite) -> None:
    suite.makepyfile(test_line=TESTS)
    result = run(suite, "-v", "--hud-results=results.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    out = result.stdout.str()
    assert "test_reach[line/reach[goal:0.0][seed:1]] PASSED" in out
    assert "ERROR at setup of test_broken[line/broken]" in out
    assert "the env server could not set up this task" in out
    assert re.search(r"hud: zero on 3 rollouts", out)
    doc = json.loads((suite.path / "results.json").read_text())
    assert doc["overall"]["episodes"] == 2 and doc["overall"]["successes"] == 1
    assert doc["overall"]["errors"] == 1
    outcomes = sorted(r["outcome"] for r in doc["rollouts"])
    assert outcomes == ["error", "failed", "passed"]
    assert set(doc["per_group"]) == {"test_line.py::test_reach", "test_line.py::test_broken"}
    junit = ET.parse(suite.path / "junit.xml")
    props = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert props["hud.agent"] == "zero" and props["hud.key"].startswith("line/")


def test_k_selects_by_env_or_task_and_group_repeats(suite) -> None:
    suite.makepyfile(test_line=TESTS)
    result = run(suite, "-k", "reach", "--hud-group=3", "-v", "--hud-results=r.json")
    result.assert_outcomes(passed=3, failed=3)
    assert "test_reach[line/reach[goal:5.0][seed:2][2]]" in result.stdout.str()
    doc = json.loads((suite.path / "r.json").read_text())
    seeds = {(r["slug"], r["rep"]): r["seed"] for r in doc["rollouts"]}
    again = run(suite, "-k", "reach", "--hud-group=3", "--hud-results=r2.json")
    again.assert_outcomes(passed=3, failed=3)
    doc2 = json.loads((suite.path / "r2.json").read_text())
    assert {(r["slug"], r["rep"]): r["seed"] for r in doc2["rollouts"]} == seeds
    assert len(set(seeds.values())) == 6  # every repeat its own episode ...
    assert {v for (_, rep), v in seeds.items() if rep == 0} == {1, 2}  # rep 0: the row's seed


def test_task_files_collect_and_bad_rows_name_file_and_line(suite) -> None:
    suite.path.joinpath("rows.jsonl").write_text(
        '{"env": "line", "id": "reach", "args": {"goal": 0}}\n'
        '{"env": "line", "id": "reach", "args": {"goal": 2}}\n'
    )
    result = run(suite, "rows.jsonl", "-v")
    result.assert_outcomes(passed=1, failed=1)
    assert "rows.jsonl::test_episode[line/reach[goal:2]]" in result.stdout.str()
    suite.path.joinpath("bad.jsonl").write_text('{"env": "line", "id": "reach"}\n{"env": "line"}\n')
    result = run(suite, "bad.jsonl")
    assert result.ret != 0
    assert "bad.jsonl:2: missing field 'id'" in result.stdout.str()


def test_concurrency_keeps_rollouts_in_flight(suite) -> None:
    rows = ", ".join(f"reach.task(goal=0.0, seed={s})" for s in range(8))
    many(suite, rows)
    result = counted(suite, "--hud-concurrency=4", "--hud-shared=4")
    result.assert_outcomes(passed=8)
    peaks = [json.loads(p.read_text()) for p in suite.path.glob("peak-*.json")]
    assert max(peaks) == 4  # four episodes at once in one process


PLUS_MODULE = """
import numpy as np
import pytest
from line_env import reach
from pytest_hud.robot import Model, RobotAgent


class Plus(Model):
    def infer(self, batch):
        return np.ones((len(batch["observation/state"]), 1, 1), np.float32)


@pytest.fixture(scope="module")
def hud_agent():  # this module's policy: walks forward, so it reaches goal 2
    return RobotAgent(Plus(), name="plus")


@pytest.mark.hud(tasks=[reach.task(goal=2.0, seed=s) for s in range(3)])
def test_plus(hud_result):
    assert hud_result.success
"""


ZERO_MODULE = """
import pytest
from line_env import reach

@pytest.mark.hud(tasks=[reach.task(goal=2.0, seed=s) for s in range(3)])
def test_zero(hud_result):
    assert hud_result.success
"""


CONFTEST_AGENT = """
import line_env  # noqa: F401
import pytest
from pytest_hud.robot import RobotAgent, ZeroModel


@pytest.fixture(scope="session")
def hud_agent():
    return RobotAgent(ZeroModel(), name="conftest-zero")
"""


@pytest.mark.parametrize(
    ("args", "label"),
    [
        ((), "conftest.py::hud_agent"),
        (("-n", "2"), "conftest.py::hud_agent"),
        (("--hud-checkpoint=ckpt-7",), "ckpt-7"),
        (("--hud-agent=random",), "random"),
    ],
    ids=["conftest", "conftest-n2", "checkpoint", "given"],
)
def test_a_conftest_hud_agent_names_the_rows_not_the_default_agent(
    suite, args: tuple[str, ...], label: str
) -> None:
    # without --hud-agent the session's agent defaults to "random"; rows, the table and
    # the ledger must not credit it with the conftest agent's episodes (and a ledger not
    # named *.ledger.jsonl in the suite is still not collected as a task file)
    suite.makeini("[pytest]\n")
    suite.makeconftest(CONFTEST_AGENT)
    suite.makepyfile(test_line=TESTS)
    result = run(suite, "--hud-results=results.json", "--hud-ledger=ledger.jsonl", *args)
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert f"hud: {label} on 3 rollouts" in result.stdout.str()
    doc = json.loads((suite.path / "results.json").read_text())
    assert {r["agent"] for r in doc["rollouts"]} == {label}
    ledger = [json.loads(line) for line in (suite.path / "ledger.jsonl").read_text().splitlines()]
    assert {r["agent"] for r in ledger if "key" in r} == {label}


@pytest.mark.parametrize("plus_first", [True, False], ids=["override-first", "override-last"])
def test_a_module_overriding_hud_agent_gets_its_own_agent(suite, plus_first: bool) -> None:
    # with lookahead (concurrency 4), rollouts of the next module must not start with
    # this module's agent, nor this module's with the session's
    a, b = (PLUS_MODULE, ZERO_MODULE) if plus_first else (ZERO_MODULE, PLUS_MODULE)
    suite.makepyfile(test_a=a, test_b=b)
    result = run(suite, "--hud-concurrency=4", "-v")
    result.assert_outcomes(passed=3, failed=3)
    out = result.stdout.str()
    assert len(re.findall(r"test_plus\[.*PASSED", out)) == 3
    assert len(re.findall(r"test_zero\[.*FAILED", out)) == 3


def test_xdist_aggregates_results_across_workers(suite) -> None:
    rows = ", ".join(f"reach.task(goal={g}, seed={s})" for s in range(3) for g in (0.0, 9.0))
    many(suite, rows)
    result = run(
        suite, "-n", "2", "--hud-results=x.json", "--html=report.html", "--self-contained-html"
    )
    result.assert_outcomes(passed=3, failed=3)
    doc = json.loads((suite.path / "x.json").read_text())
    assert len(doc["rollouts"]) == 6 and doc["overall"]["successes"] == 3
    assert "hud: zero on 6 rollouts" in result.stdout.str()
    page = (suite.path / "report.html").read_text()
    for column in ("Task", "Agent", "Score", "Success", "Steps", "Seconds"):
        assert f'data-column-type="hud{column}">{column}</th>' in page
    assert "hud: zero</h2>" in page and "overall" in page


def test_min_success_gate_decides_the_exit_code(suite) -> None:
    suite.makepyfile(test_line=TESTS.split("@pytest.mark.hud(tasks=[broken")[0])
    ok = run(suite, "--hud-min-success=0.5")
    assert ok.ret == 0  # one of two episodes failed; 50% clears the gate
    assert "PASSED overall: success rate 50.0% (1/2) vs required 50.0%" in ok.stdout.str()
    bad = run(suite, "--hud-min-success=0.75")
    assert bad.ret == 1
    assert "FAILED overall: success rate 50.0% (1/2) vs required 75.0%: FAILED by 25.0%" in (
        bad.stdout.str()
    )
    wilson = run(suite, "--hud-min-success=0.5", "--hud-gate=wilson")
    assert wilson.ret == 1 and "Wilson 95% lower bound" in wilson.stdout.str()


def test_per_test_min_success_on_the_marker(suite) -> None:
    suite.makepyfile(
        test_gate="""
import pytest
from line_env import reach

@pytest.mark.hud(tasks=[reach.task(goal=0.0), reach.task(goal=9.0)], min_success=0.9)
def test_gated(hud_result):
    assert hud_result.success
"""
    )
    result = run(suite)
    assert result.ret == 1
    assert "FAILED test_gate.py::test_gated: success rate 50.0% (1/2) vs required 90.0%" in (
        result.stdout.str()
    )


def test_baseline_drop_beyond_chance_fails_per_task(suite, tmp_path) -> None:
    rows = ", ".join(f"reach.task(goal=9.0, seed={s})" for s in range(12))
    suite.makepyfile(
        test_b=f"""
import pytest
from line_env import reach

@pytest.mark.hud(tasks=[{rows}], min_success=0.0)
def test_b(hud_result):
    assert hud_result.success
"""
    )
    first = run(suite, "--hud-results=now.json")
    assert first.ret == 0
    doc = json.loads((suite.path / "now.json").read_text())
    for st in [doc["overall"], *doc["per_task"].values()]:  # pretend it used to succeed
        st["successes"], st["success_rate"] = st["episodes"], 1.0
    (suite.path / "base.json").write_text(json.dumps(doc))
    result = run(suite, "--hud-baseline=base.json")
    assert result.ret == 1
    dropped = r"FAILED baseline overall: 100% -> 0% \(p=0\.000; n=12 vs 12: .*\): DROPPED"
    assert re.search(dropped, result.stdout.str())
    other = dict(doc, per_task={"other/task-1": {"episodes": 3, "successes": 3}})
    (suite.path / "other.json").write_text(json.dumps(other))
    result = run(suite, "--hud-baseline=other.json")
    assert result.ret == 4 and "is from another taskset" in result.stderr.str()


def test_expectations_xfail_strict_and_skip(suite) -> None:
    suite.makepyfile(test_line=TESTS.split("@pytest.mark.hud(tasks=[broken")[0])
    suite.path.joinpath("expect.toml").write_text(
        '[zero]\nxfail = { "line/reach-*" = "cannot reach far goals yet" }\n'
        '[other]\nskip = { "line/*" = "not this one" }\n'
    )
    result = run(suite, "--hud-expect=expect.toml", "-rxX")
    # the failing row is an expected failure; the passing one is XPASS(strict): a failure
    result.assert_outcomes(xfailed=1, failed=1)
    assert "[XPASS(strict)] [zero] cannot reach far goals yet" in result.stdout.str()
    assert "matches no collected row" not in result.stdout.str()
    result = run(suite, "--hud-expect=expect.toml", "--hud-checkpoint=other")
    result.assert_outcomes(skipped=2)


def test_an_expectation_glob_that_matches_no_row_is_a_warning(suite) -> None:
    # a new user's trial: a glob written against the test id's args matched nothing, silently
    suite.makepyfile(test_line=TESTS.split("@pytest.mark.hud(tasks=[broken")[0])
    suite.path.joinpath("expect.toml").write_text('[zero]\nxfail = { "line/*seed=1*" = "x" }\n')
    result = run(suite, "--hud-expect=expect.toml")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "xfail glob 'line/*seed=1*' matches no collected row" in out
    assert "env/task_id or env/slug (e.g. line/reach)" in out


def test_marker_form_of_expectations(suite) -> None:
    suite.makepyfile(
        test_m="""
import pytest
from line_env import reach

@pytest.mark.hud_expect(agent="zero", xfail={"line/reach*": "far goal"})
@pytest.mark.hud(tasks=[reach.task(goal=9.0)])
def test_m(hud_result):
    assert hud_result.success
"""
    )
    run(suite, "--strict-markers").assert_outcomes(xfailed=1)


def test_an_expectations_file_that_does_not_parse_is_named_with_the_parsers_message(
    tmp_path,
) -> None:
    from pytest_hud._plugin.expect import Expectations, ExpectError

    bad = tmp_path / "expect.toml"
    bad.write_text("[zero\n")
    with pytest.raises(ExpectError, match=r"^--hud-expect: cannot parse .*expect\.toml: \S"):
        Expectations.load(bad, ["zero"])
    bad.write_text("xfail = 3\n")  # parses, but its table is no table of rules
    with pytest.raises(ExpectError, match="must be a table with xfail and/or skip"):
        Expectations.load(bad, ["xfail"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hud-runtime=k8s"], "unknown --hud-runtime 'k8s'; valid forms: local, subprocess"),
        (["--hud-agent=gpt5"], "unknown --hud-agent 'gpt5'; valid forms: zero, random"),
        (["--hud-shared=2", "--hud-concurrency=4"], "--hud-concurrency=4 exceeds --hud-shared=2"),
        (["--hud-min-success=2"], "--hud-min-success is a rate between 0 and 1"),
        (["--hud-expect=nope.toml"], "--hud-expect: nope.toml does not exist"),
    ],
)
def test_bad_options_are_usage_errors(suite, args, message) -> None:
    suite.makepyfile(test_line=TESTS)
    result = run(suite, *args)
    assert result.ret == 4
    assert message in result.stderr.str()


def test_missing_env_declaration_is_an_error_not_a_failure(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("rows.jsonl").write_text('{"env": "ghost", "id": "t"}\n')
    result = run(pytester, "rows.jsonl", "--hud-agent=zero")
    result.assert_outcomes(errors=1)
    assert "no module declares env 'ghost'" in result.stdout.str()


def test_xdist_workers_get_queues_deep_enough_for_their_lookahead(suite) -> None:
    rows = ", ".join(f"reach.task(goal=0.0, seed={s})" for s in range(12))
    many(suite, rows)
    result = counted(suite, "-n", "2", "--hud-concurrency=3", "--hud-shared=4")
    result.assert_outcomes(passed=12)
    peaks = [json.loads(p.read_text()) for p in suite.path.glob("peak-*.json")]
    assert len(peaks) == 2 and max(peaks) == 3  # each worker ran 3 episodes at once


@pytest.mark.lerobot_version
def test_record_one_dataset_across_xdist_workers(suite) -> None:
    from needs import require

    require(
        __import__("importlib").util.find_spec("lerobot"), "lerobot", "run scripts/setup --lerobot"
    )
    rows = ", ".join(f"reach.task(goal={g}, seed={s})" for s in range(3) for g in (0.0, 9.0))
    suite.makepyfile(
        test_rec=f"""
import pytest
from line_env import reach

@pytest.mark.hud(tasks=[{rows}], min_success=0.0)
def test_rec(hud_result):
    assert hud_result.dataset["episode_index"] is not None
"""
    )
    result = run(suite, "-n", "2", "--hud-record=ds", "--hud-results=r.json")
    result.assert_outcomes(passed=6)
    doc = json.loads((suite.path / "r.json").read_text())
    root = suite.path / "ds"
    assert doc["dataset"] == str(root)
    assert not (suite.path / ".ds.parts").exists()  # the workers' parts were merged away
    order = [r["nodeid"] for r in doc["rollouts"]]
    collected = [
        line.split(" ")[0] for line in run(suite, "--collect-only", "-q").outlines if "::" in line
    ]
    by_test_order = sorted(doc["rollouts"], key=lambda r: collected.index(r["nodeid"]))
    # every item points at its own merged episode, and episodes follow the test order
    assert [r["dataset"]["episode_index"] for r in by_test_order] == list(range(6))
    assert len(order) == 6
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 6 and info["total_frames"] == 6 * 3 and info["fps"] == 20
    assert set(info["features"]) >= {"observation.state", "action", "next.reward", "next.done"}
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    # each merged episode carries its rollout's grade (goal 0.0 is reached, 9.0 is not)
    meta = LeRobotDatasetMetadata("local/ds", root=root)
    graded = {e["episode_index"]: e["grade/success"] for e in meta.episodes}
    assert graded == {r["dataset"]["episode_index"]: r["success"] for r in doc["rollouts"]}
    assert set(graded.values()) == {True, False}


def test_record_without_lerobot_is_one_clear_error(suite) -> None:
    suite.makepyfile(test_line=TESTS)
    hidden = suite.path / "hide_lerobot.py"
    hidden.write_text(
        "import importlib.util, sys\n"
        "real = importlib.util.find_spec\n"
        "def find_spec(name, *a, **k):\n"
        "    return None if name == 'lerobot' else real(name, *a, **k)\n"
        "importlib.util.find_spec = find_spec\n"
    )
    result = run(suite, "-p", "hide_lerobot", "--hud-record=ds")
    assert result.ret == 4
    assert "--hud-record writes LeRobot v3 datasets and needs lerobot" in result.stderr.str()


UNCHANGED = """
import pytest
from line_env import reach
from pytest_hud.robot import RobotAgent, ZeroModel


class Mark:
    def step(self, data, action):
        pass

    def end(self, ok):
        return {"marked": True}


def mark(run, spaces):
    return Mark()


AGENT = RobotAgent(ZeroModel(), name="mine")
AGENT.observers.append(mark)
MODEL, OBSERVERS = AGENT.model, AGENT.observers
BEFORE = dict(vars(AGENT))
BEFORE_OBSERVERS = list(AGENT.observers)


@pytest.fixture(scope="module")
def hud_agent():
    return AGENT


@pytest.mark.hud(tasks=[reach.task(goal=0.0, seed=s) for s in range(4)])
def test_reach(hud_result):
    assert hud_result.success, hud_result.summary()
    assert hud_result.steps == 2  # --hud-max-steps reached this rollout


def test_zz_the_agent_is_as_the_user_made_it():
    assert vars(AGENT) == BEFORE, (BEFORE, vars(AGENT))
    assert AGENT.model is MODEL and type(AGENT.model) is ZeroModel
    assert AGENT.observers is OBSERVERS and AGENT.observers == BEFORE_OBSERVERS
    assert AGENT.max_steps is None
"""


def test_a_user_agent_comes_back_unchanged(suite) -> None:
    """Max steps, video, progress, recording and batching travel with each rollout; the
    fixture's agent object keeps its attributes, its model and its observers list."""
    suite.makepyfile(test_unchanged=UNCHANGED)
    result = run(suite, "-p", "no:randomly", "--hud-max-steps=2", "--hud-concurrency=2", "-q")
    result.assert_outcomes(passed=5)
