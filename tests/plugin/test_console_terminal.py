"""The terminal console (--hud-operator=terminal) in a real terminal (tmux): the reset gate's
box and keys, the live footer, a partial verdict with notes and a success; what reaches the
results rows is what was typed, and the screen never shows the agent's name.
``PYTEST_HUD_DOCS_IMAGES=1`` also writes the screen the robots guide shows
(docs/images/terminal-console.txt)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from line_suite import AB_AGENTS, TESTS
from terminal import Pane

RECORDING = Path(__file__).resolve().parents[2] / "docs" / "images" / "terminal-console.txt"


def test_an_operator_grades_two_episodes_at_the_terminal(suite) -> None:
    suite.makepyfile(test_line=TESTS)
    env = {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "PATH", "HOME"))}
    env["PYTEST_ADDOPTS"] = ""
    pane = Pane(
        f"{sys.executable} -m pytest -p no:cacheprovider -k reach --hud-operator=terminal "
        "--hud-results=r.json",
        suite.path,
        env,
    )
    try:
        pane.wait_for("position the scene, then press Enter")
        screen = pane.screen()
        assert "│ episode 1 of 2 · line/reach[goal:0.0][seed:1]" in screen
        assert "Enter: start · s: put this row off · q: end the session" in screen
        pane.send("Enter")
        pane.wait_for("verdict?")
        screen = pane.screen()
        assert "x or space: stop · y / n / p: grade now" in screen  # the footer ran
        assert "episode 1 ended after 3 steps" in screen
        pane.send("p")
        pane.wait_for("partial score between 0 and 1:")
        pane.send("2", "Enter")  # refused: not in [0, 1]
        pane.wait_for("'2' is not a number between 0 and 1")
        pane.send("0.5", "Enter")
        pane.wait_for("notes (Enter for none):")
        pane.send("jaw slipped", "Enter")
        pane.wait_for("position the scene, then press Enter", after=1)
        pane.send("Enter")
        pane.wait_for("verdict?", after=1)
        pane.send("y")
        pane.wait_for("notes (Enter for none):", after=1)
        pane.send("Enter")
        screen = pane.wait_for("EXIT=")
        assert "EXIT=1" in screen  # the partial grade fails its item
        assert "zero" not in screen.split("===== FAILURES")[0]  # unnamed until the report
        if os.environ.get("PYTEST_HUD_DOCS_IMAGES") == "1":
            shown = screen[screen.index("  ┌") :].split("=====", 1)[0]  # the gates to the end
            RECORDING.write_text(
                "$ pytest -k reach --hud-operator=terminal\n...\ntest_line.py\n" + shown
            )
    finally:
        pane.close()
    rows = {
        r["args"]["goal"]: r for r in json.loads((suite.path / "r.json").read_text())["rollouts"]
    }
    assert rows[0.0]["score"] == 0.5 and rows[0.0]["notes"] == "jaw slipped"
    assert rows[5.0]["success"] is True and rows[5.0]["grade_source"] == "operator"
    assert rows[5.0]["notes"] is None


DETECTED = """
import pytest
from line_env import detected


@pytest.mark.hud(tasks=[detected.task(goal=0.0, seed=1), detected.task(goal=5.0, seed=2)])
def test_detected(hud_result):
    assert hud_result.success, hud_result.summary()
