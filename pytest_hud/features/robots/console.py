"""The terminal console: the operator's keys on the controlling terminal (``/dev/tty``, so
pytest's output capture does not swallow them). The reset gate waits for Enter; while an
episode runs a footer shows the timer (from its first frame) and the keys: stop, grade now, or
tell the policy something; the verdict is one key (and a score for partial credit) and a notes
line. A detector's verdict counts down and stands unless a key answers or holds it: typing a
note holds it, and the note is kept. The session ends on a summary.
"""

from __future__ import annotations

import contextlib
import os
import select
import termios
import threading
import time
import tty
from collections.abc import Callable, Iterator
from typing import IO

from pytest_hud.features.robots.operator import (
    Ask,
    Episode,
    FaultAnswer,
    Gate,
    GateAnswer,
    Summary,
    Verdict,
    partial_score,
)
from pytest_hud.plumbing.printable import printable

__all__ = ["TerminalOperator"]

#: The keys, as the console prints them.
GATE_KEYS = "Enter: start · s: put this row off · q: end the session"
STOP_KEYS = "x or space: stop · y / n / p: grade now · i: tell the policy"
VERDICT_KEYS = "y: success · n: failure · p: partial score · r: discard and rerun"
FAULT_KEYS = "r: run the row again · s: leave it undecided · q: end the session"


