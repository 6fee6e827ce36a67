"""Attended evaluation: an operator at the robot (``--hud-operator``) passes a reset gate
before each episode, may stop it, and grades it; a user's grader (``--hud-grader``, a
success classifier or a VLM judge) grades from the first and last observations; a budget
(``--hud-budget``) stops scheduling new episodes. Every grade is recorded with its source
(operator, detector, grader) and the operator's notes.

An env's definitive success (its detector) is taken as the grade and shown to the operator,
who may override it. One robot is one slot: an attended session runs one episode at a time.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from pytest_hud._plugin.cases import HudCase
from pytest_hud._plugin.internals import is_worker, settle_setup
from pytest_hud._plugin.options import OptionTable, read_option
from pytest_hud._plugin.state import BLINDED, CASE
from pytest_hud.evaluation.results import Row
from pytest_hud.features.robots.blinding import arm_codes
from pytest_hud.features.robots.operator import (
    Ask,
    Episode,
    Gate,
    GateAnswer,
    Operator,
    ScriptedOperator,
    Verdict,
    check_verdict,
)
from pytest_hud.plumbing.loader import load_object
from pytest_hud.plumbing.process import set_env
from pytest_hud.robot.agent.timed import STOP
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.rollout import Agent, RolloutResult, rollout
from pytest_hud.runtime.task import Task

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["OPTIONS", "PUT_OFF", "RobotsPlugin", "ScriptedOperator", "enable", "parse_budget"]

#: Times a row may be put off (back of the queue) before a further "put off" skips it.
PUT_OFF = 2

OPTIONS: OptionTable = [
    (
        "--hud-operator",
        "an operator at the robot grades each episode: terminal (this terminal's keys), web (a "
        "console on 127.0.0.1 with the cameras; its url is printed), or MODULE:NAME, a factory "
        "of an Operator (a scripted one for CI); with it, a reset gate "
        "before each episode, a stop key while it runs, and a verdict after",
        {"metavar": "WHO"},
    ),
    (
        "--hud-grader",
        "MODULE:NAME, a callable (first, last, prompt) -> bool | score in [0,1] | None that "
        "grades an episode from its first and last observations (a success classifier, a "
        "VLM judge); None leaves the grade to the env or the operator",
        {"metavar": "REF"},
    ),
    (
        "--hud-override-window",
        "seconds the operator has to override an env detector's verdict before it stands "
        "(default 5; 0 takes it at once, -1 waits for a key)",
        {"metavar": "SECONDS"},
    ),
    (
        "--hud-robot",
        "the robot that env modules' env.lerobot_robot(...) serve: TYPE[:key=value,...] (e.g. "
        "so101_follower:port=/dev/ttyACM0,id=left_arm), its fields over the module's: the same "
        "suite on another arm without editing it",
        {"metavar": "SPEC"},
    ),
    (
        "--hud-budget",
        "stop scheduling new episodes after DURATION (90s, 45m, 2h) or N episodes; the rows "
        "not run are reported undecided (rerun them with --hud-resume)",
        {"metavar": "LIMIT"},
    ),
]

#: A grader's answer: success or failure, a score in [0, 1], or None (cannot tell).
Grader = Callable[[Mapping[str, object], Mapping[str, object], str], "bool | float | None"]


def parse_budget(text: str) -> tuple[float | None, int | None]:
    """``--hud-budget``: (seconds, None) for a duration, (None, episodes) for a count."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*", text)
    if match is None or float(match.group(1)) <= 0:
        raise pytest.UsageError(
            f"--hud-budget takes a duration (90s, 45m, 2h) or a number of episodes, got {text!r}"
        )
    value, unit = float(match.group(1)), match.group(2)
    if unit is None:
        if not value.is_integer():
            raise pytest.UsageError(f"--hud-budget: {text!r} episodes is not a whole number")
        return None, int(value)
    return value * {"s": 1, "m": 60, "h": 3600}[unit], None


