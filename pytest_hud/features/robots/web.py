"""The web console (``--hud-operator=web``): the operator's gate (the robot's cameras live, else
its reference image, saying which), the running episode (timer from its first frame,
cameras, stop, an instruction to the policy, the verdict at once), the verdict (with the
detector's countdown, which a key or a typed note holds), robot faults and the
end-of-session summary, in a browser page on 127.0.0.1, for a person at the robot who is
not at the terminal running pytest.

The page is static (``web_page/``); the server (web_server.py) pushes this console's state
and the camera frames to it over a WebSocket and hands its answers here. The url, with the
console's random token, is printed once to the controlling terminal (else stderr) and, where
``$PYTEST_HUD_OPERATOR_URL_FILE`` names a file, written there.

The protocol methods block the plugin's thread until the person answers, however long that
takes, and return at once when the console closes.
"""

from __future__ import annotations

import io
import ipaddress
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal, cast

import numpy as np

from pytest_hud.errors import HudError
from pytest_hud.features.robots.operator import (
    MAX_INSTRUCTION,
    Ask,
    Episode,
    FaultAnswer,
    Gate,
    GateAnswer,
    GateView,
    Summary,
    Verdict,
    partial_score,
)
from pytest_hud.features.robots.web_server import (
    MAX_BODY,
    MAX_CONNECTIONS,
    MAX_UNPROVEN,
    ConsoleServer,
    _Refused,
)
from pytest_hud.plumbing.private_dir import open_private

__all__ = [
    "MAX_BODY",
    "MAX_CONNECTIONS",
    "MAX_UNPROVEN",
    "URL_FILE_ENV",
    "ConsoleClosed",
    "WebOperator",
]

#: A file the console writes its url (with the token) to, created private to the user.
URL_FILE_ENV = "PYTEST_HUD_OPERATOR_URL_FILE"
#: The longest notes line kept.
MAX_NOTES = 1000

Phase = Literal["idle", "gate", "running", "verdict", "fault", "summary", "closed"]
Json = dict[str, object]
Answer = GateAnswer | Verdict | FaultAnswer
#: what each phase takes
ACTIONS: dict[str, tuple[str, ...]] = {
    "gate": ("go", "skip", "quit"),
    "running": ("stop", "instruct", "success", "failure", "partial"),
    "verdict": ("success", "failure", "partial", "discard", "accept", "hold"),
    "fault": ("retry", "skip", "quit"),
}


class ConsoleClosed(HudError, RuntimeError):
    """The console closed while a verdict was awaited (the session is ending)."""


