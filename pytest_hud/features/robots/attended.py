"""The attended session's plugin: the reset gate in front of each item, the episode with its
stop, instructions and early verdict, the verdict, the budget, the fault taxonomy, and what
the run knew put in its rows (features/robots' module doc says what the session is)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import pytest

from pytest_hud._plugin.feature_api import Hud, HudCase, readable_id, settle_setup
from pytest_hud.evaluation.results import Row
from pytest_hud.features.robots.blinding import arm_codes
from pytest_hud.features.robots.faults import Fault, classify
from pytest_hud.features.robots.live import (
    READING,
    REFERENCES,
    STOP_WAIT,
    GateFeed,
    static_view,
)
from pytest_hud.features.robots.observers import Cameras, Clock, Frames, Reference, row_label
from pytest_hud.features.robots.operator import (
    Ask,
    Episode,
    FaultAnswer,
    Gate,
    GateAnswer,
    Operator,
    Summary,
    Verdict,
    check_verdict,
)
from pytest_hud.features.robots.report import budget_left, session_summary
from pytest_hud.robot.agent.timed import INSTRUCTION, STOP
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.rollout import Agent, RolloutResult, rollout
from pytest_hud.runtime.task import Task

__all__ = ["PUT_OFF", "Grader", "RobotsPlugin", "Unrun"]

#: Times a row may be put off (back of the queue) before a further "put off" skips it.
PUT_OFF = 2
#: Times an episode whose link to the policy dropped runs again by itself.
LINK_RETRIES = 1

#: A grader's answer: success or failure, a score in [0, 1], or None (cannot tell).
Grader = Callable[[Mapping[str, object], Mapping[str, object], str], "bool | float | None"]
#: Why a row was not run: budget, put off, quit (the operator's), halted (a robot fault).
Unrun = str


class RobotsPlugin:
    """The attended session's gates, verdicts, graders, budget and faults."""

    def __init__(
        self,
        hud: Hud,
        operator: Operator | None,
        grader: Grader | None,
        budget: tuple[float | None, int | None],
        rubric: Callable[[Task], str],
        window: float | None = 5.0,
    ) -> None:
        self.hud = hud
        self.operator = operator
        self.grader = grader
        self.seconds, self.episodes = budget
        self.rubric = rubric
        #: how long a detector's verdict waits for an override (None: for a key)
        self.window = window
        #: the budget's clock: from the first episode's first frame (connecting is not spent)
        self.clock: float | None = None
        self.run = 0  # episodes started
        self.graded = 0  # episodes graded
        self.reruns = 0  # episodes discarded and run again
        self.planned = 0  # the session's attended items
        self.unrun: dict[str, Unrun] = {}  # node id -> why it was not run
        self.halted: str | None = None  # a fault that ended the session: its message
        self.quit = False
        self.gates: dict[int, Gate] = {}  # id(task) -> the gate passed for it
        self.cases: dict[int, HudCase] = {}  # id(task) -> its case (for a rerun's gate)
        self.answers: dict[str, GateAnswer] = {}  # node id -> its gate's answer, until it runs
        self.put_off: dict[str, int] = {}  # node id -> times put off
        self.facts: dict[int, dict[str, object]] = {}  # id(task) -> what its row gets
        self.frames: dict[int, tuple[dict[str, object], dict[str, object]]] = {}
        #: row -> the first camera frame of its first episode (a PNG): the next gate of the
        #: same row (the other arm's, a rerun) shows it, so the scene is set up alike
        self.references: dict[str, str] = {}
        self.prompts: dict[str, str] = {}  # row (task key) -> the instruction its env gave
        self.episode: Episode | None = None  # the one running
        #: the provider the last rollout ran on: the gate's live camera reads through it
        #: where the session cannot name the item's provider before its fixtures run
        self.provider: Provider | None = None
        arms = hud.arms if operator is not None and len(hud.arms) > 1 else []
        #: blinded arms: letter -> the code the operator sees
        self.codes = arm_codes([a.letter for a in arms], int(hud.options.ab_seed or 0))

    @pytest.hookimpl
    def pytest_hud_blinded(self) -> bool | None:
        """The operator sees arm codes only: nothing may name an arm's agent before the end."""
        return True if self.codes else None

    # -- the budget ------------------------------------------------------------------------
    def _spent(self) -> str | None:
        if self.episodes is not None and self.run >= self.episodes:
            return f"{self.episodes} episodes"
        seconds, clock = self.seconds, self.clock
        if seconds is not None and clock is not None and time.monotonic() - clock >= seconds:
            return f"{seconds:g} s"
        return None

    def _left(self) -> str | None:
        return budget_left(self.seconds, self.episodes, self.clock, self.run)

    def _why_not(self) -> tuple[Unrun, str] | None:
        """Why the next row is not run (the session's own reasons), or None."""
        if self.halted is not None:
            return "halted", f"a robot fault ended the session ({self.halted}): not run"
        if self.quit:
            return "quit", "the operator ended the session: not run (undecided)"
        spent = self._spent()
        if spent is not None and self.run > 0:
            return "budget", f"the budget ({spent}) is spent: not run (undecided)"
        return None

    @pytest.hookimpl
    def pytest_hud_skip_case(self, nodeid: str, case: HudCase) -> str | None:
        why = self._why_not()
        return None if why is None else why[1]

    @pytest.hookimpl
    def pytest_hud_unrun(self, nodeid: str) -> str | None:
        return self.unrun.get(nodeid)

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
        self.planned = sum(1 for item in queue if self.hud.case_of(item) is not None)
        while queue:
            item = queue.popleft()
            answer = self._gate_item(item)
            if answer == "skip" and queue and self.put_off.get(item.nodeid, 0) < PUT_OFF:
                self.put_off[item.nodeid] = self.put_off.get(item.nodeid, 0) + 1
                self.answers.pop(item.nodeid, None)
                queue.append(item)
                continue
            settle_setup(session, item)
            config.hook.pytest_runtest_protocol(item=item, nextitem=queue[0] if queue else None)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        self._show_summary()
        return True

    def _gate_item(self, item: pytest.Item) -> GateAnswer | None:
        """The operator's answer at ``item``'s gate, or None where no gate is shown (not a
        row, or skipped anyway)."""
        case = self.hud.case_of(item)
        if case is None or self.operator is None or item.get_closest_marker("skip"):
            return None
        reasons = item.config.hook.pytest_hud_skip_case(
            config=item.config, nodeid=item.nodeid, case=case
        )
        if reasons is not None:
            return None
        gate = self._gate(case.task, case)
        provider = None
        if callable(getattr(self.operator, "gate_view", None)):  # it shows the cameras live
            provider = self.hud.provider_of(item) or self.provider
        answer = self._ask_gate(gate, case.task, provider)
        self.answers[item.nodeid] = answer
        if answer == "go":
            self.gates[id(case.task)] = gate
            self.cases[id(case.task)] = case
        elif answer == "quit":
            self.quit = True
        return answer

    # -- the gate's camera: live while the gate waits, else its reference image ----------
    def _feed(self, gate: Gate, task: Task, provider: Provider | None) -> GateFeed | None:
        """The live camera for ``gate`` (a console that shows one, a provider to read
        through), or None: then the console is told what it shows instead."""
        show = getattr(self.operator, "gate_view", None)
        if not callable(show):
            return None
        reference = None
        if gate.image:
            reference = REFERENCES["row" if task.args.get("image") else "episode"]
        if provider is None:
            why = "the robot is reached once this session's first episode has run"
            show(static_view(reference, why), None)
            return None
        show(READING, None)  # until the first read: not the last gate's view
        return GateFeed(provider, task, show, reference)

    def _ask_gate(self, gate: Gate, task: Task, provider: Provider | None) -> GateAnswer:
        """The operator's answer at ``gate`` (asked off the rollout loop: from pytest's
        thread, or a rerun's own), the robot's cameras live meanwhile on the rollout loop;
        the feed ends before this returns."""
        assert self.operator is not None
        feed = self._feed(gate, task, provider)
        if feed is None:
            return self.operator.gate(gate)
        running = self.hud.submit(feed.run())
        try:
            return self.operator.gate(gate)
        finally:
            feed.stopped.set()
            with contextlib.suppress(
                concurrent.futures.TimeoutError, concurrent.futures.CancelledError
            ):
                try:
                    running.result(timeout=STOP_WAIT)  # a read in flight ends first
                finally:
                    running.cancel()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        case = self.hud.case_of(item)
        if case is None or self.operator is None:
            return
        answer = self.answers.pop(item.nodeid, None)
        if answer == "quit":
            item.session.shouldstop = "the operator ended the session"
        if answer in ("skip", "quit"):
            self.unrun[item.nodeid] = "put off" if answer == "skip" else "quit"
            said = "put this row off" if answer == "skip" else "ended the session"
            pytest.skip(f"the operator {said}: not run (undecided)")
        why = self._why_not()
        if why is not None:
            self.unrun[item.nodeid] = why[0]
            pytest.skip(why[1])

    def _gate(self, task: Task, case: HudCase | None) -> Gate:
        args = dict(task.args)
        row = row_label(task, readable_id)
        arm = case.arm.letter if case is not None and case.arm is not None else None
        # the row's own reference image, else the first frame its earlier episode saw here
        image = str(args["image"]) if args.get("image") else self.references.get(row)
        told = args.get("task") or args.get("instruction") or args.get("prompt")
        prompt = str(told or self.prompts.get(task.key) or "")
        return Gate(
            row=row,
            setup=str(args.get("setup") or ""),
            prompt=prompt or "the env's (shown once the episode starts)",
            arm=self.codes.get(arm) if arm else None,
            number=self.run + 1,
            image=image,
            rubric=self.rubric(task),
            planned=(self.planned + self.reruns) or None,
            budget=self._left(),
        )

    # -- the episode ----------------------------------------------------------------------
    def _first_frame(self, at: float) -> None:
        if self.clock is None:
            self.clock = at  # the budget counts from here: connecting the robot is not spent

    @pytest.hookimpl
    def pytest_hud_episode_observers(self) -> list[object]:
        found: list[object] = []
        if self.operator is None and self.grader is None:
            return found  # no attended episode: nothing to observe (and nothing to ship)
        if self.grader is not None:
            sink = self.frames
            found.append(lambda run, spaces: Frames(sink, id(run.task) if run is not None else 0))
        tick = getattr(self.operator, "at_step", None)
        found.append(
            lambda run, spaces: Clock(
                self.episode, self._first_frame, getattr(run, "prompt", ""), tick
            )
        )
        if self.operator is not None:
            folder, refs = self.hud.artifacts / "references", self.references
            found.append(lambda run, spaces: self._reference(run, spaces, folder, refs))
        show = getattr(self.operator, "frame", None)
        if callable(show):  # a console that shows the cameras (the web console)
            found.append(lambda run, spaces: Cameras(show, [c.name for c in spaces.cameras]))
        return found

    @staticmethod
    def _reference(run: object, spaces: object, folder: Path, refs: dict[str, str]) -> Reference:
        task = getattr(run, "task", None)
        cameras = getattr(spaces, "cameras", [])
        row = row_label(task, readable_id) if isinstance(task, Task) else None
        return Reference(row, cameras[0].name if cameras else None, folder, refs)

    @pytest.hookimpl
    def pytest_hud_run_rollout(
        self, task: Task, agent: Agent, provider: Provider, index: int, timeout: float | None
    ) -> Awaitable[RolloutResult] | None:
        if self.operator is None and self.grader is None:
            return None
        self.provider = provider
        return self._attended(task, agent, provider, index, timeout)

    async def _episode(
        self,
        task: Task,
        gate: Gate,
        agent: Agent,
        provider: Provider,
        index: int,
        timeout: float | None,
    ) -> tuple[RolloutResult, Episode]:
        """One episode of ``task``: the stop key, the instructions and the timer wired to
        the operator's console while it runs."""
        self.run += 1
        episode = Episode(gate)
        self.episode = episode
        stop, told = STOP.set(episode.stop.is_set), INSTRUCTION.set(episode.current)
        close = self.operator.watch(episode) if self.operator is not None else None
        try:
            result = await rollout(task, agent, provider, index=index, timeout=timeout)
        finally:
            episode.ended = time.monotonic()
            STOP.reset(stop)
            INSTRUCTION.reset(told)
            self.episode = None
            if close is not None:
                await asyncio.to_thread(close)
        return result, episode

    async def _attended(
        self, task: Task, agent: Agent, provider: Provider, index: int, timeout: float | None
    ) -> RolloutResult:
        gate = self.gates.pop(id(task), None) or self._gate(task, self.cases.get(id(task)))
        facts: dict[str, object] = self.facts.setdefault(id(task), {})
        discards: list[dict[str, object]] = []
        retries = 0
        while True:
            result, episode = await self._episode(task, gate, agent, provider, index, timeout)
            if result.error is not None:
                fault = classify(result.error, result.error_type)
                if fault.action == "retry" and retries < LINK_RETRIES:
                    retries += 1
                    continue
                if await self._fault(fault, result, gate) == "retry":
                    gate = self._gate(task, self.cases.get(id(task)))
                    continue
                return self._finish(result, episode, facts, discards)
            if result.prompt:  # the row's next gate (a rerun, the other arm's) shows it
                self.prompts[task.key] = result.prompt
            verdict = await self._grade(task, gate, result, episode)
            if verdict is None or not verdict.discard:
                self.graded += 1
                return self._finish(result, episode, facts, discards)
            discards.append(_discarded(result, episode, verdict))
            self.reruns += 1
            assert self.operator is not None
            gate = self._gate(task, self.cases.get(id(task)))
            # asked on a thread of its own: this loop reads the gate's cameras meanwhile
            answer = await asyncio.to_thread(self._ask_gate, gate, task, provider)
            if answer != "go":
                result.error = "the operator discarded the episode and did not run the row again"
                result.error_type, result.phase = "OperatorDiscard", "grade"
                self.quit = self.quit or answer == "quit"
                return self._finish(result, episode, facts, discards)

    async def _fault(self, fault: Fault, result: RolloutResult, gate: Gate) -> FaultAnswer | None:
        """What the session does about an episode's error (features/robots/faults.py);
        "retry" runs the row again. The row's ``fault`` says what was done."""
        if fault.action == "error" or (fault.action == "retry"):
            result.grade["fault"] = fault.record("reported")
            return None
        answer: FaultAnswer = "quit"
        ask = getattr(self.operator, "fault", None)
        if fault.action == "ask" and callable(ask):
            answer = await asyncio.to_thread(ask, fault.message, gate)
        if answer == "quit":
            self.halted = fault.kind
        taken = {"retry": "ran the row again", "skip": "went on", "quit": "ended the session"}
        result.grade["fault"] = fault.record(taken[answer])
        if result.error is not None and not result.error.startswith(fault.message):
            result.error = f"{fault.message}\n{result.error}"  # the row's first line says it
        return answer

    def _finish(
        self,
        result: RolloutResult,
        episode: Episode,
        facts: dict[str, object],
        discards: list[dict[str, object]],
    ) -> RolloutResult:
        """What the row gets beside the rollout's own fields (pytest_hud_row puts it)."""
        grade = result.grade
        for name in ("robot", "safety", "fault"):
            if grade.get(name) is not None:
                facts[name] = grade[name]
        if discards:
            facts["discards"] = discards
        if episode.started is not None:
            facts["episode_seconds"] = round(episode.elapsed(), 3)
        if episode.instructions:
            facts["instructions"] = [{"step": s, "text": t} for s, t in episode.instructions]
        if episode.gate.rubric:
            facts["rubric"] = episode.gate.rubric
        return result

    async def _grade(
        self, task: Task, gate: Gate, result: RolloutResult, episode: Episode
    ) -> Verdict | None:
        grade = result.grade
        source = grade.get("grade_source")
        stopped = episode.stop.is_set()
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
        if episode.early is not None:  # given while it ran: no question follows
            verdict = episode.early
            result.agent_info["stopped"] = "verdict"
        else:
            ask = Ask(
                gate,
                result.steps,
                detector=detector,
                stopped=stopped,
                accept_after=self.window,
                seconds=episode.elapsed() if episode.started is not None else None,
                instructions=tuple(episode.instructions),
            )
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
        if self.operator is None and self.grader is None:  # unattended: the facts all the same
            for name in ("robot", "safety"):
                if grade.get(name) is not None:
                    self.facts.setdefault(id(result.task), {})[name] = grade[name]

    # -- reports ------------------------------------------------------------------------
    @pytest.hookimpl
    def pytest_hud_row(self, item: pytest.Item, row: Row) -> None:
        case = self.hud.case_of(item)
        if case is None:
            return
        if self.codes and case.arm is not None:
            row["arm_code"] = self.codes[case.arm.letter]
        facts = self.facts.pop(id(case.task), None) or {}
        for name, value in facts.items():
            row[name] = value  # type: ignore[literal-required]
        if self.put_off.get(item.nodeid):
            row["put_off"] = self.put_off[item.nodeid]

    @pytest.hookimpl
    def pytest_hud_results_meta(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.codes:
            arms = {a.letter: a for a in self.hud.arms}
            out["blinding"] = {
                code: {"arm": letter, "spec": arms[letter].spec.text}
                for letter, code in self.codes.items()
            }
        if self.operator is not None or self.seconds or self.episodes:
            out["attended"] = {
                "episodes": self.run,
                "graded": self.graded,
                "budget": self._left(),
                "halted": self.halted,
            }
        return out

    def _show_summary(self) -> None:
        show = getattr(self.operator, "summary", None)
        if callable(show):
            rows = list(self.hud.rows.values())
            show(Summary(session_summary(rows, self.codes, self._left(), self.halted)))

    @pytest.hookimpl
    def pytest_hud_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.codes:
            arms = {a.letter: a for a in self.hud.arms}
            terminalreporter.write_line(
                "hud robots: unblinded: "
                + ", ".join(
                    f"arm {code} = {letter} ({arms[letter].spec.text})"
                    for letter, code in self.codes.items()
                )
            )
        if self.unrun:
            counts: dict[str, int] = {}
            for why in self.unrun.values():
                counts[why] = counts.get(why, 0) + 1
            said = {
                "budget": f"the budget ({self._spent()}) was spent",
                "put off": "the operator put them off",
                "quit": "the operator ended the session",
                "halted": "a robot fault ended the session",
            }
            whys = "; ".join(f"{n} {said.get(why, why)} [{why}]" for why, n in counts.items())
            terminalreporter.write_line(
                f"hud robots: {len(self.unrun)} row(s) not run ({whys}): undecided; "
                "rerun them with --hud-resume"
            )
        if self.halted is not None:
            terminalreporter.write_line(
                f"hud robots: the session ended on a robot fault ({self.halted}); fix the "
                "robot, then rerun with --hud-resume", red=True, bold=True
            )  # fmt: skip

    @pytest.hookimpl
    def pytest_hud_html_sections(self, rows: list[Row]) -> list[str]:
        from pytest_hud.features.robots.report import html_section

        section = html_section(rows)
        return [section] if section else []

    @pytest.hookimpl
    def pytest_unconfigure(self) -> None:
        if self.operator is not None:
            with contextlib.suppress(Exception):
                self.operator.close()


def _discarded(result: RolloutResult, episode: Episode, verdict: Verdict) -> dict[str, object]:
    """A discarded episode as its row keeps it: what ran and what the operator said."""
    out: dict[str, object] = {
        "steps": result.steps,
        "notes": verdict.notes,
        "stopped": episode.stop.is_set(),
        "duration": round(result.duration, 3),
    }
    for name in ("safety", "success"):
        if result.grade.get(name) is not None:
            out[name] = result.grade[name]
    if episode.started is not None:
        out["episode_seconds"] = round(episode.elapsed(), 3)
    return out


def _apply(result: RolloutResult, score: float, source: str, notes: str) -> None:
    result.score = score
    result.success = score >= 1.0
    result.grade.update(score=score, success=result.success, grade_source=source)
    if notes:
        result.grade["notes"] = notes
