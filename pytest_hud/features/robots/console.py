"""The terminal console: the operator's keys on the controlling terminal (``/dev/tty``, so
pytest's output capture does not swallow them). The reset gate waits for Enter; while an
episode runs a footer shows the timer and the stop key; the verdict is one key (and a
score for partial credit) and a notes line.
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

from pytest_hud.features.robots.operator import Ask, Episode, Gate, GateAnswer, Verdict
from pytest_hud.plumbing.printable import printable

__all__ = ["TerminalOperator"]

#: The keys, as the console prints them.
GATE_KEYS = "Enter: start · s: put this row off · q: end the session"
STOP_KEYS = "x or space: stop the episode (the robot holds still)"
VERDICT_KEYS = "y: success · n: failure · p: partial score · r: discard and rerun"


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

    def _line(self, prompt: str) -> str:
        self._say(prompt)
        chars: list[str] = []
        while True:  # cbreak is on: echo by hand, take backspace
            key = self._key()
            if key in ("\n", "\r", None):
                self._say("\n")
                return "".join(chars).strip()
            if key in ("\x7f", "\b"):
                if chars:
                    chars.pop()
                    self._say("\b \b")
                continue
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
        start = time.monotonic()

        def footer() -> None:
            with self._keys():
                while not done.is_set():
                    elapsed = time.monotonic() - start
                    state = "stopping" if episode.stop.is_set() else "running"
                    self._say(f"\r  ● {state} {_clock(elapsed)}   [{STOP_KEYS}] ")
                    key = self._key(0.1)
                    if key in ("x", "X", " "):
                        episode.stop.set()
            self._say("\n")

        thread = threading.Thread(target=footer, name="pytest-hud-console", daemon=True)
        thread.start()

        def close() -> None:
            done.set()
            thread.join(timeout=5)

        return close

    def verdict(self, ask: Ask) -> Verdict:
        self._say("\n".join(f"  {printable(line)}" for line in ask.lines()) + "\n")
        accept = ""
        if ask.detector is not None:
            accept = f" · Enter: accept the detector's {'success' if ask.detector else 'failure'}"
        if ask.detector is not None and ask.accept_after is not None:
            self._say(
                f"  taken in {ask.accept_after:g} s unless you press a key to override   "
                f"[{VERDICT_KEYS}{accept}]\n"
            )
        else:
            self._say(f"  verdict?   [{VERDICT_KEYS}{accept}]\n")
        with self._keys():
            score: float | None = None
            first = True
            while score is None:
                window = ask.accept_after if first and ask.detector is not None else None
                key = self._key(window)
                first = False
                if key is None:  # the window passed: the detector's verdict stands
                    self._say("  graded by the detector\n")
                    return ask.accepted()
                if key in ("\n", "\r") and ask.detector is not None:
                    score = 1.0 if ask.detector else 0.0
                elif key in ("y", "Y"):
                    score = 1.0
                elif key in ("n", "N"):
                    score = 0.0
                elif key in ("r", "R"):
                    self._say("  discarded: the row runs again\n")
                    return Verdict(None, discard=True)
                elif key in ("p", "P"):
                    score = self._partial()
            self._say(f"  graded {score:g}\n")
            notes = self._line("  notes (Enter for none): ")
        return Verdict(score, notes)

    def _partial(self) -> float:
        while True:
            text = self._line("  partial score between 0 and 1: ")
            try:
                value = float(text)
            except ValueError:
                value = -1.0
            if 0.0 <= value <= 1.0:
                return value
            self._say(f"  {text!r} is not a number between 0 and 1\n")

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