class WebOperator:
    """An operator at a browser page on ``host`` (loopback only) and ``port`` (0: any free
    one). The server starts here and stops in :meth:`close`; ``url`` is the page's address
    with its token. ``shown`` is every text line the page displayed, in order, each once
    when it first appeared (the gate's lines stay up while its episode runs)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        if not _loopback(host):
            raise ValueError(f"the web console listens on loopback only, got host {host!r}")
        self.shown: list[str] = []
        self.token = secrets.token_urlsafe(24)
        self.version = 0  # grows with every change the page shows
        self._cond = threading.Condition()
        self._phase: Phase = "idle"
        self._seq = 0  # the current question's number; an answer names the one it answers
        self._lines: list[str] = []
        self._title = ""
        self._arm: str | None = None
        self._note = "waiting for the first episode"
        self._answer: Answer | None = None
        self._gate: Gate | None = None
        self._episode: Episode | None = None
        self._ask: Ask | None = None
        self._deadline: float | None = None  # the detector's verdict stands then
        self._held = False
        self._summary: list[str] = []
        self._frames: dict[str, np.ndarray] = {}
        #: what the gate's camera area shows (the plugin says, before and while it waits)
        self._view: GateView | None = None
        self._frame_no = 0
        self._jpegs: tuple[int, dict[str, bytes]] = (0, {})
        self._jpeg_lock = threading.Lock()
        self._server = ConsoleServer(self, host, 0 if port == 0 else port)
        self.url = f"http://{_host_for_url(host)}:{self._server.port}/?token={self.token}"
        try:
            _announce(self.url)
        except BaseException:  # a url file refused: no server left listening
            self._server.close()
            raise

    # -- the protocol --------------------------------------------------------------------
    def gate(self, gate: Gate) -> GateAnswer:
        """Show the gate; block until Start (go), Put off (skip) or End session (quit).
        A closed console answers quit."""
        with self._cond:
            self._gate, self._ask = gate, None
        seq = self._put("gate", gate.lines(), gate, "position the scene, then Start")
        answer = self._wait(seq)
        return cast(GateAnswer, answer) if isinstance(answer, str) else "quit"

    def watch(self, episode: Episode) -> Callable[[], None]:
        """Show the running episode (timer from its first frame, cameras, Stop, an
        instruction, the verdict at once); the closer leaves that screen."""
        with self._cond:
            self._frames, self._jpegs = {}, (0, {})
            self._episode = episode
        # the gate's lines stay up (already in the transcript): what is running, and where
        seq = self._put(
            "running", episode.gate.lines(), episode.gate, "the episode is running", record=False
        )

        def close() -> None:
            with self._cond:
                if self._seq == seq and self._phase == "running":
                    self._phase, self._note = "idle", "the episode ended"
                    self._changed()

        return close

    def gate_view(self, view: GateView, frames: Mapping[str, np.ndarray] | None) -> None:
        """What the gate shows of the scene: the robot's cameras now (``live``, with their
        frames, pushed to the page as the episode's are), else its reference image or
        nothing, and the line that says which. Live frames are kept only while a gate
        waits: once it closed, a late one is dropped."""
        with self._cond:
            if self._phase == "closed":
                return
            if view.kind == "live":
                if self._phase != "gate" or not frames:
                    return
                self._frames = dict(frames)
                self._frame_no += 1
            elif self._phase in ("gate", "idle"):  # no frames shown at this gate
                self._frames = {}
            if view != self._view:
                self._view = view
                self._changed()
        self._server.poke()

    def frame(self, images: Mapping[str, np.ndarray]) -> None:
        """Keep this tick's camera frames (HWC uint8 RGB by contract name); the page gets
        them pushed. Called on the control loop: only references are kept here."""
        with self._cond:
            self._frames = dict(images)
            self._frame_no += 1
        self._server.poke()

    def verdict(self, ask: Ask) -> Verdict:
        """Show the episode's outcome; block until Success, Failure, Partial (a score in
        [0, 1], checked here) or Discard, with the notes typed. With a detector, its verdict
        stands after ``ask.accept_after`` seconds unless the operator answers, accepts it
        (Enter) or holds it (h, or typing a note: nothing typed is lost). Raises
        ConsoleClosed when the console closes first."""
        window = ask.accept_after if ask.detector is not None else None
        with self._cond:
            self._ask, self._held = ask, False
            self._deadline = None if window is None else time.monotonic() + window
        hint = "verdict?"
        if window is not None:
            hint = f"the detector's verdict stands in {window:g} s unless you answer or hold it"
        seq = self._put("verdict", ask.lines(), ask.gate, hint)
        answer = self._wait(seq, countdown=True)
        if not isinstance(answer, Verdict):
            raise ConsoleClosed("the web console closed before the episode was graded")
        return answer

    def fault(self, message: str, gate: Gate) -> FaultAnswer:
        """A robot fault that asks: run the row again (the robot fixed), leave it undecided
        and go on, or end the session. A closed console answers quit."""
        lines = [f"robot fault: {message}", "look at the robot, then say what to do"]
        seq = self._put("fault", lines, gate, "the robot faulted")
        answer = self._wait(seq)
        return cast(FaultAnswer, answer) if isinstance(answer, str) else "quit"

    def summary(self, summary: Summary) -> None:
        """The end-of-session page (it stays until the console closes)."""
        with self._cond:
            self._summary = list(summary.lines)
        self._put("summary", list(summary.lines), None, "the session is over")

    def close(self) -> None:
        """Stop the server; every blocked method returns (gate: quit)."""
        with self._cond:
            if self._phase == "closed":
                return
            self._phase, self._note = "closed", "the session ended"
            self._changed()
        self._server.close()

    # -- questions and answers -----------------------------------------------------------
    def _changed(self) -> None:
        """Under the lock: the state the page shows changed."""
        self.version += 1
        self._cond.notify_all()
        self._server.poke()

    def _put(
        self, phase: Phase, lines: list[str], gate: Gate | None, hint: str, record: bool = True
    ) -> int:
        """Put up a question; its number. ``shown`` gets its lines (``record``) and hint."""
        with self._cond:
            if self._phase == "closed":
                return -1
            self._seq += 1
            self._phase, self._lines, self._answer, self._note = phase, lines, None, hint
            self._title = f"Episode {gate.number}" if gate is not None else "Session"
            self._arm = gate.arm if gate is not None else None
            self.shown.extend([*lines, hint] if record else [hint])
            self._changed()
            return self._seq

    def _wait(self, seq: int, countdown: bool = False) -> Answer | None:
        """The answer to question ``seq``; None once the console closed. With
        ``countdown``, the detector's verdict is taken when its deadline passes unheld."""
        with self._cond:
            while self._phase != "closed" and not (self._seq == seq and self._answer is not None):
                left = 1.0  # a bounded wait keeps ^C live
                if countdown and self._deadline is not None and not self._held:
                    left = min(left, self._deadline - time.monotonic())
                    if left <= 0 and self._ask is not None:
                        self._settle(self._ask.accepted(), "graded by the detector")
                        break
                self._cond.wait(timeout=max(left, 0.01))
            return self._answer if self._seq == seq else None

    def take(self, body: Mapping[str, object]) -> str:
        """Apply an answer from the page; what the page shows back. Raises _Refused."""
        action = str(body.get("action"))
        with self._cond:
            if self._phase == "closed":
                raise _Refused(410, "the session ended")
            if body.get("seq") != self._seq or self._answer is not None:
                raise _Refused(409, "that question was already answered")
            if action not in ACTIONS.get(self._phase, ()):
                raise _Refused(409, f"{action!r} is not an answer to this question")
            try:
                said = self._apply(action, body)
            except _Refused as refused:
                if refused.status == 400:  # the page shows it: so does the transcript
                    self.shown.append(refused.message)
                raise
            self._changed()
            return said

    def _apply(self, action: str, body: Mapping[str, object]) -> str:
        """Under the lock: what ``action`` does in the current phase (see ACTIONS)."""
        phase, notes = self._phase, _notes(body.get("notes"))
        if phase in ("gate", "fault"):
            said = {"go": "starting", "retry": "running the row again", "skip": "put off",
                    "quit": "ending the session"}[action]  # fmt: skip
            self._settle(cast(Answer, action), said)
            return said
        if phase == "running":
            assert self._episode is not None
            if action == "stop":
                self._episode.stop.set()
                return self._say("stopping the episode")
            if action == "instruct":
                text = str(body.get("text") or "")[: MAX_INSTRUCTION * 2]
                try:
                    sent = self._episode.instruct(text)
                except ValueError as exc:
                    raise _Refused(400, str(exc)) from None
                return self._say(f"told the policy: {sent}")
            verdict = Verdict(_score(action, body), notes)
            self._episode.grade_now(verdict)
            return self._say(f"graded {verdict.score:g} now: the episode ends")
        if action == "hold":
            self._held = True
            return self._say("held: the detector's verdict waits for you")
        if action == "accept":
            assert self._ask is not None
            if self._ask.detector is None:
                raise _Refused(409, "there is no detector's verdict to accept")
            return self._settle(self._ask.accepted(notes), "graded by the detector")
        if action == "discard":
            return self._settle(Verdict(None, notes, discard=True), "discarded: the row runs again")
        score = _score(action, body)
        return self._settle(Verdict(score, notes), f"graded {score:g}")

    def _say(self, said: str) -> str:
        self._note = said
        self.shown.append(said)
        return said

    def _settle(self, answer: Answer, said: str) -> str:
        self._answer, self._phase = answer, "idle"
        self._changed()
        return self._say(said)

    # -- what the server sends -----------------------------------------------------------
    def state(self) -> Json:
        with self._cond:
            episode, gate, ask, view = self._episode, self._gate, self._ask, self._view
            running = self._phase == "running" and episode is not None
            countdown = None
            if self._phase == "verdict" and self._deadline is not None and not self._held:
                countdown = round(max(0.0, self._deadline - time.monotonic()), 1)
            shown_gate = ask.gate if self._phase == "verdict" and ask is not None else gate
            return {
                "phase": self._phase,
                "seq": self._seq,
                "title": self._title,
                "arm": self._arm,
                "lines": self._lines,
                "note": self._note,
                "actions": list(ACTIONS.get(self._phase, ())),
                "started": bool(running and episode is not None and episode.started),
                "elapsed": round(episode.elapsed(), 1) if episode is not None else 0.0,
                "steps": episode.steps if episode is not None else 0,
                "stopping": bool(running and episode is not None and episode.stop.is_set()),
                "instruction": episode.told() if running and episode is not None else "",
                "cameras": sorted(self._frames),
                "reference": (
                    self._phase == "gate"
                    and gate is not None
                    and gate.image is not None
                    and (view is None or view.kind == "reference")
                ),
                "gate_camera": (
                    {"kind": view.kind, "said": view.said}
                    if self._phase == "gate" and view is not None
                    else None
                ),
                "countdown": countdown,
                "held": self._held,
                "detector": ask.detector if self._phase == "verdict" and ask else None,
                "progress": _progress(shown_gate),
                "summary": self._summary if self._phase == "summary" else [],
            }

    def frames(self) -> tuple[int, dict[str, bytes]]:
        """The latest frame of every camera as JPEG (encoded once per frame) and its number."""
        with self._cond:
            images, number = dict(self._frames), self._frame_no
        with self._jpeg_lock:
            if self._jpegs[0] != number:
                self._jpegs = (number, {name: _encode(image) for name, image in images.items()})
            return self._jpegs

    def reference_jpeg(self) -> bytes | None:
        """The gate's reference image re-encoded as JPEG (only ever that one file; a file
        that is not an image is answered as absent)."""
        with self._cond:
            path = self._gate.image if self._phase == "gate" and self._gate else None
            if self._view is not None and self._view.kind != "reference":
                path = None  # the gate shows the robot's cameras, or says why nothing
        if path is None:
            return None
        from PIL import Image

        try:
            with Image.open(path) as image:
                out = io.BytesIO()
                image.convert("RGB").save(out, "JPEG", quality=85)
                return out.getvalue()
        except (OSError, ValueError, Image.DecompressionBombError):
            return None


