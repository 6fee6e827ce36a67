"""Scripted operators for the attended-evaluation tests (--hud-operator=operators:scripted).

The script comes from $OPERATOR_SCRIPT (JSON): ``gates`` (answers in turn: go, skip, quit),
``stop_after`` (episode numbers to stop at once), ``verdicts`` (in turn: a score, "discard",
"detector" to take the env's verdict, {"score": S, "notes": "..."}, or {"discard": true,
"notes": "..."}), ``during`` (what the operator does while an episode runs: {"episode": N,
"at": STEP, "instruct": TEXT} or {"episode": N, "at": STEP, "verdict": S, "notes": "..."}),
``faults`` (answers to robot faults in turn: retry, skip, quit). Everything the
operator was shown is written to $OPERATOR_SHOWN at the end, one line each."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from pytest_hud.features.robots.operator import Ask, Episode, ScriptedOperator, Verdict


def scripted() -> ScriptedOperator:
    script = json.loads(os.environ.get("OPERATOR_SCRIPT") or "{}")
    verdicts = list(script.get("verdicts", []))

    def grade(ask: Ask) -> Verdict:
        step = verdicts.pop(0) if verdicts else "detector"
        if step == "discard":
            return Verdict(None, discard=True)
        if step == "detector":
            return Verdict(1.0 if ask.detector else 0.0)
        if isinstance(step, dict) and step.get("discard"):
            return Verdict(None, step.get("notes", ""), discard=True)
        if isinstance(step, dict):
            return Verdict(float(step["score"]), step.get("notes", ""))
        return Verdict(float(step))

    during = {(d["episode"], d["at"]): _during(d) for d in script.get("during", [])}
    operator = ScriptedOperator(
        script.get("gates", []),
        grade,
        script.get("stop_after", []),
        during=during,
        faults=script.get("faults", []),
    )
    return dumping(operator)


def _during(step: dict) -> Callable[[Episode], None]:
    """What the operator does at an episode's step: ``instruct`` a text, or give the
    ``verdict`` (a score, with ``notes``) at once."""
    if "instruct" in step:
        return lambda episode: episode.instruct(step["instruct"])
    verdict = Verdict(float(step["verdict"]), step.get("notes", ""))
    return lambda episode: episode.grade_now(verdict)


def dumping(operator: ScriptedOperator) -> ScriptedOperator:
    """``operator``, writing what it was shown to $OPERATOR_SHOWN as it goes (a session
    killed mid-way keeps what was shown until then)."""
    gate, verdict = operator.gate, operator.verdict

    def dump() -> None:
        out = os.environ.get("OPERATOR_SHOWN")
        if out:
            Path(out).write_text("\n".join(operator.shown) + "\n")

    def gate_and_dump(g):  # type: ignore[no-untyped-def]
        try:
            return gate(g)
        finally:
            dump()

    def verdict_and_dump(ask):  # type: ignore[no-untyped-def]
        try:
            return verdict(ask)
        finally:
            dump()

    def summary_and_dump(summary):  # type: ignore[no-untyped-def]
        try:
            return summarize(summary)
        finally:
            dump()

    summarize = operator.summary
    operator.gate = gate_and_dump  # type: ignore[method-assign]
    operator.verdict = verdict_and_dump  # type: ignore[method-assign]
    operator.summary = summary_and_dump  # type: ignore[method-assign]
    return operator


def from_robot_log() -> ScriptedOperator:
    """Grades each episode from the physics SO-101's state when it came to rest (the last
    ``stop reached=...`` line of $SO101_LOG): what a person at the arm would see."""

    def grade(ask: Ask) -> Verdict:
        lines = Path(os.environ["SO101_LOG"]).read_text().split("\n")
        stops = [line for line in lines if line.startswith("stop ")]
        return Verdict(1.0 if stops and stops[-1].endswith("True") else 0.0, "from the arm")

    return dumping(ScriptedOperator(grade=grade))
