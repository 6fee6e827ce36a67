"""Attended evaluation (features/robots): the reset gate, the stop key, verdicts with partial
credit and notes, discard-and-rerun, putting rows off, the budget and a grader, through
pytest with a scripted operator (tests/helpers/operators.py) on the line suite; the grade's
source and the notes reach the results rows."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from line_suite import AB_AGENTS, TESTS, run

HELPERS = Path(__file__).resolve().parents[1] / "helpers"


def attended(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, script: dict, *args: str
) -> tuple[pytest.RunResult, list[dict], list[str]]:
    shutil.copy(HELPERS / "operators.py", suite.path / "operators.py")
    suite.makepyfile(test_line=TESTS)
    shown = suite.path / "shown.txt"
    monkeypatch.setenv("OPERATOR_SCRIPT", json.dumps(script))
    monkeypatch.setenv("OPERATOR_SHOWN", str(shown))
    result = run(
        suite, "-k", "reach", "--hud-operator=operators:scripted", "--hud-results=r.json", *args
    )
    doc_path = suite.path / "r.json"
    rows = json.loads(doc_path.read_text())["rollouts"] if doc_path.exists() else []
    lines = shown.read_text().splitlines() if shown.exists() else []
    return result, rows, lines


def untimed(lines: list[str]) -> list[str]:
    """The lines the operator was shown without the wall times they print ("(0.1 s)"),
    which a loaded machine changes from run to run."""
    return [re.sub(r"\(\d+(?:\.\d+)? s\)", "(- s)", line) for line in lines]


def by_goal(rows: list[dict]) -> dict[float, dict]:
    return {r["args"]["goal"]: r for r in rows}


def test_the_operator_grades_with_partial_credit_and_notes(suite, monkeypatch) -> None:
    """The env's own grade (goal 0 reached, goal 5 not) is replaced by the operator's."""
    script = {"verdicts": [{"score": 0.5, "notes": "jaw slipped"}, 1.0]}
    result, rows, shown = attended(suite, monkeypatch, script)
    rows = by_goal(rows)
    assert rows[0.0]["score"] == 0.5 and rows[0.0]["success"] is False
    assert rows[0.0]["notes"] == "jaw slipped" and rows[0.0]["grade_source"] == "operator"
    assert rows[5.0]["success"] is True and rows[5.0]["grade_source"] == "operator"
    assert result.ret == 1  # the partial one fails its item
    assert "episode 1 of 2 · line/reach[goal:0.0][seed:1]" in shown
    assert "episode 2 of 2 · line/reach[goal:5.0][seed:2]" in shown
    assert not any("zero" in line for line in shown)  # never the agent's name


def test_stop_ends_the_episode_at_once(suite, monkeypatch) -> None:
    _result, rows, _ = attended(suite, monkeypatch, {"stop_after": [1], "verdicts": [0, 0]})
    rows = by_goal(rows)
    assert rows[0.0]["stopped"] == "operator" and rows[0.0]["steps"] == 0
    assert rows[5.0]["stopped"] is None and rows[5.0]["steps"] == 3


def test_discard_runs_the_row_again(suite, monkeypatch) -> None:
    script = {"verdicts": ["discard", 1.0, 1.0]}
    result, rows, shown = attended(suite, monkeypatch, script)
    rows = by_goal(rows)
    assert rows[0.0]["success"] is True
    assert [line.split(" (")[0] for line in shown if line.startswith("episode ")][:3] == [
        "episode 1 of 2 · line/reach[goal:0.0][seed:1]",
        "episode 1 ended after 3 steps",
        "episode 2 of 3 · line/reach[goal:0.0][seed:1]",  # the rerun is one more episode
    ]
    # the first gate of a row cannot know the env's instruction; the rerun's shows it
    gates = [i for i, line in enumerate(shown) if line.startswith("episode ") and "·" in line]
    assert shown[gates[0] + 1] == "instruction: the env's (shown once the episode starts)"
    assert shown[gates[1] + 1] == "instruction: reach 0.0"
    result.assert_outcomes(passed=2)


def test_a_row_put_off_runs_after_the_others(suite, monkeypatch) -> None:
    """s at a gate sends the row to the back of the queue: the other row runs first, then
    the row put off, in the same session."""
    script = {"gates": ["skip", "go", "go"], "verdicts": [1, 1]}
    result, rows, shown = attended(suite, monkeypatch, script)
    result.assert_outcomes(passed=2)
    gates = [line for line in shown if line.startswith("episode ") and "·" in line]
    assert gates == [  # the row put off is still the first episode: none ran before it
        "episode 1 of 2 · line/reach[goal:0.0][seed:1]",
        "episode 1 of 2 · line/reach[goal:5.0][seed:2]",
        "episode 2 of 2 · line/reach[goal:0.0][seed:1]",
    ]
    assert [r["args"]["goal"] for r in rows] == [5.0, 0.0]  # in the order they ran


def test_put_off_too_often_and_quit_leave_rows_undecided(suite, monkeypatch) -> None:
    """A row put off when nothing is left to run first (or more than twice) is reported
    undecided; q ends the session."""
    script = {"gates": ["skip", "go", "skip"], "verdicts": [1]}
    result, _, shown = attended(suite, monkeypatch, script)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*hud robots: 1 row(s) not run (1 the operator put them off*"])
    assert sum(1 for line in shown if "goal:0.0" in line and "·" in line) == 2
    result, _, _ = attended(suite, monkeypatch, {"gates": ["quit"]})
    result.assert_outcomes(skipped=1)
    assert "the operator ended the session" in result.stdout.str()


def test_the_budget_stops_scheduling(suite, monkeypatch) -> None:
    result, _rows, _ = attended(suite, monkeypatch, {"verdicts": [1]}, "--hud-budget=1")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*not run (1 the budget (1 episodes) was spent*: undecided*"])


GRADER = """
def last_position(first, last, prompt):
    # partial credit: how far along the line the agent got, out of 3
    return min(1.0, float(last["observation/state"][0]) / 3.0)