"""


def test_a_detectors_verdict_stands_unless_the_operator_overrides_it(suite) -> None:
    """--hud-override-window=0: the detector's verdicts are taken without a key; -1: the
    console waits, and n overrides the detector's success."""
    suite.makepyfile(test_detected=DETECTED)
    env = {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "PATH", "HOME"))}
    command = (
        f"{sys.executable} -m pytest -p no:cacheprovider --hud-operator=terminal "
        "--hud-results=r.json --hud-override-window="
    )
    pane = Pane(command + "0", suite.path, env)
    try:
        pane.wait_for("position the scene, then press Enter")
        pane.send("Enter")
        pane.wait_for("position the scene, then press Enter", after=1)
        pane.send("Enter")
        screen = pane.wait_for("EXIT=")
    finally:
        pane.close()
    assert screen.count("graded by the detector") == 2
    rows = json.loads((suite.path / "r.json").read_text())["rollouts"]
    assert [r["grade_source"] for r in rows] == ["detector", "detector"]
    assert [r["success"] for r in rows] == [True, False]

    pane = Pane(command + "-1", suite.path, env)
    try:
        pane.wait_for("position the scene, then press Enter")
        pane.send("Enter")
        pane.wait_for("Enter: accept the detector's success")
        pane.send("n")  # the detector said success; the operator saw otherwise
        pane.wait_for("notes (Enter for none):")
        pane.send("the cube fell off after", "Enter")
        pane.wait_for("position the scene, then press Enter", after=1)
        pane.send("Enter")
        pane.wait_for("Enter: accept the detector's failure")
        pane.send("Enter")
        pane.wait_for("notes (Enter for none):", after=1)
        pane.send("Enter")
        pane.wait_for("EXIT=")
    finally:
        pane.close()
    rows = json.loads((suite.path / "r.json").read_text())["rollouts"]
    assert [r["grade_source"] for r in rows] == ["operator (over the detector)", "detector"]
    assert [r["success"] for r in rows] == [False, False]
    assert rows[0]["notes"] == "the cube fell off after"


def test_a_blinded_session_never_names_an_arm_on_the_terminal(suite) -> None:
    """Two agents at the terminal console: everything on the screen until the report shows
    arm codes only (no agent name, no arm letter tag); the report unblinds."""
    suite.makepyfile(test_line=TESTS, my_agents=AB_AGENTS)
    env = {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "PATH", "HOME"))}
    pane = Pane(
        f"{sys.executable} -m pytest -p no:cacheprovider -k reach --hud-operator=terminal "
        "--hud-agent=zero --hud-agent=my_agents:forward --hud-ab-seed=3",
        suite.path,
        env,
    )
    try:
        for n in range(4):
            pane.wait_for("position the scene, then press Enter", after=n)
            pane.send("Enter")
            pane.wait_for("verdict?", after=n)
            pane.send("y")
            pane.wait_for("notes (Enter for none):", after=n)
            pane.send("Enter")
        screen = pane.wait_for("EXIT=")
    finally:
        pane.close()
    before, _, report = screen.partition("hud robots: unblinded")
    before = before.split("=== FAILURES")[0].split("=== hud")[0]
    for name in ("zero", "forward", "my_agents", "@A", "@B"):
        assert name not in before, name
    codes = set(re.findall(r"· arm ([A-Z])", before))
    assert len(codes) == 2
    assert all(f"arm {c} = " in report for c in codes)


#: a row's text that would set the window title, clear the screen and write the clipboard
ESCAPES = "\x1b]2;pwned\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07"
GATE = f"""
from pytest_hud.features.robots.console import TerminalOperator
from pytest_hud.features.robots.operator import Ask, Gate

E = {ESCAPES!r}
print("before the gate")
operator = TerminalOperator()
gate = Gate(row="line/reach" + E, setup="put the cup left" + E, prompt="pick it up" + E)
print("gate:", operator.gate(gate))
print("verdict:", operator.verdict(Ask(gate, steps=3, detector=True, accept_after=0)).score)
"""


