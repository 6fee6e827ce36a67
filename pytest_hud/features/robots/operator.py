"""The operator of an attended evaluation: one protocol, three implementations (the terminal
console, the local web console, a scripted operator for tests and CI). Pure logic: no
pytest here.

Per episode the operator passes the reset gate (positions the scene from the row's
set-up text and rubric, then says go), watches it run (may stop it, give the verdict at
once, or type an instruction the policy gets at its next inference), and gives the
verdict: success, failure, a partial score, or discard (the episode is thrown away and
the row run again). The operator sees arm codes only ("arm K"), never an agent's name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = [
    "MAX_INSTRUCTION",
    "Ask",
    "Episode",
    "FaultAnswer",
    "Gate",
    "GateAnswer",
    "GateCameraKind",
    "GateView",
    "Operator",
    "ScriptedOperator",
    "Summary",
    "Verdict",
    "check_verdict",
    "partial_score",
]

GateAnswer = Literal["go", "skip", "quit"]
#: What the operator says to a robot fault that asks: run the row again (fixed), leave it
#: undecided and go on, or end the session.
FaultAnswer = Literal["retry", "skip", "quit"]
#: The longest instruction an operator may send the policy.
MAX_INSTRUCTION = 500


@dataclass(frozen=True)
class Gate:
    """What the operator is shown before an episode: the row (as its test id names it), the
    instruction the policy gets, the set-up and rubric, the arm's code (None with one
    agent), a reference image where one was recorded, and the session's progress."""

    row: str
    setup: str
    prompt: str
    arm: str | None = None
    number: int = 1  # the session's episode count, this one included
    image: str | None = None
    rubric: str = ""
    planned: int | None = None  # the episodes the session plans (its rows)
    budget: str | None = None  # what the budget has left, in words

    def title(self) -> str:
        of = f" of {self.planned}" if self.planned else ""
        arm = f" · arm {self.arm}" if self.arm else ""
        return f"episode {self.number}{of} · {self.row}{arm}"

    def lines(self) -> list[str]:
        out = [self.title(), f"instruction: {self.prompt}"]
        if self.setup:
            out.append(f"set up: {self.setup}")
        if self.rubric:
            out.append(f"rubric: {self.rubric}")
        if self.image:
            out.append(f"reference image: {self.image}")
        if self.budget:
            out.append(f"budget: {self.budget}")
        return out


#: What the gate shows of the scene: the robot's cameras now, a reference image, nothing (the
#: robot has no camera, or neither can be had), or not known yet (the first read is on its way).
GateCameraKind = Literal["live", "reference", "none", "reading"]


@dataclass(frozen=True)
class GateView:
    """What the gate's camera area shows and the line that says so: ``live`` (frames the
    robot's cameras give now, while no episode holds it), ``reference`` (the gate's image:
    the row's own, or the first frame an earlier episode of the row saw), ``none``."""

    kind: GateCameraKind
    said: str


@dataclass
class Episode:
    """A running episode as a console shows it and acts on it: ``stop`` is set by the stop
    key, ``started`` by the episode's first frame (the timer starts there, not at the
    robot's connect), ``steps`` counts its ticks; :meth:`instruct` sends the policy a new
    instruction, :meth:`grade_now` gives the verdict at once (and ends the episode)."""

    gate: Gate
    stop: threading.Event = field(default_factory=threading.Event)
    started: float | None = None
    ended: float | None = None
    steps: int = 0
    #: the operator's instruction the policy gets now ("" until one is sent: the row's own)
    prompt: str = ""
    #: the instruction the env gave the policy (known from the episode's first frame)
    given: str = ""
    #: every instruction the operator sent: the step it took effect at and its text
    instructions: list[tuple[int, str]] = field(default_factory=list)
    early: Verdict | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def elapsed(self) -> float:
        """Seconds from the first frame to the end, or to now while it runs (0 before)."""
        if self.started is None:
            return 0.0
        return max(0.0, (time.monotonic() if self.ended is None else self.ended) - self.started)

    def instruct(self, text: str) -> str:
        """The policy gets ``text`` from its next inference on; what was sent."""
        sent = " ".join(text.split())[:MAX_INSTRUCTION]
        if not sent:
            raise ValueError("an instruction is some text")
        with self._lock:
            self.prompt = sent
            self.instructions.append((self.steps, sent))
        return sent

    def current(self) -> str:
        """The operator's latest instruction ("" for none)."""
        with self._lock:
            return self.prompt

    def told(self) -> str:
        """What the policy is told now: the operator's latest instruction, else the env's."""
        with self._lock:
            return self.prompt or self.given

    def grade_now(self, verdict: Verdict) -> None:
        """The operator's verdict during the episode: it ends at its next tick and no
        verdict question follows."""
        check_verdict(verdict)
        self.early = verdict
        self.stop.set()