"""


def test_a_grader_grades_from_the_last_observation(suite) -> None:
    suite.makepyfile(test_line=TESTS, graders=GRADER)
    result = run(suite, "-k", "reach", "--hud-grader=graders:last_position", "--hud-results=r.json")
    rows = json.loads((suite.path / "r.json").read_text())["rollouts"]
    assert {r["grade_source"] for r in rows} == {"grader"}
    # zero never moves: position 0 -> score 0 on both rows, whatever the env said
    assert [r["score"] for r in rows] == [0.0, 0.0]
    result.assert_outcomes(failed=2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hud-operator=operators:scripted", "-n", "2"], "*one person: drop -n*"),
        (["--hud-operator=operators:scripted", "--hud-concurrency=2"], "*one episode at a time*"),
        (["--hud-budget=soon"], "*--hud-budget takes a duration*got 'soon'*"),
        (["--hud-operator=nowhere:nobody"], "*--hud-operator is terminal, web or MODULE:NAME*"),
    ],
)
def test_bad_attended_options_are_usage_errors(suite, args, message) -> None:
    shutil.copy(HELPERS / "operators.py", suite.path / "operators.py")
    suite.makepyfile(test_line=TESTS)
    result = run(suite, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([message])


def test_a_paired_session_is_blinded_until_the_end(suite, monkeypatch) -> None:
    """Two agents: the operator sees arm codes only; the header does not map the arms; the
    report unblinds; -v (which prints arm letters) is refused."""
    suite.makepyfile(my_agents=AB_AGENTS)
    result, rows, shown = attended(
        suite,
        monkeypatch,
        {},
        "--hud-agent=zero",
        "--hud-agent=my_agents:forward",
        "--hud-ab-seed=11",
    )
    gates = [line for line in shown if line.startswith("episode ") and "·" in line]
    assert len(gates) == 4
    codes = {line.rsplit("arm ", 1)[1] for line in gates}
    assert len(codes) == 2 and not codes & {"A", "B"}
    text = "\n".join(shown)
    assert "zero" not in text and "forward" not in text
    header = result.stdout.str().split("collected")[0]
    assert "the arms are blinded" in header and "my_agents:forward" not in header
    assert {r["arm_code"] for r in rows} == codes
    mapping = {r["arm_code"]: r["arm"] for r in rows}
    result.stdout.fnmatch_lines(["*hud robots: unblinded: arm " + mapping_line(mapping) + "*"])
    _, _, shown_again = attended(
        suite,
        monkeypatch,
        {},
        "--hud-agent=zero",
        "--hud-agent=my_agents:forward",
        "--hud-ab-seed=11",
    )
    # the same seed: the same schedule and codes (an episode's wall time, "(0.1 s)", apart)
    assert untimed(shown_again) == untimed(shown)
    refused = run(
        suite,
        "--hud-operator=operators:scripted",
        "--hud-agent=zero",
        "--hud-agent=my_agents:forward",
        "-v",
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*blinds the arms, but -v prints*"])


def mapping_line(mapping: dict[str, str]) -> str:
    first = sorted(mapping.items(), key=lambda kv: kv[1])[0]
    return f"{first[0]} = {first[1]} (zero)"


def test_a_bad_robot_spec_is_a_usage_error(suite) -> None:
    suite.makepyfile(test_line=TESTS)
    result = run(suite, "--hud-robot=so101_follower:port")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hud-robot: 'port' is not key=value*"])


def test_an_in_process_session_gives_the_robot_variable_back(suite, monkeypatch) -> None:
    """--hud-robot reaches env servers through the environment; a session run in this
    process (evaluate(), pytester) must not leave it set for the next one."""
    from pytest_hud.interop.lerobot.robots import ROBOT_ENV

    monkeypatch.delenv(ROBOT_ENV, raising=False)
    suite.makepyfile(test_line=TESTS)
    result = suite.runpytest_inprocess("--hud-robot=so101_follower:port=/dev/null", "--co")
    assert result.ret == pytest.ExitCode.OK
    assert ROBOT_ENV not in os.environ


def test_budgets_read_durations_and_counts() -> None:
    from pytest_hud.features.robots import parse_budget

    assert parse_budget("90s") == (90.0, None)
    assert parse_budget("45m") == (2700.0, None)
    assert parse_budget("2h") == (7200.0, None)
    assert parse_budget("12") == (None, 12)
    for bad in ("0", "1.5", "-3m", "2d", ""):
        with pytest.raises(ValueError, match="--hud-budget"):
            parse_budget(bad)


def test_a_partial_score_is_a_number_from_0_to_1_on_either_console() -> None:
    from pytest_hud.features.robots.operator import partial_score

    assert [partial_score(t) for t in ("0", "0.25", "1", " 1.0 ")] == [0.0, 0.25, 1.0, 1.0]
    assert [partial_score(t) for t in ("1.5", "-0.1", "nan", "inf", "abc", "")] == [None] * 6


CAMERA_TESTS = """
import pytest
from camera_env import push