def test_a_rows_escape_sequences_are_shown_not_obeyed_by_the_terminal(tmp_path: Path) -> None:
    """Issue 52 #7: the task, set-up text and row reached the operator's terminal raw, so a
    task file could set the window title, clear the screen, hide text or write the
    clipboard (OSC 52). In a real terminal (tmux) the gate now shows them as text: the
    pane's title stays, the line printed before the gate is still on the screen."""
    (tmp_path / "gate.py").write_text(GATE)
    env = {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "PATH", "HOME"))}
    pane = Pane(f"{sys.executable} gate.py", tmp_path, env)
    try:
        pane.wait_for("position the scene, then press Enter")
        pane.send("Enter")
        screen = pane.wait_for("EXIT=")
        title = subprocess.run(
            [*pane.tmux, "display", "-p", "-t", pane.name, "#{pane_title}"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    finally:
        pane.close()
    assert title != "pwned", "the row's escape set the terminal's title"
    assert "before the gate" in screen  # not cleared
    assert "instruction: pick it up\\x1b]2;pwned\\x07\\x1b[2J\\x1b]52;c;cHduZWQ=\\x07" in screen
    assert "set up: put the cup left\\x1b]2;pwned" in screen
    assert "gate: go" in screen and "verdict: 1.0" in screen


def test_a_note_typed_in_the_detectors_window_holds_it_and_is_kept(suite) -> None:
    """Issue 55: typing a note while the detector's verdict counted down lost it (the first
    key was ignored, the rest too, and the verdict was taken). Now the countdown is on the
    screen, the first key of a note holds it, the note is kept, and Enter accepts the
    detector's verdict with it; a summary ends the session."""
    suite.makepyfile(test_detected=DETECTED)
    env = {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "PATH", "HOME"))}
    pane = Pane(
        f"{sys.executable} -m pytest -p no:cacheprovider --hud-operator=terminal "
        "--hud-results=r.json --hud-override-window=60 --hud-budget=30m",
        suite.path,
        env,
    )
    try:
        screen = pane.wait_for("position the scene, then press Enter")
        assert "episode 1 of 2 · line/detected[goal:0.0][seed:1]" in screen
        assert "budget: 30:00 (the clock starts at the first frame)" in screen
        pane.send("Enter")
        pane.wait_for("the detector's verdict stands in")
        pane.send("-l", "the cube slid")  # a note, typed while the window counts down
        pane.wait_for("held; notes (Enter ends them): the cube slid")
        pane.send("Enter")
        pane.wait_for("verdict?")
        pane.send("Enter")  # the detector's success, with the note
        screen = pane.wait_for("position the scene, then press Enter", after=1)
        assert "of 30:00 left" in screen  # the budget's clock runs from the first frame
        pane.send("Enter")
        # the countdown is redrawn in place: the first episode's may show more than once
        pane.wait_for("the detector's verdict stands in", since="episode 2 of 2")
        pane.send("n")
        pane.wait_for("notes (Enter for none):")
        pane.send("Enter")
        screen = pane.wait_for("EXIT=")
    finally:
        pane.close()
    assert "session ended: 2 graded, 0 errors, 0 not run" in screen
    rows = json.loads((suite.path / "r.json").read_text())["rollouts"]
    assert rows[0]["grade_source"] == "detector" and rows[0]["notes"] == "the cube slid"
    assert rows[1]["success"] is False  # the detector's failure, taken by n


def test_the_operator_tells_the_policy_and_grades_during_the_episode(suite) -> None:
    """A long episode at the terminal: i opens a line the policy gets at its next inference
    (the row keeps it), y grades it at once (the episode ends at its next tick, no verdict
    question follows); the short one after is graded as usual."""
    from camera_suite import ENV
    from camera_suite import TESTS as CAMERA_TESTS

    suite.makepyfile(camera_env=ENV, test_camera=CAMERA_TESTS)
    env = {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "PATH", "HOME"))}
    pane = Pane(
        f"{sys.executable} -m pytest -p no:cacheprovider test_camera.py "
        "--hud-operator=terminal --hud-results=r.json",
        suite.path,
        env,
    )
    try:
        pane.wait_for("position the scene, then press Enter")
        pane.send("Enter")
        pane.wait_for("● running")
        pane.send("i")
        pane.wait_for("tell the policy (Enter sends, empty: nothing):")
        pane.send("-l", "push it gently")
        pane.send("Enter")
        pane.wait_for("] push it gently")  # [sent at step N]
        pane.send("y")
        pane.wait_for("graded 1 now: the episode ends")
        pane.wait_for("position the scene, then press Enter", after=1)
        pane.send("Enter")
        pane.wait_for("verdict?")
        pane.send("n")
        pane.wait_for("notes (Enter for none):")
        pane.send("Enter")
        screen = pane.wait_for("EXIT=")
    finally:
        pane.close()
    assert "episode 1 ended" not in screen  # graded while it ran: not asked again
    rows = json.loads((suite.path / "r.json").read_text())["rollouts"]
    first = next(r for r in rows if r["args"]["length"] == 6000)
    assert first["success"] is True and first["stopped"] == "verdict"
    assert [i["text"] for i in first["instructions"]] == ["push it gently"]
    assert first["steps"] < 6000