@dataclass(frozen=True)
class Ask:
    """What the operator is asked after an episode: the gate it ran from (its row, set-up
    and rubric stay on screen), the env's detector verdict (None: it has none, or it could
    not tell), why the episode ended, the steps run and its seconds from the first frame."""

    gate: Gate
    steps: int | None
    detector: bool | None = None
    stopped: bool = False
    #: with a detector: its verdict stands unless the operator overrides (or holds it)
    #: within this many seconds (a console accepts it by itself then; None waits)
    accept_after: float | None = None
    seconds: float | None = None
    instructions: tuple[tuple[int, str], ...] = ()

    def lines(self) -> list[str]:
        ended = "stopped by you" if self.stopped else "ended"
        took = f" ({self.seconds:.1f} s)" if self.seconds is not None else ""
        out = [f"episode {self.gate.number} {ended} after {self.steps} steps{took}"]
        if self.gate.setup:
            out.append(f"set up: {self.gate.setup}")
        if self.gate.rubric:
            out.append(f"rubric: {self.gate.rubric}")
        for step, text in self.instructions:
            out.append(f"you told the policy at step {step}: {text}")
        if self.detector is not None:
            out.append(f"the env's detector says: {'success' if self.detector else 'failure'}")
        return out

    def accepted(self, notes: str = "") -> Verdict:
        """The detector's verdict, taken as the grade (with the notes typed meanwhile)."""
        return Verdict(1.0 if self.detector else 0.0, notes)


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


def partial_score(text: str) -> float | None:
    """The partial score an operator typed (on either console): a number in [0, 1], else None
    (not a number, out of range, NaN)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None


def check_verdict(verdict: Verdict) -> Verdict:
    if not verdict.discard and (verdict.score is None or not 0.0 <= verdict.score <= 1.0):
        raise ValueError(f"a verdict's score is between 0 and 1, got {verdict.score!r}")
    return verdict


@dataclass(frozen=True)
class Summary:
    """The end of the session, as the operator's console shows it: one line per count
    and the rows left undecided (blinded: arm codes only)."""

    lines: Sequence[str]


class Operator(Protocol):
    """A person (or a script) at the robot. Every method blocks until answered; the
    plugin calls them off its event loop. A console may also have ``frame(images)`` (the
    cameras), ``gate_view(view, frames)`` (the gate's live cameras, see GateView),
    ``fault(message, gate) -> FaultAnswer`` and ``summary(summary)``; without
    them a fault that asks ends the session and no summary is shown."""

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
    else failure); ``stop_after`` stops the n-th episode (1-based) at once; ``during`` maps
    (episode number, step) to what the operator does then (send an instruction, grade at
    once), done on the loop at that step (:meth:`at_step`), so a script is deterministic;
    ``faults`` answers robot faults in turn ("skip" when run out). Keeps everything it was
    shown in ``shown``."""

    def __init__(
        self,
        gates: Sequence[GateAnswer] = (),
        grade: Callable[[Ask], Verdict] | None = None,
        stop_after: Sequence[int] = (),
        during: dict[tuple[int, int], Callable[[Episode], None]] | None = None,
        faults: Sequence[FaultAnswer] = (),
    ) -> None:
        self.gates = list(gates)
        self.grade = grade
        self.stop_after = set(stop_after)
        self.during = dict(during or {})
        self.faults = list(faults)
        self.shown: list[str] = []
        self.closed = False

    def gate(self, gate: Gate) -> GateAnswer:
        self.shown.extend(gate.lines())
        return self.gates.pop(0) if self.gates else "go"

    def watch(self, episode: Episode) -> Callable[[], None]:
        if episode.gate.number in self.stop_after:
            episode.stop.set()  # the loop sees it at its next tick
        return lambda: None

    def at_step(self, episode: Episode) -> None:
        """Called on the loop at each of ``episode``'s ticks: what the script does then."""
        act = self.during.get((episode.gate.number, episode.steps))
        if act is not None:
            act(episode)

    def verdict(self, ask: Ask) -> Verdict:
        self.shown.extend(ask.lines())
        if self.grade is not None:
            return self.grade(ask)
        return Verdict(1.0 if ask.detector else 0.0)

    def fault(self, message: str, gate: Gate) -> FaultAnswer:
        self.shown.append(f"robot fault: {message}")
        return self.faults.pop(0) if self.faults else "skip"

    def summary(self, summary: Summary) -> None:
        self.shown.extend(summary.lines)

    def close(self) -> None:
        self.closed = True