@pytest.mark.hud(tasks=[push.task(length=3, setup="block at the left edge")])
def test_push(hud_result):
    pass
"""


def test_the_second_arm_sees_the_first_ones_scene_as_reference(suite, monkeypatch) -> None:
    """A paired row: the gate of its second episode shows the first frame its first
    episode saw (a PNG of the camera), so the operator sets the scene up alike."""
    from camera_suite import ENV as CAMERA_ENV
    from PIL import Image

    shutil.copy(HELPERS / "operators.py", suite.path / "operators.py")
    suite.makepyfile(camera_env=CAMERA_ENV, test_cam=CAMERA_TESTS, my_agents=AB_AGENTS)
    suite.makeconftest("import camera_env  # noqa: F401\n")
    shown = suite.path / "shown.txt"
    monkeypatch.setenv("OPERATOR_SHOWN", str(shown))
    monkeypatch.setenv("OPERATOR_SCRIPT", "{}")
    result = run(
        suite,
        "test_cam.py",
        "--hud-operator=operators:scripted",
        "--hud-agent=zero",
        "--hud-agent=my_agents:forward",
    )
    assert result.ret == 0, result.stdout.str()
    lines = shown.read_text().splitlines()
    refs = [line for line in lines if line.startswith("reference image: ")]
    assert len(refs) == 1  # the second gate only: the first had none yet
    second = next(i for i, line in enumerate(lines) if line.startswith("episode 2 of 2 · cam/push"))
    assert lines.index(refs[0]) > second
    image = Image.open(refs[0].removeprefix("reference image: "))
    assert image.size == (96, 96)


# -- complete results: every row says what happened to it (issue 55) -----------------------
def ledger_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("script", "args", "reason"),
    [
        ({"verdicts": [1]}, ["--hud-budget=1"], "budget"),
        ({"gates": ["skip", "go", "skip"], "verdicts": [1]}, [], "put off"),
        ({"gates": ["go", "quit"], "verdicts": [1]}, [], "quit"),
    ],
    ids=["budget", "put-off", "quit"],
)
def test_a_row_not_run_says_why_everywhere_and_the_run_is_incomplete(
    suite, monkeypatch, script, args, reason
) -> None:
    """The row not run is a skipped row with its reason in the results JSON and in the
    ledger as a record of its own (not an episode), and the run is incomplete."""
    result, rows, _ = attended(suite, monkeypatch, script, "--hud-ledger=l.jsonl", *args)
    doc = json.loads((suite.path / "r.json").read_text())
    unrun = [r for r in rows if r["outcome"] == "skipped"]
    assert len(unrun) == 1 and unrun[0]["unrun"] == reason, rows
    assert unrun[0]["skip_reason"]  # pytest's reason, in words
    assert doc["complete"] is False and doc["items"]["unrun"] == {reason: 1}
    ledger = ledger_lines(suite.path / "l.jsonl")
    assert [r["kind"] for r in ledger] == ["run", "episode", "unrun"], ledger
    assert ledger[2]["reason"] == reason and ledger[2]["nodeid"] == unrun[0]["nodeid"]
    result.stdout.fnmatch_lines([f"*hud robots: 1 row(s) not run*{reason}*"])


def test_a_session_that_ran_every_row_is_complete(suite, monkeypatch) -> None:
    _, rows, _ = attended(suite, monkeypatch, {"verdicts": [1, 1]})
    doc = json.loads((suite.path / "r.json").read_text())
    assert doc["complete"] is True and doc["items"]["unrun"] == {}
    assert all("unrun" not in r for r in rows)


def test_discarded_episodes_are_kept_in_the_row(suite, monkeypatch) -> None:
    """A discarded episode is thrown away as a grade, not as a fact: the row keeps it."""
    script = {"verdicts": [{"discard": True, "notes": "the cube fell off"}, 1.0, 1.0]}
    _, rows, _ = attended(suite, monkeypatch, script, "--hud-ledger=l.jsonl")
    row = by_goal(rows)[0.0]
    assert row["success"] is True and len(row["discards"]) == 1, row
    discard = row["discards"][0]
    assert discard["notes"] == "the cube fell off" and discard["steps"] == 3
    assert "discards" not in by_goal(rows)[5.0]
    episodes = [r for r in ledger_lines(suite.path / "l.jsonl") if r["kind"] == "episode"]
    assert len(episodes) == 2  # the discarded episode is the row's fact, not an episode
    kept = next(r for r in episodes if r["args"]["goal"] == 0.0)
    assert kept["discards"] == row["discards"] and kept["grade_source"] == "operator"


def test_resumed_episodes_are_reported_as_resumed_not_skipped(suite, monkeypatch) -> None:
    _, _, _ = attended(suite, monkeypatch, {"verdicts": [1, 1]}, "--hud-ledger=l.jsonl")
    again, rows, _ = attended(suite, monkeypatch, {}, "--hud-resume=l.jsonl")
    outcomes = again.parseoutcomes()
    assert outcomes.get("resumed") == 2 and "skipped" not in outcomes, outcomes
    assert [r.get("resumed") for r in rows] == [True, True]
    doc = json.loads((suite.path / "r.json").read_text())
    assert doc["overall"]["resumed"] == 2 and doc["overall"]["skipped"] == 0


# -- the operator during an episode (issue 55) ---------------------------------------------
PROMPT_AGENT = """
import json, os
from pytest_hud.robot import RobotAgent, ZeroModel