class TerminalOperator:
    """An operator at this terminal. Opens ``tty`` (default the controlling terminal); an
    error naming the fix when there is none (a CI job: use a scripted operator)."""

    def __init__(self, tty_path: str = "/dev/tty") -> None:
        try:
            self._in = os.open(tty_path, os.O_RDONLY | os.O_NOCTTY)
        except OSError as exc:
            raise RuntimeError(
                f"--hud-operator=terminal needs a terminal, but {tty_path} cannot be opened "
                f"({exc.strerror}); fix: run pytest in a terminal, or use --hud-operator=web, "
                "or a scripted operator (--hud-operator=MODULE:NAME) in CI"
            ) from None
        self._out: IO[str] = open(tty_path, "w", buffering=1)  # noqa: SIM115 (closed in close)
        self._lock = threading.Lock()

    # -- terminal plumbing ---------------------------------------------------------------
    def _say(self, text: str) -> None:
        with self._lock:
            self._out.write(text)
            self._out.flush()

    @contextlib.contextmanager
    def _keys(self) -> Iterator[None]:
        """One key at a time, no echo; Ctrl-C still interrupts the session."""
        saved = termios.tcgetattr(self._in)
        try:
            tty.setcbreak(self._in)
            yield
        finally:
            termios.tcsetattr(self._in, termios.TCSADRAIN, saved)

    def _key(self, timeout: float | None = None) -> str | None:
        ready, _, _ = select.select([self._in], [], [], timeout)
        if not ready:
            return None
        data = os.read(self._in, 1)
        if not data:
            raise EOFError("the operator's terminal closed")
        return data.decode(errors="replace")

    def _line(self, prompt: str, start: str = "") -> str:
        """A line typed with echo (cbreak is on: echoed by hand, backspace taken)."""
        self._say(prompt + start)
        chars: list[str] = list(start)
        while True:
            key = self._key()
            if key in ("\n", "\r", None):
                self._say("\n")
                return "".join(chars).strip()
            if key in ("\x7f", "\b"):
                if chars:
                    chars.pop()
                    self._say("\b \b")
                continue
            if key.isprintable():
                chars.append(key)
                self._say(key)

    # -- the protocol --------------------------------------------------------------------
    def gate(self, gate: Gate) -> GateAnswer:
        lines = [printable(line) for line in gate.lines()]  # a row's text, never escapes
        self._say("\n" + "\n".join(f"  {line}" for line in _box(lines)) + "\n")
        self._say(f"  position the scene, then press Enter   [{GATE_KEYS}]\n")
        with self._keys():
            while True:
                key = self._key()
                if key in ("\n", "\r"):
                    return "go"
                if key in ("s", "S"):
                    self._say("  put off\n")
                    return "skip"
                if key in ("q", "Q"):
                    self._say("  ending the session\n")
                    return "quit"

    def watch(self, episode: Episode) -> Callable[[], None]:
        done = threading.Event()

        def footer() -> None:
            with self._keys():
                while not done.is_set():
                    state = "stopping" if episode.stop.is_set() else "running"
                    timer = _clock(episode.elapsed()) if episode.started else "connecting…"
                    self._say(f"\r  ● {state} {timer}   [{STOP_KEYS}] ")
                    key = self._key(0.1)
                    if key in ("x", "X", " "):
                        episode.stop.set()
                    elif key in ("y", "Y", "n", "N") and not episode.stop.is_set():
                        score = 1.0 if key in ("y", "Y") else 0.0
                        self._say(f"\n  graded {score:g} now: the episode ends\n")
                        episode.grade_now(Verdict(score))
                    elif key in ("p", "P") and not episode.stop.is_set():
                        self._say("\n")
                        score = self._partial()
                        self._say(f"  graded {score:g} now: the episode ends\n")
                        episode.grade_now(Verdict(score))
                    elif key in ("i", "I"):
                        self._instruct(episode)
            self._say("\n")

        thread = threading.Thread(target=footer, name="pytest-hud-console", daemon=True)
        thread.start()

        def close() -> None:
            done.set()
            thread.join(timeout=5)

        return close

    def _instruct(self, episode: Episode) -> None:
        self._say("\n")
        text = self._line("  tell the policy (Enter sends, empty: nothing): ")
        if not text:
            return
        sent = episode.instruct(text)
        self._say(f"  [sent at step {episode.steps}] {printable(sent)}\n")

    def verdict(self, ask: Ask) -> Verdict:
        self._say("\n".join(f"  {printable(line)}" for line in ask.lines()) + "\n")
        accept = ""
        if ask.detector is not None:
            accept = f" · Enter: accept the detector's {'success' if ask.detector else 'failure'}"
        keys = f"{VERDICT_KEYS}{accept}"
        with self._keys():
            notes: str | None = None
            key: str | None = None
            if ask.detector is not None and ask.accept_after is not None:
                key = self._countdown(ask.accept_after, keys)
                if key is None:  # the window passed: the detector's verdict stands
                    self._say("  graded by the detector\n")
                    return ask.accepted()
                if key in ("h", "H") or (key.isprintable() and key not in "yYnNpPrR"):
                    start = "" if key in ("h", "H") else key  # a note begun: held, kept
                    notes = self._line("  held; notes (Enter ends them): ", start)
                    key = None
            else:
                self._say(f"  verdict?   [{keys}]\n")
            score: float | None = None
            while score is None:
                if key is None:
                    if notes is not None:
                        self._say(f"  verdict?   [{keys}]\n")
                    key = self._key()
                if key in ("\n", "\r") and ask.detector is not None:
                    score = 1.0 if ask.detector else 0.0
                elif key in ("y", "Y"):
                    score = 1.0
                elif key in ("n", "N"):
                    score = 0.0
                elif key in ("r", "R"):
                    self._say("  discarded: the row runs again\n")
                    return Verdict(None, notes or "", discard=True)
                elif key in ("p", "P"):
                    score = self._partial()
                key = None
            self._say(f"  graded {score:g}\n")
            if notes is None:
                notes = self._line("  notes (Enter for none): ")
        return Verdict(score, notes)

    def _countdown(self, seconds: float, keys: str) -> str | None:
        """Count the detector's window down on one line; the first key pressed, or None
        when it passed."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._say("\n")
                return None
            self._say(f"\r  the detector's verdict stands in {left:4.1f} s: h holds it   [{keys}] ")
            key = self._key(min(0.1, left))
            if key is not None:
                self._say("\n")
                return key

    def _partial(self) -> float:
        while True:
            text = self._line("  partial score between 0 and 1: ")
            value = partial_score(text)
            if value is not None:
                return value
            self._say(f"  {printable(text)!r} is not a number between 0 and 1\n")

    def fault(self, message: str, gate: Gate) -> FaultAnswer:
        self._say(f"\n  robot fault: {printable(message)}\n")
        self._say(f"  look at the robot, then   [{FAULT_KEYS}]\n")
        answers: dict[str, FaultAnswer] = {"r": "retry", "s": "skip", "q": "quit"}
        with self._keys():
            while True:
                key = (self._key() or "").lower()
                if key in answers:
                    return answers[key]

    def summary(self, summary: Summary) -> None:
        lines = [printable(line) for line in summary.lines]
        self._say("\n" + "\n".join(f"  {line}" for line in _box(lines)) + "\n")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._in)
        with contextlib.suppress(OSError):
            self._out.close()


def _box(lines: list[str]) -> list[str]:
    width = max(len(line) for line in lines)
    rule = "─" * (width + 2)
    return [f"┌{rule}┐", *(f"│ {line.ljust(width)} │" for line in lines), f"└{rule}┘"]


def _clock(seconds: float) -> str:
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes):02d}:{rest:04.1f}"