def _operator(spec: str) -> Operator:
    if spec == "web":
        from pytest_hud.features.robots.web import WebOperator

        return WebOperator()
    if spec == "terminal":
        from pytest_hud.features.robots.console import TerminalOperator

        try:
            return TerminalOperator()
        except RuntimeError as exc:
            raise pytest.UsageError(str(exc)) from None
    try:
        factory = load_object(spec)
    except (ImportError, AttributeError, ValueError) as exc:
        raise pytest.UsageError(
            "--hud-operator is terminal, web or MODULE:NAME (an Operator factory), got "
            f"{spec!r}: {exc}"
        ) from None
    made: Operator = factory()
    return made


class _Frames:
    """Episode observer: the first and last observations, for a grader."""

    def __init__(self, sink: dict[int, tuple[dict[str, object], dict[str, object]]], key: int):
        self.sink, self.key = sink, key
        self.first: dict[str, object] | None = None
        self.last: dict[str, object] | None = None

    def step(self, data: dict[str, object], action: object) -> None:
        if self.first is None:
            self.first = data
        self.last = data

    def end(self, ok: bool) -> dict[str, object]:
        if self.first is not None and self.last is not None:
            self.sink[self.key] = (self.first, self.last)
        return {}


def _row_label(task: Task) -> str:
    """The row as the operator sees it: env/template[args], without the set-up's own."""
    shown = {k: v for k, v in task.args.items() if k not in ("setup", "image", "task")}
    args = "[" + ",".join(f"{k}={v}" for k, v in shown.items()) + "]" if shown else ""
    return f"{task.env}/{task.id}{args}"


class _Reference:
    """Episode observer: saves the first frame of the first camera of a row's first
    episode as its reference image."""

    def __init__(self, run: object, spaces: object, folder: Path, refs: dict[str, str]) -> None:
        task = getattr(run, "task", None)
        cameras = getattr(spaces, "cameras", [])
        self.row = _row_label(task) if isinstance(task, Task) else None
        self.camera = cameras[0].name if cameras else None
        self.folder, self.refs = folder, refs
        self.pending = self.row is not None and self.camera is not None and self.row not in refs

    def step(self, data: dict[str, object], action: object) -> None:
        if not self.pending:
            return
        self.pending = False
        assert self.row is not None and self.camera is not None
        from PIL import Image

        frame = np.asarray(data.get(self.camera))
        if frame.ndim != 3 or frame.shape[-1] != 3:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / (re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.row) + ".png")
        Image.fromarray(frame.astype(np.uint8)).save(path)
        self.refs[self.row] = str(path)

    def end(self, ok: bool) -> dict[str, object]:
        return {}


class _Cameras:
    """Episode observer: hands each tick's camera frames to the operator's console."""

    def __init__(self, show: Callable[[Mapping[str, object]], None], names: list[str]) -> None:
        self.show, self.names = show, names

    def step(self, data: dict[str, object], action: object) -> None:
        if self.names:
            self.show({name: data[name] for name in self.names if name in data})

    def end(self, ok: bool) -> dict[str, object]:
        return {}


