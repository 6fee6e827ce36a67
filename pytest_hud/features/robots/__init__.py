"""Attended evaluation: an operator at the robot (``--hud-operator``) passes a reset gate
before each episode, may stop it, send the policy an instruction or give the verdict while it
runs, and grades it; a user's grader (``--hud-grader``, a success classifier or a VLM judge)
grades from the first and last observations; a budget (``--hud-budget``) stops scheduling new
episodes; a robot fault halts the session, asks the operator or retries (``faults.py``).
Every grade is recorded with its source (operator, detector, grader), the operator's notes,
the rubric, the safety counts and the discarded episodes; every row not run says why.

An env's definitive success (its detector) is taken as the grade and shown to the operator,
who may override it. One robot is one slot: an attended session runs one episode at a time.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_hud._plugin.feature_api import FeatureSettings, Hud, HudOptions, option
from pytest_hud.features.robots.attended import PUT_OFF, Grader, RobotsPlugin
from pytest_hud.features.robots.operator import Operator, ScriptedOperator
from pytest_hud.plumbing.loader import load_object
from pytest_hud.plumbing.process import set_env
from pytest_hud.runtime.task import Task

__all__ = [
    "PUT_OFF",
    "RobotsPlugin",
    "ScriptedOperator",
    "Settings",
    "configure",
    "enable",
    "parse_budget",
    "parse_rubric",
]


def parse_budget(text: str) -> tuple[float | None, int | None]:
    """``--hud-budget``: (seconds, None) for a duration, (None, episodes) for a count."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*", text)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(
            f"--hud-budget takes a duration (90s, 45m, 2h) or a number of episodes, got {text!r}"
        )
    value, unit = float(match.group(1)), match.group(2)
    if unit is None:
        if not value.is_integer():
            raise ValueError(f"--hud-budget: {text!r} episodes is not a whole number")
        return None, int(value)
    return value * {"s": 1, "m": 60, "h": 3600}[unit], None


def _window(text: str) -> float:
    """``--hud-override-window``: seconds (-1: wait for a key)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not (seconds >= 0 or seconds == -1):
        raise ValueError(f"takes seconds >= 0 (or -1: wait for a key), got {text!r}")
    return seconds


def _robot(text: str) -> str:
    from pytest_hud.interop.lerobot.robots import RobotSpecError, parse_robot_spec

    try:
        parse_robot_spec(text)
    except RobotSpecError as exc:
        raise ValueError(str(exc)) from None
    return text


def parse_rubric(text: str) -> Callable[[Task], str]:
    """``--hud-rubric``: TEXT for every row, ``@FILE`` for a file's text, or ``@FILE.json``
    mapping ``env`` or ``env/template`` to its rubric. A row's own ``rubric`` arg (or
    metadata) comes first."""
    table: dict[str, str] = {}
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            body = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read {path} ({exc}); fix: name a readable file") from None
        if path.suffix == ".json":
            try:
                loaded = json.loads(body)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: expected a JSON object, got {exc}") from None
            if not isinstance(loaded, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()
            ):
                raise ValueError(
                    f"{path}: expected an object of env or env/template to rubric text"
                )
            table = loaded
        else:
            table = {"*": body.strip()}
    else:
        table = {"*": text.strip()}
    return lambda task: _rubric_of(task, table)


def _rubric_of(task: Task, table: dict[str, str]) -> str:
    own = task.args.get("rubric") or task.metadata.get("rubric")
    if isinstance(own, str) and own.strip():
        return " ".join(own.split())
    found = table.get(f"{task.env}/{task.id}") or table.get(task.env) or table.get("*") or ""
    return " ".join(found.split())


class Settings(FeatureSettings):
    operator: str | None = option(
        "--hud-operator",
        "an operator at the robot grades each episode: terminal (this terminal's keys), web (a "
        "console on 127.0.0.1 with the cameras; its url is printed), or MODULE:NAME, a factory "
        "of an Operator (a scripted one for CI); with it, a reset gate "
        "before each episode, a stop key while it runs, and a verdict after",
        metavar="WHO",
    )
    grader: str | None = option(
        "--hud-grader",
        "MODULE:NAME, a callable (first, last, prompt) -> bool | score in [0,1] | None that "
        "grades an episode from its first and last observations (a success classifier, a "
        "VLM judge); None leaves the grade to the env or the operator",
        metavar="REF",
    )
    override_window: float = option(
        "--hud-override-window",
        "seconds the operator has to override an env detector's verdict before it stands "
        "(default 5; 0 takes it at once, -1 waits for a key)",
        default=5.0,
        metavar="SECONDS",
        parse=_window,
    )
    robot: str | None = option(
        "--hud-robot",
        "the robot that env modules' env.lerobot_robot(...) serve: TYPE[:key=value,...] (e.g. "
        "so101_follower:port=/dev/ttyACM0,id=left_arm), its fields over the module's: the same "
        "suite on another arm without editing it",
        metavar="SPEC",
        parse=_robot,
    )
    budget: tuple[float | None, int | None] = option(
        "--hud-budget",
        "stop scheduling new episodes after DURATION (90s, 45m, 2h: its clock starts at the "
        "first episode's first frame, so connecting the robot is not spent) or N episodes; "
        "the rows not run are reported undecided (rerun them with --hud-resume)",
        default=(None, None),
        metavar="LIMIT",
        parse=parse_budget,
    )
    rubric: Callable[[Task], str] | None = option(
        "--hud-rubric",
        "what the operator grades against, shown at the gate and the verdict: TEXT, @FILE, "
        "or @FILE.json mapping env or env/template to its rubric; a row's own rubric arg "
        "comes first",
        metavar="RUBRIC",
        parse=parse_rubric,
    )


def configure(settings: Settings, options: HudOptions) -> HudOptions:
    """An operator runs one episode at a time on one robot that stays connected: one
    substrate (``--hud-shared=1``) unless one is given; what cannot be combined with it is
    one usage error naming the fix."""
    if settings.operator is None:
        return options
    if options.concurrency > 1:
        raise pytest.UsageError(
            "--hud-operator runs one episode at a time: drop --hud-concurrency "
            f"(got {options.concurrency})"
        )
    if options.shared is None:
        return dataclasses.replace(options, shared=1)
    return options


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


def enable(settings: Settings, hud: Hud) -> RobotsPlugin:
    """The attended session's plugin (registered in every run: a robot without a detector
    and without an operator is an error naming the fix)."""
    config = hud.config
    if settings.robot:
        from pytest_hud.interop.lerobot.robots import ROBOT_ENV

        config.add_cleanup(set_env(ROBOT_ENV, settings.robot))  # env servers started from here
    operator: Operator | None = None
    if settings.operator:
        if hud.distributed or (config.getoption("numprocesses", None) or 0):
            raise pytest.UsageError(
                "--hud-operator runs one episode at a time in front of one person: drop -n"
            )
        if len(hud.options.agents) > 1 and config.option.verbose > 0:
            raise pytest.UsageError(
                "--hud-operator with several --hud-agent blinds the arms, but -v prints each "
                "item's arm letter as it runs; drop -v (the report names the arms at the end)"
            )
        operator = _operator(settings.operator)
    grader: Grader | None = None
    if settings.grader:
        try:
            grader = load_object(settings.grader)
        except (ImportError, AttributeError, ValueError) as exc:
            raise pytest.UsageError(f"--hud-grader {settings.grader!r}: {exc}") from None
    window = None if settings.override_window == -1 else settings.override_window
    rubric = settings.rubric or (lambda task: _rubric_of(task, {}))
    return RobotsPlugin(hud, operator, grader, settings.budget, rubric, window)