class Listening(ZeroModel):
    \"\"\"zero, one action a chunk, writing the prompt of every inference to $PROMPTS.\"\"\"

    def infer(self, batch):
        with open(os.environ["PROMPTS"], "a") as f:
            f.write(json.dumps(batch.get("prompt")) + "\\n")
        return super().infer(batch)


def listening():
    return RobotAgent(Listening(chunk=1), name="listening")
"""


def test_an_instruction_reaches_the_policy_at_its_next_inference(suite, monkeypatch) -> None:
    """The operator tells the policy something at step 1 of the first episode: every
    inference from then on gets it (not the row's prompt), the row records when and what,
    and the next episode starts from the row's own prompt again."""
    suite.makepyfile(listening=PROMPT_AGENT)
    prompts = suite.path / "prompts.jsonl"
    monkeypatch.setenv("PROMPTS", str(prompts))
    script = {
        "verdicts": [1, 1],
        "during": [{"episode": 1, "at": 1, "instruct": "now   go left"}],
    }
    _, rows, _ = attended(suite, monkeypatch, script, "--hud-agent=listening:listening")
    said = [json.loads(line) for line in prompts.read_text().splitlines()]
    flat = [p[0] if isinstance(p, list) else p for p in said]
    # sent at the loop's step 1, after that step's inference: the next one gets it
    assert flat[:3] == ["reach 0.0", "reach 0.0", "now go left"], flat
    assert flat[3] == "reach 5.0"  # the next episode: its own prompt
    first = by_goal(rows)[0.0]
    assert first["instructions"] == [{"step": 1, "text": "now go left"}]
    assert "instructions" not in by_goal(rows)[5.0]


def test_a_verdict_given_during_the_episode_ends_it_and_no_question_follows(
    suite, monkeypatch
) -> None:
    suite.makepyfile(listening=PROMPT_AGENT)
    monkeypatch.setenv("PROMPTS", str(suite.path / "prompts.jsonl"))
    script = {
        "verdicts": [1],  # the second episode's only: the first was graded while it ran
        "during": [{"episode": 1, "at": 1, "verdict": 0.25, "notes": "wrong cup"}],
    }
    _, rows, shown = attended(suite, monkeypatch, script, "--hud-agent=listening:listening")
    first = by_goal(rows)[0.0]
    assert first["score"] == 0.25 and first["notes"] == "wrong cup"
    assert first["grade_source"] == "operator" and first["stopped"] == "verdict"
    assert first["steps"] < 3  # it ended at its next tick
    assert not any(line.startswith("episode 1 ended") for line in shown)  # not asked again
    assert by_goal(rows)[5.0]["success"] is True


def test_the_gate_shows_progress_the_rubric_and_the_budget_left(suite, monkeypatch) -> None:
    script = {"verdicts": [1, 1]}
    _, rows, shown = attended(
        suite,
        monkeypatch,
        script,
        "--hud-rubric=the dot must end past the goal",
        "--hud-budget=2",
    )
    # at each gate and again at each verdict
    assert shown.count("rubric: the dot must end past the goal") == 4, shown
    verdict = next(i for i, line in enumerate(shown) if line.startswith("episode 1 ended"))
    assert "rubric: the dot must end past the goal" in shown[verdict:]
    assert "budget: 2 of 2 episodes left" in shown and "budget: 1 of 2 episodes left" in shown
    assert all(r["rubric"] == "the dot must end past the goal" for r in rows)
    assert all(r["episode_seconds"] >= 0 for r in rows)
    assert "session ended: 2 graded, 0 errors, 0 not run" in shown


def test_the_fault_taxonomy_says_what_the_session_does() -> None:
    from pytest_hud.features.robots.faults import classify

    said = {
        "robot so101 'a' faulted during connect: OSError: no such port": "halt",
        "robot so101 is not calibrated; fix: run lerobot-calibrate": "halt",
        "robot so101 a is already driven by pid 12: one robot is one slot": "halt",
        "robot so101 faulted during send_action: ConnectionError: no status packet": "ask",
        "robot so101 faulted during get_observation: OSError: read failed": "ask",
        "the policy server's connection closed mid-episode": "retry",
        "the env server could not set up this task": "error",
    }
    assert {text: classify(text).action for text in said} == said
    assert classify("boom", "TimeoutError").action == "retry"


# -- test ids a person can select (issue 55) ------------------------------------------------
ROWS_BY_SEED = """
import pytest
from pytest_hud import Environment

env = Environment("arm")


@env.template()
async def pick(seed: int = 0, setup: str = ""):
    yield {"prompt": "pick"}
    yield {"success": True}


SETUP = "cube on mark 2, the bowl on the right"


@pytest.mark.hud(tasks=[pick.task(seed=1), pick.task(seed=10), pick.task(seed=2, setup=SETUP)])
def test_pick(hud_result):
    pass
"""


def test_a_row_is_selected_with_k_by_the_id_the_operator_sees(suite) -> None:
    """The gate names a row as its test id does (arm/pick[seed:1]); -k takes that form as
    written: [seed:1] picks seed 1 and not seed 10, and free text (a set-up) is one hash."""
    suite.makepyfile(test_seeds=ROWS_BY_SEED)
    ids = run(suite, "test_seeds.py", "--collect-only", "-q").stdout.lines
    assert "test_seeds.py::test_pick[arm/pick[seed:1]]" in ids
    assert "test_seeds.py::test_pick[arm/pick[seed:10]]" in ids
    assert any(i.startswith("test_seeds.py::test_pick[arm/pick[seed:2][+") for i in ids), ids
    picked = run(suite, "test_seeds.py", "--collect-only", "-q", "-k", "pick[seed:1]")
    assert [i for i in picked.stdout.lines if "::" in i] == [
        "test_seeds.py::test_pick[arm/pick[seed:1]]"
    ]


def test_a_rubric_comes_from_the_row_else_its_template_else_its_env(tmp_path: Path) -> None:
    """--hud-rubric=@FILE.json maps env/template or env to a rubric; a row's own rubric arg
    (or metadata) comes first; a row the table does not name gets none."""
    from pytest_hud.features.robots import parse_rubric
    from pytest_hud.runtime.task import Task

    table = tmp_path / "rubrics.json"
    table.write_text(json.dumps({"so101": "the cube in the bowl", "so101/wipe": "no streaks"}))
    rubric = parse_rubric(f"@{table}")
    assert rubric(Task("so101", "pick", {"seed": 0})) == "the cube in the bowl"
    assert rubric(Task("so101", "wipe", {"seed": 0})) == "no streaks"
    assert rubric(Task("so101", "pick", {"rubric": " the  jaw closed "})) == "the jaw closed"
    assert rubric(Task("so101", "pick", metadata={"rubric": "from metadata"})) == "from metadata"
    assert rubric(Task("aloha", "fold", {})) == ""
    assert parse_rubric("one for all")(Task("aloha", "fold", {})) == "one for all"


FLAKY_AGENT = """
import os
from pytest_hud.robot import RobotAgent, ZeroModel


class Flaky(RobotAgent):
    \"\"\"zero, whose link drops in its first episode (a policy server resetting the
    connection); every episode it starts is a line in $EPISODES.\"\"\"

    dropped = False

    async def run_episode(self, *args, **kwargs):
        with open(os.environ["EPISODES"], "a") as f:
            f.write("episode\\n")
        if not Flaky.dropped:
            Flaky.dropped = True
            raise ConnectionResetError("connection reset by the policy server")
        return await super().run_episode(*args, **kwargs)


def flaky():
    return Flaky(ZeroModel(), name="flaky")
"""


def test_a_dropped_link_runs_the_episode_again_by_itself(suite, monkeypatch) -> None:
    """The taxonomy's retry: the link to the policy drops in the first episode; it runs
    again once by itself (no question, no verdict on the dropped one) and is graded."""
    suite.makepyfile(flaky_agents=FLAKY_AGENT)
    episodes = suite.path / "episodes.txt"
    monkeypatch.setenv("EPISODES", str(episodes))
    result, rows, shown = attended(
        suite, monkeypatch, {"verdicts": [1, 1]}, "--hud-agent=flaky_agents:flaky"
    )
    result.assert_outcomes(passed=2)
    assert episodes.read_text().count("episode") == 3  # the dropped one, run again, the next
    assert all(r["error"] is None and r["grade_source"] == "operator" for r in rows), rows
    assert sum(1 for line in shown if " ended after " in line) == 2  # asked twice, not thrice
    assert not any(line.startswith("robot fault") for line in shown)


#: ``stuck_agents:stuck``: its first inference never returns; it fires the item's
#: pytest-timeout (SIGALRM, the handler pytest-timeout's signal method installs) as it hangs,
#: so the item is failed at that moment, not after a wall-clock wait
STUCK_AGENT = """
import os, signal, threading
from pytest_hud.robot import RobotAgent, ZeroModel


class Stuck(ZeroModel):
    hung = False

    def infer(self, batch):
        if not Stuck.hung:
            Stuck.hung = True
            os.kill(os.getpid(), signal.SIGALRM)
            threading.Event().wait()
        return super().infer(batch)


def stuck():
    return RobotAgent(Stuck(), name="stuck")
"""


def test_an_item_timed_out_by_pytest_timeout_leaves_the_next_items_their_turn(
    suite, monkeypatch
) -> None:
    """Issue 55: the first episode stalls and pytest-timeout fails its item; its rollout was
    left running, holding the session's one rollout slot (and the robot), so every later
    item waited out its own timeout too and the budget never counted them. The next row
    runs and is graded, and the timed-out row is in the results as an error saying so (it
    once left no row at all)."""
    suite.makepyfile(stuck_agents=STUCK_AGENT)
    result, rows, shown = attended(
        suite, monkeypatch, {}, "--hud-agent=stuck_agents:stuck", "--timeout=120"
    )
    result.assert_outcomes(failed=1, errors=1)  # goal 0 timed out; goal 5 ran (zero fails it)
    result.stdout.fnmatch_lines(["*pytest-timeout ended the wait (Timeout*"])
    stalled, ran = by_goal(rows)[0.0], by_goal(rows)[5.0]
    assert stalled["outcome"] == "error" and stalled["error_type"] == "Timeout", stalled
    assert "--timeout above --hud-timeout" in stalled["error"], stalled
    assert ran["error"] is None and ran["steps"] == 3, ran
    assert sum(1 for line in shown if " ended after " in line) == 1  # the second was graded