class RobotsPlugin:
    """The attended session's gates, verdicts, graders and budget (see the module doc)."""

    def __init__(
        self,
        session: HudSession,
        operator: Operator | None,
        grader: Grader | None,
        budget: tuple[float | None, int | None],
    ) -> None:
        self.session = session
        self.config = session.config
        self.operator = operator
        self.grader = grader
        self.seconds, self.episodes = budget
        self.started = time.monotonic()
        self.run = 0  # episodes started
        self.number = 0  # gates shown
        self.unrun: list[str] = []  # rows the budget or the operator left
        self.gates: dict[int, Gate] = {}  # id(task) -> the gate passed for it
        self.cases: dict[int, HudCase] = {}  # id(task) -> its case (for a rerun's gate)
        self.answers: dict[str, GateAnswer] = {}  # node id -> its gate's answer, until it runs
        self.frames: dict[int, tuple[dict[str, object], dict[str, object]]] = {}
        #: row -> the first camera frame of its first episode (a PNG): the next gate of the
        #: same row (the other arm's, a rerun) shows it, so the scene is set up alike
        self.references: dict[str, str] = {}
        self.quit = False
        #: how long a detector's verdict waits for an override (None: for a key)
        self.window: float | None = 5.0
        arms = session.arms if operator is not None and len(session.arms) > 1 else []
        #: blinded arms: letter -> the code the operator sees
        self.codes = arm_codes([a.letter for a in arms], int(session.options.ab_seed or 0))
        self.config.stash[BLINDED] = bool(self.codes)

    # -- the budget --------------------------------------------------------------------
    def _spent(self) -> str | None:
        if self.episodes is not None and self.run >= self.episodes:
            return f"{self.episodes} episodes"
        if self.seconds is not None and time.monotonic() - self.started >= self.seconds:
            return f"{self.seconds:g} s"
        return None

    @pytest.hookimpl
    def pytest_hud_skip_case(self, nodeid: str, case: HudCase) -> str | None:
        if self.quit:
            return "the operator ended the session: not run (undecided)"
        spent = self._spent()
        if spent is not None and self.run > 0:
            return f"the budget ({spent}) is spent: not run (undecided)"
        return None

    # -- the gate, before the item runs; a row put off runs again later ------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """pytest's run loop with the reset gate in front of each item: a row the operator
        puts off goes to the back of the queue (at most :data:`PUT_OFF` times)."""
        config = session.config
        if self.operator is None or config.option.collectonly:
            return None
        if session.testsfailed and not config.option.continue_on_collection_errors:
            return None  # pytest's own loop says why
        queue = deque(session.items)
        put_off: dict[str, int] = {}
        while queue:
            item = queue.popleft()
            answer = self._gate_item(item)
            if answer == "skip" and queue and put_off.get(item.nodeid, 0) < PUT_OFF:
                put_off[item.nodeid] = put_off.get(item.nodeid, 0) + 1
                self.answers.pop(item.nodeid, None)
                queue.append(item)
                continue
            settle_setup(session, item)
            config.hook.pytest_runtest_protocol(item=item, nextitem=queue[0] if queue else None)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        return True

    def _gate_item(self, item: pytest.Item) -> GateAnswer | None:
        """The operator's answer at ``item``'s gate, or None where no gate is shown (not a
        row, or skipped anyway)."""
        case = item.stash.get(CASE, None)
        if case is None or self.operator is None or item.get_closest_marker("skip"):
            return None
        reasons = item.config.hook.pytest_hud_skip_case(
            config=item.config, nodeid=item.nodeid, case=case
        )
        if reasons is not None:
            return None
        gate = self._gate(case.task, case)
        answer = self.operator.gate(gate)
        self.answers[item.nodeid] = answer
        if answer == "go":
            self.gates[id(case.task)] = gate
            self.cases[id(case.task)] = case
        elif answer == "quit":
            self.quit = True
        return answer

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        case = item.stash.get(CASE, None)
        if case is None or self.operator is None:
            return
        answer = self.answers.pop(item.nodeid, None)
        if answer == "quit":
            item.session.shouldstop = "the operator ended the session"
        if answer in ("skip", "quit"):
            self.unrun.append(item.nodeid)
            said = "put this row off" if answer == "skip" else "ended the session"
            pytest.skip(f"the operator {said}: not run (undecided)")
        reason = self.pytest_hud_skip_case(item.nodeid, case)
        if reason is not None:
            self.unrun.append(item.nodeid)
            pytest.skip(reason)

    def _gate(self, task: Task, case: HudCase | None) -> Gate:
        self.number += 1
        args = dict(task.args)
        row = _row_label(task)
        arm = case.arm.letter if case is not None and case.arm is not None else None
        # the row's own reference image, else the first frame its earlier episode saw here
        image = str(args["image"]) if args.get("image") else self.references.get(row)
        return Gate(
            row=row,
            setup=str(args.get("setup") or ""),
            prompt=str(args.get("task") or task.id),
            arm=self.codes.get(arm) if arm else None,
            number=self.number,
            image=image,
        )

    # -- the episode ----------------------------------------------------------------------
    @pytest.hookimpl
    def pytest_hud_episode_observers(self) -> list[object]:
        found: list[object] = []
        if self.grader is not None:
            sink = self.frames
            found.append(lambda run, spaces: _Frames(sink, id(run.task) if run is not None else 0))
        if self.operator is not None:
            folder, refs = self.session.artifacts / "references", self.references
            found.append(lambda run, spaces: _Reference(run, spaces, folder, refs))
        show = getattr(self.operator, "frame", None)
        if callable(show):  # a console that shows the cameras (the web console)
            found.append(lambda run, spaces: _Cameras(show, [c.name for c in spaces.cameras]))
        return found

    @pytest.hookimpl
    def pytest_hud_run_rollout(
        self, task: Task, agent: Agent, provider: Provider, index: int, timeout: float | None
    ) -> Awaitable[RolloutResult] | None:
        if self.operator is None and self.grader is None:
            return None
        return self._attended(task, agent, provider, index, timeout)

    async def _attended(
        self, task: Task, agent: Agent, provider: Provider, index: int, timeout: float | None
    ) -> RolloutResult:
        gate = self.gates.pop(id(task), None) or self._gate(task, self.cases.get(id(task)))
        discarded = 0
        while True:
            self.run += 1
            episode = Episode(gate)
            token = STOP.set(episode.stop.is_set)
            close = self.operator.watch(episode) if self.operator is not None else None
            try:
                result = await rollout(task, agent, provider, index=index, timeout=timeout)
            finally:
                STOP.reset(token)
                if close is not None:
                    await asyncio.to_thread(close)
            if result.error is not None:
                return result
            verdict = await self._grade(task, gate, result, episode.stop.is_set())
            if verdict is None or not verdict.discard:
                if discarded:
                    result.grade["discarded"] = discarded
                return result
            discarded += 1
            assert self.operator is not None
            gate = self._gate(task, self.cases.get(id(task)))
            answer: GateAnswer = await asyncio.to_thread(self.operator.gate, gate)
            if answer != "go":
                result.error = "the operator discarded the episode and did not run the row again"
                result.error_type, result.phase = "OperatorDiscard", "grade"
                self.quit = self.quit or answer == "quit"
                return result

    async def _grade(
        self, task: Task, gate: Gate, result: RolloutResult, stopped: bool
    ) -> Verdict | None:
        grade = result.grade
        source = grade.get("grade_source")
        detector = bool(result.success) if source == "detector" else None
        if self.grader is not None and source is None:
            first, last = self.frames.pop(id(task), ({}, {}))
            said = await asyncio.to_thread(self.grader, first, last, result.prompt)
            if said is not None:
                _apply(result, float(said), "grader", "")
                detector, source = bool(result.success), "grader"
        if stopped:
            result.agent_info.setdefault("stopped", "operator")
        if self.operator is None:
            return None
        ask = Ask(gate, result.steps, detector=detector, stopped=stopped, accept_after=self.window)
        verdict = check_verdict(await asyncio.to_thread(self.operator.verdict, ask))
        if verdict.discard:
            return verdict
        assert verdict.score is not None
        if detector is not None and verdict.score == (1.0 if detector else 0.0):
            by = str(source)  # the operator accepted it
        else:
            by = "operator" if detector is None else f"operator (over the {source})"
        _apply(result, verdict.score, by, verdict.notes)
        return verdict

    @pytest.hookimpl
    def pytest_hud_episode_result(self, result: RolloutResult) -> None:
        """A robot without a detector, graded by nobody: an error naming the fix, not a
        silent failure."""
        grade = result.grade
        if (
            result.error is None
            and "robot" in grade
            and grade.get("success") is None
            and grade.get("grade_source") is None
        ):
            result.error = (
                f"nobody graded this episode on robot {grade['robot']}: it has no success "
                "detector and the session has no operator; fix: --hud-operator=terminal (a "
                "person grades), --hud-grader=MODULE:NAME, or env.lerobot_robot(detector=...)"
            )
            result.error_type, result.phase = "Ungraded", "grade"

    # -- reports ------------------------------------------------------------------------
    @pytest.hookimpl
    def pytest_hud_row(self, item: pytest.Item, row: Row) -> None:
        case = item.stash.get(CASE, None)
        if self.codes and case is not None and case.arm is not None:
            row["arm_code"] = self.codes[case.arm.letter]

    @pytest.hookimpl
    def pytest_hud_results_meta(self) -> dict[str, object]:
        if not self.codes:
            return {}
        arms = {a.letter: a for a in self.session.arms}
        return {
            "blinding": {
                code: {"arm": letter, "spec": arms[letter].spec}
                for letter, code in self.codes.items()
            }
        }

    @pytest.hookimpl
    def pytest_hud_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.codes:
            arms = {a.letter: a for a in self.session.arms}
            terminalreporter.write_line(
                "hud robots: unblinded: "
                + ", ".join(
                    f"arm {code} = {letter} ({arms[letter].spec})"
                    for letter, code in self.codes.items()
                )
            )
        if self.unrun:
            spent = self._spent()
            why = f"the budget ({spent}) was spent" if spent else "the operator put them off"
            terminalreporter.write_line(
                f"hud robots: {len(self.unrun)} row(s) not run ({why}): undecided; "
                "rerun them with --hud-resume"
            )

    @pytest.hookimpl
    def pytest_unconfigure(self) -> None:
        if self.operator is not None:
            self.operator.close()


def _apply(result: RolloutResult, score: float, source: str, notes: str) -> None:
    result.score = score
    result.success = score >= 1.0
    result.grade.update(score=score, success=result.success, grade_source=source)
    if notes:
        result.grade["notes"] = notes


def enable(session: HudSession) -> object | None:
    config = session.config
    robot = read_option(config, "hud_robot", str)
    if robot:
        from pytest_hud.interop.lerobot.robots import ROBOT_ENV, RobotSpecError, parse_robot_spec

        try:
            parse_robot_spec(robot)
        except RobotSpecError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.add_cleanup(set_env(ROBOT_ENV, robot))  # env servers started from here on
    spec = read_option(config, "hud_operator", str)
    grader_ref = read_option(config, "hud_grader", str)
    budget_text = read_option(config, "hud_budget", str)
    budget = parse_budget(budget_text) if budget_text else (None, None)
    operator: Operator | None = None
    if spec:
        if is_worker(config) or (config.getoption("numprocesses", None) or 0):
            raise pytest.UsageError(
                "--hud-operator runs one episode at a time in front of one person: drop -n"
            )
        if session.options.concurrency > 1:
            raise pytest.UsageError(
                "--hud-operator runs one episode at a time: drop --hud-concurrency "
                f"(got {session.options.concurrency})"
            )
        if len(session.options.agents) > 1 and config.option.verbose > 0:
            raise pytest.UsageError(
                "--hud-operator with several --hud-agent blinds the arms, but -v prints each "
                "item's arm letter as it runs; drop -v (the report names the arms at the end)"
            )
        operator = _operator(spec)
        if session.options.shared is None:  # one substrate: the robot stays connected
            session.options.shared = 1
    grader: Grader | None = None
    if grader_ref:
        try:
            grader = load_object(grader_ref)
        except (ImportError, AttributeError, ValueError) as exc:
            raise pytest.UsageError(f"--hud-grader {grader_ref!r}: {exc}") from None
    plugin = RobotsPlugin(session, operator, grader, budget)
    window = read_option(config, "hud_override_window", str)
    if window is not None:
        try:
            seconds = float(window)
        except ValueError:
            seconds = float("nan")
        if not (seconds >= 0 or seconds == -1):
            raise pytest.UsageError(
                f"--hud-override-window takes seconds >= 0 (or -1: wait for a key), got {window!r}"
            )
        plugin.window = None if seconds == -1 else seconds
    return plugin
