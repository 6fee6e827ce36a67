"""The operator of an attended evaluation: one protocol, three implementations (the terminal
console, the local web console, a scripted operator for tests and CI). Pure logic: no
pytest here.

Per episode the operator passes the reset gate (positions the scene from the row's
initial-condition text, then says go), may stop the episode while it runs, and gives the
verdict: success, failure, a partial score, or discard (the episode is thrown away and
the row run again). The operator sees arm codes only ("arm K"), never an agent's name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = [
    "Ask",
    "Episode",
    "Gate",
    "GateAnswer",
    "Operator",
    "ScriptedOperator",
    "Verdict",
    "check_verdict",
]

GateAnswer = Literal["go", "skip", "quit"]


@dataclass(frozen=True)
class Gate:
    """What the operator is shown before an episode: which row, its initial condition, the
    arm's code (None with one agent), a reference image where one was recorded."""

    row: str
    setup: str
    prompt: str
    arm: str | None = None
    number: int = 1  # the session's episode count, this one included
    image: str | None = None

    def lines(self) -> list[str]:
        arm = f" · arm {self.arm}" if self.arm else ""
        out = [f"episode {self.number} · {self.row}{arm}", f"task: {self.prompt}"]
        if self.setup:
            out.append(f"set up: {self.setup}")
        if self.image:
            out.append(f"reference image: {self.image}")
        return out


@dataclass
class Episode:
    """A running episode as a console shows it; ``stop`` is set by the operator's stop key."""

    gate: Gate
    stop: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Ask:
    """What the operator is asked after an episode: the env's detector verdict (None: it has
    none, or it could not tell), why the episode ended, the steps run."""

    gate: Gate
    steps: int | None
    detector: bool | None = None
    stopped: bool = False
    #: with a detector: its verdict stands unless the operator overrides it within this many
    #: seconds (a console accepts it by itself then; None waits for the operator)
    accept_after: float | None = None

    def lines(self) -> list[str]:
        ended = "stopped by you" if self.stopped else "ended"
        out = [f"episode {self.gate.number} {ended} after {self.steps} steps"]
        if self.detector is not None:
            out.append(f"the env's detector says: {'success' if self.detector else 'failure'}")
        return out

    def accepted(self) -> Verdict:
        """The detector's verdict, taken as the grade."""
        return Verdict(1.0 if self.detector else 0.0)


@dataclass(frozen=True)
class Verdict:
    """The grade: ``score`` in [0, 1] (1 success, 0 failure, between: partial credit), or
    ``discard`` (thrown away, the row runs again); ``notes`` a free line."""

    score: float | None
    notes: str = ""
    discard: bool = False

    @property
    def success(self) -> bool | None:
        return None if self.score is None else self.score >= 1.0


def check_verdict(verdict: Verdict) -> Verdict:
    if not verdict.discard and (verdict.score is None or not 0.0 <= verdict.score <= 1.0):
        raise ValueError(f"a verdict's score is between 0 and 1, got {verdict.score!r}")
    return verdict


class Operator(Protocol):
    """A person (or a script) at the robot. Every method blocks until answered; the
    plugin calls them off its event loop."""

    def gate(self, gate: Gate) -> GateAnswer:
        """Position the scene for ``gate``; "go" to run, "skip" to put the row off, "quit"
        to end the session."""
        ...

    def watch(self, episode: Episode) -> Callable[[], None]:
        """Show the running episode (a timer, the stop key); returns what ends the display."""
        ...

    def verdict(self, ask: Ask) -> Verdict:
        """Grade the episode just run (where ``ask.accept_after`` is set, return
        ``ask.accepted()`` when the operator does not override within it)."""
        ...

    def close(self) -> None:
        """The session ended."""
        ...


class ScriptedOperator:
    """An operator for tests and CI: ``gates`` answers the reset gates in turn ("go" when
    run out); ``grade(ask) -> Verdict`` grades (default: take the detector's verdict,
    else failure); ``stop_after`` stops the n-th episode (1-based) once it has run for
    ``stop_ticks`` ticks of its display. Keeps everything it was shown in ``shown``."""

    def __init__(
        self,
        gates: Sequence[GateAnswer] = (),
        grade: Callable[[Ask], Verdict] | None = None,
        stop_after: Sequence[int] = (),
    ) -> None:
        self.gates = list(gates)
        self.grade = grade
        self.stop_after = set(stop_after)
        self.shown: list[str] = []
        self.closed = False

    def gate(self, gate: Gate) -> GateAnswer:
        self.shown.extend(gate.lines())
        return self.gates.pop(0) if self.gates else "go"

    def watch(self, episode: Episode) -> Callable[[], None]:
        if episode.gate.number in self.stop_after:
            episode.stop.set()  # the loop sees it at its next tick
        return lambda: None

    def verdict(self, ask: Ask) -> Verdict:
        self.shown.extend(ask.lines())
        if self.grade is not None:
            return self.grade(ask)
        return Verdict(1.0 if ask.detector else 0.0)

    def close(self) -> None:
        self.closed = True