# -- helpers ------------------------------------------------------------------------------
def _progress(gate: Gate | None) -> Json | None:
    if gate is None:
        return None
    return {"number": gate.number, "planned": gate.planned, "budget": gate.budget}


def _score(action: str, body: Mapping[str, object]) -> float:
    """success 1, failure 0, partial: the score typed on the page, a number in [0, 1], else
    a 400 saying so."""
    if action != "partial":
        return 1.0 if action == "success" else 0.0
    given = body.get("score")
    text = str(given if given is not None else "").strip()
    value = partial_score(text)
    if value is None:
        shown = text[:40] + ("…" if len(text) > 40 else "")
        raise _Refused(400, f"{shown!r} is not a number between 0 and 1")
    return value


def _notes(given: object) -> str:
    text = given if isinstance(given, str) else ""
    return " ".join(text.split())[:MAX_NOTES]


def _encode(image: np.ndarray) -> bytes:
    """One camera frame as JPEG: HWC uint8 RGB by contract; a float frame in [0, 1], a
    grayscale or a CHW one is converted rather than refused (it is only shown)."""
    from PIL import Image

    array = np.asarray(image)
    if array.ndim == 3 and array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3, 4):
        array = np.moveaxis(array, 0, -1)
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if array.dtype != np.uint8:
        scale = 255.0 if array.size and float(np.nanmax(array)) <= 1.0 else 1.0
        array = np.clip(np.nan_to_num(array.astype(np.float64) * scale), 0, 255).astype(np.uint8)
    if array.ndim == 3 and array.shape[-1] == 4:
        array = array[..., :3]
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(out, "JPEG", quality=80)
    return out.getvalue()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _announce(url: str) -> None:
    """Print the url once where the person sees it (the terminal, past pytest's capture),
    and write it to ``$PYTEST_HUD_OPERATOR_URL_FILE`` if set."""
    line = f"hud operator console: {url}\n"
    try:
        with open("/dev/tty", "w") as tty:
            tty.write(line)
    except OSError:
        sys.stderr.write(line)
        sys.stderr.flush()
    target = os.environ.get(URL_FILE_ENV)
    if target:  # never through a link, nor into a file someone else made for us to fill
        fd = open_private(Path(target))
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, 0)
        with os.fdopen(fd, "w") as out:
            out.write(url + "\n")
