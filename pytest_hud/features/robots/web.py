"""The web console (``--hud-operator=web``): the operator's gate, stop button, cameras and
verdict in a browser page served on 127.0.0.1, for a person at the robot who is not at the
terminal running pytest.

One small HTTP server (stdlib, a daemon thread per request, at most a few at once) serves
one inline page (no external assets), its state as JSON (``GET /state``, polled by the page),
the latest camera frames as JPEG (``GET /frame/<name>.jpg``) and the person's answers
(``POST /answer``). Every request carries the console's token, a random one made per console,
in its url (``?token=``; no cookie carries it: browsers send a cookie of 127.0.0.1 to every
port there, so any other local server the browser visits would get it): without it, 403.
A connection that has not shown the token holds no slot of the owner's: at most
``MAX_UNPROVEN`` are kept, the oldest let go for a new one. The url is printed
once to the controlling terminal (else stderr) and, where ``$PYTEST_HUD_OPERATOR_URL_FILE``
names a file, written there (for a script or a test that opens the page itself).

The protocol methods block the plugin's thread until the person answers, however long that
takes, and return at once when the console closes.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import math
import os
import secrets
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socket import SHUT_RDWR, socket
from typing import Literal, cast
from urllib.parse import parse_qsl, unquote, urlsplit

import numpy as np

from pytest_hud.errors import HudError
from pytest_hud.features.robots.operator import Ask, Episode, Gate, GateAnswer, Verdict
from pytest_hud.plumbing.auth import same
from pytest_hud.plumbing.jsonread import loads

__all__ = ["URL_FILE_ENV", "ConsoleClosed", "WebOperator"]

#: A file the console writes its url (with the token) to, created private to the user.
URL_FILE_ENV = "PYTEST_HUD_OPERATOR_URL_FILE"
#: The largest request body admitted (an answer is a few hundred bytes).
MAX_BODY = 64 * 1024
#: Requests with the token served at once; more are refused with 503 (a page needs two or
#: three).
MAX_CONNECTIONS = 16
#: Connections kept before their request showed the token (a page's own are there for a few
#: milliseconds; a stranger's idle ones stay until let go); one more lets the oldest go, so
#: idle strangers can never take the owner's slots (16 of them answered 503 to the operator).
MAX_UNPROVEN = 32
#: The longest notes line kept.
MAX_NOTES = 1000

Phase = Literal["idle", "gate", "running", "verdict", "closed"]
Json = dict[str, object]


class ConsoleClosed(HudError, RuntimeError):
    """The console closed while a verdict was awaited (the session is ending)."""


class _Refused(Exception):
    """An answer the console does not take: its HTTP status and the line the page shows."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class WebOperator:
    """An operator at a browser page on ``host`` (loopback only) and ``port`` (0: any free
    one). The server starts here and stops in :meth:`close`; ``url`` is the page's address
    with its token. ``shown`` is every text line the page displayed, in order, each once
    when it first appeared (the gate's lines stay up while its episode runs)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        if not _loopback(host):
            raise ValueError(f"the web console listens on loopback only, got host {host!r}")
        self.shown: list[str] = []
        self._token = secrets.token_urlsafe(24)
        self._cond = threading.Condition()
        self._phase: Phase = "idle"
        self._seq = 0  # the current question's number; an answer names the one it answers
        self._lines: list[str] = []  # what the current question shows
        self._title = ""
        self._arm: str | None = None
        self._note = "waiting for the first episode"
        self._answer: GateAnswer | Verdict | None = None
        self._episode: Episode | None = None
        self._started = 0.0
        self._ended: float | None = None
        self._frames: dict[str, np.ndarray] = {}
        self._version = 0  # counts frames() calls, so the page fetches only new ones
        self._reference: str | None = None  # the gate's reference image (a file path)
        self._jpegs: dict[str, tuple[int, bytes]] = {}
        self._jpeg_lock = threading.Lock()
        self._server = _Server((host, port), self)
        bound = self._server.server_address
        self.url = f"http://{_host_for_url(host)}:{bound[1]}/?token={self._token}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="pytest-hud-web-console",
            daemon=True,
        )
        self._thread.start()
        _announce(self.url)

    # -- the protocol --------------------------------------------------------------------
    def gate(self, gate: Gate) -> GateAnswer:
        """Show the gate; block until Start (go), Put off (skip) or End session (quit).
        A closed console answers quit."""
        lines = gate.lines()
        with self._cond:
            self._reference = gate.image
        seq = self._ask(
            "gate", lines, f"Episode {gate.number}", gate.arm, "position the scene, then Start"
        )
        answer = self._wait(seq)
        if not isinstance(answer, str):
            return "quit"
        return cast(GateAnswer, answer)

    def watch(self, episode: Episode) -> Callable[[], None]:
        """Show the running episode (timer, cameras, Stop); the closer leaves that screen."""
        with self._cond:
            self._frames, self._jpegs, self._version = {}, {}, self._version + 1
            self._started, self._ended = time.monotonic(), None
            self._episode = episode
        # the gate's lines stay up (already in the transcript): what is running, and where
        seq = self._ask(
            "running",
            episode.gate.lines(),
            f"Episode {episode.gate.number}",
            episode.gate.arm,
            "the episode is running",
            record=False,
        )

        def close() -> None:
            with self._cond:
                if self._seq == seq and self._phase == "running":
                    self._ended = time.monotonic()
                    self._phase = "idle"
                    self._note = "the episode ended"
                    self._cond.notify_all()

        return close

    def frame(self, images: Mapping[str, np.ndarray]) -> None:
        """Keep this tick's camera frames (HWC uint8 RGB by contract name); the page's next
        poll fetches them. Called on the control loop: only references are kept here."""
        with self._cond:
            self._frames = dict(images)
            self._version += 1

    def verdict(self, ask: Ask) -> Verdict:
        """Show the episode's outcome; block until Success, Failure, Partial (a score in
        [0, 1], checked here) or Discard, with the notes typed. Raises ConsoleClosed when
        the console closes first."""
        window = ask.accept_after if ask.detector is not None else None
        hint = "verdict?"
        if window is not None:
            hint = f"the detector's verdict is taken in {window:g} s unless you override it"
        seq = self._ask("verdict", ask.lines(), f"Episode {ask.gate.number}", ask.gate.arm, hint)
        answer = self._wait(seq, window)
        if answer is None and window is not None:
            with self._cond:
                if self._phase != "closed" and self._seq == seq and self._answer is None:
                    self._settle(ask.accepted(), "graded by the detector")
            answer = self._wait(seq)
        if not isinstance(answer, Verdict):
            raise ConsoleClosed("the web console closed before the episode was graded")
        return answer

    def close(self) -> None:
        """Stop the server; every blocked method returns (gate: quit)."""
        with self._cond:
            if self._phase == "closed":
                return
            self._phase = "closed"
            self._note = "the session ended"
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- questions and answers -----------------------------------------------------------
    def _ask(
        self,
        phase: Phase,
        lines: list[str],
        title: str,
        arm: str | None,
        hint: str,
        record: bool = True,
    ) -> int:
        """Put up a question; its number. ``shown`` gets its lines (``record``) and hint."""
        with self._cond:
            if self._phase == "closed":
                return -1
            self._seq += 1
            self._phase, self._lines, self._title, self._arm = phase, lines, title, arm
            self._answer, self._note = None, hint
            self.shown.extend([*lines, hint] if record else [hint])
            self._cond.notify_all()
            return self._seq

    def _wait(self, seq: int, within: float | None = None) -> GateAnswer | Verdict | None:
        """The answer to question ``seq``; None once the console closed, or when
        ``within`` seconds passed unanswered."""
        deadline = None if within is None else time.monotonic() + within
        with self._cond:
            while self._phase != "closed" and not (self._seq == seq and self._answer is not None):
                left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
                if left <= 0:
                    return None
                self._cond.wait(timeout=left)  # woken by an answer or close(); 1 s keeps ^C live
            return self._answer if self._seq == seq else None

    def _take(self, body: Mapping[str, object]) -> str:
        """Apply a POSTed answer; what the page shows back. Raises _Refused."""
        action = body.get("action")
        with self._cond:
            if self._phase == "closed":
                raise _Refused(410, "the session ended")
            if body.get("seq") != self._seq or self._answer is not None:
                raise _Refused(409, "that question was already answered")
            if self._phase == "gate" and action in ("go", "skip", "quit"):
                said = {"go": "starting", "skip": "put off", "quit": "ending the session"}[
                    str(action)
                ]
                self._settle(cast(GateAnswer, action), said)
            elif self._phase == "running" and action == "stop":
                assert self._episode is not None
                self._episode.stop.set()
                said = "stopping the episode"
                self._note = said
                self.shown.append(said)
            elif self._phase == "verdict" and action in ("success", "failure", "partial"):
                if action == "partial":
                    score = _score(body.get("score"))
                else:
                    score = 1.0 if action == "success" else 0.0
                said = f"graded {score:g}"
                self._settle(Verdict(score, _notes(body.get("notes"))), said)
            elif self._phase == "verdict" and action == "discard":
                said = "discarded: the row runs again"
                self._settle(Verdict(None, _notes(body.get("notes")), discard=True), said)
            else:
                raise _Refused(409, f"{action!r} is not an answer to this question")
            return said

    def _settle(self, answer: GateAnswer | Verdict, said: str) -> None:
        self._answer, self._phase, self._note = answer, "idle", said
        self.shown.append(said)
        self._cond.notify_all()

    def _refuse(self, message: str) -> None:
        with self._cond:
            self.shown.append(message)

    def _reference_jpeg(self) -> bytes | None:
        """The gate's reference image re-encoded as JPEG (only ever that one file; a file
        that is not an image is answered as absent)."""
        with self._cond:
            path = self._reference if self._phase == "gate" else None
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

    def _state(self) -> Json:
        with self._cond:
            running = self._phase == "running"
            end = self._ended if self._ended is not None else time.monotonic()
            stopping = self._episode is not None and self._episode.stop.is_set()
            return {
                "phase": self._phase,
                "seq": self._seq,
                "title": self._title,
                "arm": self._arm,
                "lines": self._lines,
                "note": self._note,
                "elapsed": round(end - self._started, 1) if self._started else 0.0,
                "stopping": running and stopping,
                "cameras": sorted(self._frames),
                "frame": self._version,
                "reference": self._phase == "gate" and self._reference is not None,
            }

    def _jpeg(self, name: str) -> bytes | None:
        """The latest frame of camera ``name`` as JPEG (encoded once per frame)."""
        with self._cond:
            image, version = self._frames.get(name), self._version
        if image is None:
            return None
        with self._jpeg_lock:
            cached = self._jpegs.get(name)
            if cached is None or cached[0] != version:
                cached = (version, _encode(image))
                self._jpegs[name] = cached
            return cached[1]


# -- the HTTP side ---------------------------------------------------------------------------
class _Server(ThreadingHTTPServer):
    """One thread per connection. A connection is unproven until its request shows the
    token: at most MAX_UNPROVEN are kept (a new one shuts the oldest down); a proven
    request takes one of MAX_CONNECTIONS slots, or is answered 503."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], console: WebOperator) -> None:
        self.console = console
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.unproven: OrderedDict[socket, None] = OrderedDict()  # oldest first
        self.unproven_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(
        self, request: socket | tuple[bytes, socket], client_address: object
    ) -> None:
        with self.unproven_lock:
            while len(self.unproven) >= MAX_UNPROVEN:
                oldest, _ = self.unproven.popitem(last=False)
                with contextlib.suppress(OSError):  # its thread reads the end and leaves
                    oldest.shutdown(SHUT_RDWR)
            self.unproven[cast(socket, request)] = None
        super().process_request(request, client_address)

    def proven(self, request: socket) -> bool:
        """``request`` showed the token: it is no longer unproven; whether a slot was free
        (the caller releases it)."""
        with self.unproven_lock:
            self.unproven.pop(request, None)
        return self.slots.acquire(blocking=False)

    def shutdown_request(self, request: socket | tuple[bytes, socket]) -> None:
        with self.unproven_lock:
            self.unproven.pop(cast(socket, request), None)
        super().shutdown_request(request)

    def handle_error(self, request: object, client_address: object) -> None:
        """A broken connection is the client's business: no traceback on pytest's stderr."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # a client that stalls mid-request gives its slot back
    server_version = "pytest-hud-console"
    sys_version = ""
    _slot = False  # holds one of the server's slots

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self._slot:
                self._slot = False
                self.server.slots.release()

    # -- plumbing -----------------------------------------------------------------------
    def log_message(self, format: str, *args: object) -> None:
        """Quiet: requests are the page's polling, not news."""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A one-line text body for every error http.server raises (a bad request line)."""
        self._text(code, message or self.responses.get(code, ("error",))[0])

    def _send(
        self, status: int, body: bytes, kind: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")  # the url carries the token
        self.send_header("Connection", "close")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            with contextlib.suppress(OSError):
                self.wfile.write(body)
        self.close_connection = True

    def _text(self, status: int, line: str) -> None:
        self._send(
            status, (line.splitlines() or [""])[0].encode() + b"\n", "text/plain; charset=utf-8"
        )

    def _json(self, status: int, doc: Json) -> None:
        self._send(status, json.dumps(doc).encode(), "application/json")

    def _admitted(self) -> bool:
        """Whether the request shows the token in its url (else 403) and got a slot (else
        503); a cookie admits nothing."""
        try:
            query = dict(parse_qsl(urlsplit(self.path).query))
        except ValueError:  # urlsplit refuses some paths ("//[")
            query = {}
        if not same(self.server.console._token, query.get("token")):
            self._text(403, "forbidden: open the url with its token, as pytest printed it")
            return False
        self._slot = self.server.proven(self.request)
        if not self._slot:
            self._text(503, f"busy: {MAX_CONNECTIONS} requests at once; the page retries")
        return self._slot

    # -- requests -----------------------------------------------------------------------
    def do_GET(self) -> None:
        try:
            self._get()
        except Exception:
            self._text(500, "the console could not answer this request")

    def do_POST(self) -> None:
        try:
            self._post()
        except Exception:
            self._text(500, "the console could not take this answer")

    def _get(self) -> None:
        if not self._admitted():
            return
        parts = urlsplit(self.path)
        console = self.server.console
        if parts.path in ("/", "/index.html"):
            self._send(
                200, PAGE.encode(), "text/html; charset=utf-8", {"Content-Security-Policy": CSP}
            )
        elif parts.path == "/state":
            self._json(200, console._state())
        elif parts.path == "/reference.jpg":
            jpeg = console._reference_jpeg()
            if jpeg is None:
                self._text(404, "this row has no reference image")
            else:
                self._send(200, jpeg, "image/jpeg")
        elif parts.path.startswith("/frame/") and parts.path.endswith(".jpg"):
            jpeg = console._jpeg(unquote(parts.path[len("/frame/") : -len(".jpg")]))
            if jpeg is None:
                self._text(404, "no frame from that camera yet")
            else:
                self._send(200, jpeg, "image/jpeg")
        else:
            self._text(404, "not found")

    def _post(self) -> None:
        if not self._admitted():
            return
        if urlsplit(self.path).path != "/answer":
            self._text(404, "not found")
            return
        length_text = self.headers.get("Content-Length")
        if length_text is None or not (length_text.isascii() and length_text.isdigit()):
            self._text(411, "an answer needs a Content-Length")
            return
        length = int(length_text)
        if length > MAX_BODY:
            self._text(413, f"an answer is at most {MAX_BODY} bytes")
            return
        try:
            body = loads(self.rfile.read(length) or b"{}")
        except (ValueError, OSError):
            self._json(400, {"error": "an answer is a JSON object"})
            return
        if not isinstance(body, dict):
            self._json(400, {"error": "an answer is a JSON object"})
            return
        console = self.server.console
        try:
            said = console._take(body)
        except _Refused as refused:
            if refused.status == 400:
                console._refuse(refused.message)
            self._json(refused.status, {"error": refused.message})
            return
        self._json(200, {"ok": True, "said": said})


# -- helpers ------------------------------------------------------------------------------
def _score(given: object) -> float:
    """A partial score typed on the page: a number in [0, 1], else a 400 saying so."""
    text = str(given if given is not None else "").strip()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
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
    if target:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(url + "\n")


CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src 'self'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; "
    "base-uri 'none'"
)

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>hud operator console</title>
<style>
body{font:16px/1.4 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
header{display:flex;gap:1em;align-items:baseline;padding:.6em 1.2em;background:#1d2330;color:#fff}
header h1{font-size:1.1em;margin:0;font-weight:600}
#note{opacity:.8}
main{max-width:60em;margin:1em auto;padding:0 1em}
section{background:#fff;border-radius:8px;padding:1em 1.4em;margin-bottom:1em;
 box-shadow:0 1px 3px #0002}
h2{margin:.2em 0 .4em;font-size:1.4em}
.arm{display:inline-block;background:#e8eefc;color:#2346a8;border-radius:4px;padding:0 .5em;
 font-weight:600;margin-left:.5em;font-size:.8em;vertical-align:middle}
ul.lines{list-style:none;padding:0;margin:.4em 0 1em;font-family:ui-monospace,monospace}
ul.lines li{padding:.15em 0}
button{font:inherit;padding:.5em 1em;border-radius:6px;border:1px solid #99a;background:#fff;
 cursor:pointer;margin:.2em .4em .2em 0}
button:disabled{opacity:.5;cursor:default}
button.big{font-size:1.5em;padding:.6em 1.6em;font-weight:600}
.go{background:#1e8e3e;color:#fff;border-color:#1e8e3e}
.stop{background:#c5221f;color:#fff;border-color:#c5221f}
.mid{background:#e37400;color:#fff;border-color:#e37400}
.timer{font:600 3em ui-monospace,monospace;margin:.1em 0}
.state{font-weight:600;color:#c5221f}
.live{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}
.controls{flex:1 1 22em}
.live section{margin-bottom:0}
#cameras{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0}
figure img{width:288px;image-rendering:pixelated;background:#000;border-radius:4px;
 display:block}
figcaption{font-size:.8em;color:#556}
label{display:block;margin:.6em 0}
input{font:inherit;padding:.35em .5em;border:1px solid #99a;border-radius:4px}
#notes{width:100%;box-sizing:border-box}
#score{width:6em}
.partial{display:flex;flex-wrap:wrap;align-items:center;gap:.2em 1em}
.error{color:#c5221f;font-weight:600;min-height:1.4em;margin:.4em 0}
.hint{color:#556}
</style></head>
<body>
<header><h1>hud operator console</h1><span id="note"></span></header>
<main>
<section id="title-box" hidden><h2><span id="title"></span><span id="arm" class="arm" hidden>
</span></h2><ul id="lines" class="lines"></ul></section>
<section id="gate" hidden>
 <p class="hint">Position the scene from the set-up text, then press Start.</p>
 <figure id="reference-box" hidden><img id="reference" alt="reference image">
 <figcaption>how this row's scene looked before</figcaption></figure>
 <button id="start" class="big go" data-action="go">Start</button>
 <div><button id="skip" data-action="skip">Put this row off</button>
 <button id="quit" data-action="quit">End session</button></div>
</section>
<div class="live"><div class="controls">
<section id="run" hidden>
 <div><span id="timer" class="timer">00:00.0</span> <span id="run-state" class="state"></span></div>
 <button id="stop" class="big stop" data-action="stop">Stop episode</button>
</section>
<section id="ask" hidden>
 <div><button id="success" class="big go" data-action="success">Success</button>
 <button id="failure" class="big stop" data-action="failure">Failure</button></div>
 <div class="partial"><label>Partial score, between 0 and 1:
 <input id="score" inputmode="decimal" autocomplete="off"></label>
 <button id="partial" class="big mid" data-action="partial">Partial</button></div>
 <label>Notes: <input id="notes" maxlength="1000" autocomplete="off"></label>
 <button id="discard" data-action="discard">Discard and rerun</button>
</section>
<p id="error" class="error" role="alert"></p>
</div>
<section id="camera-box" hidden><div id="cameras"></div></section>
</div>
<section id="wait"><p id="wait-text">Connecting…</p></section>
</main>
<script>
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const q = "?token=" + encodeURIComponent(token);
const $ = (id) => document.getElementById(id);
let seq = -1, phase = "", busy = false;

function clock(s) {
  const m = Math.floor(s / 60), r = s - 60 * m;
  return String(m).padStart(2, "0") + ":" + r.toFixed(1).padStart(4, "0");
}
function showOnly(phaseNow) {
  $("gate").hidden = phaseNow !== "gate";
  $("run").hidden = phaseNow !== "running";
  $("ask").hidden = phaseNow !== "verdict";
  $("wait").hidden = ["gate", "running", "verdict"].includes(phaseNow);
  $("title-box").hidden = !["gate", "running", "verdict"].includes(phaseNow);
}
function cameras(s) {
  const box = $("cameras");
  $("camera-box").hidden = !(s.cameras.length && ["running", "verdict"].includes(s.phase));
  for (const name of s.cameras) {
    const id = "cam:" + name;
    let fig = document.getElementById(id);
    if (!fig) {
      fig = document.createElement("figure");
      fig.id = id;
      const img = document.createElement("img");
      img.alt = name;
      img.onload = img.onerror = () => { delete img.dataset.loading; };
      const cap = document.createElement("figcaption");
      cap.textContent = name;
      fig.append(img, cap);
      box.append(fig);
    }
    const img = fig.querySelector("img");
    if (img.dataset.v !== String(s.frame) && !("loading" in img.dataset)) {
      img.dataset.loading = "";
      img.dataset.v = String(s.frame);
      img.src = "/frame/" + name.split("/").map(encodeURIComponent).join("/") + ".jpg"
        + q + "&v=" + s.frame;
    }
  }
  for (const fig of Array.from(box.children)) {
    if (!s.cameras.includes(fig.id.slice(4))) fig.remove();
  }
}
function render(s) {
  $("note").textContent = s.note;
  if (s.seq !== seq || s.phase !== phase) {
    seq = s.seq; phase = s.phase;
    $("error").textContent = "";
    $("score").value = ""; $("notes").value = "";
    $("title").textContent = s.title;
    $("arm").hidden = !s.arm;
    $("arm").textContent = s.arm ? "arm " + s.arm : "";
    const ul = $("lines");
    ul.replaceChildren(...s.lines.map((line) => {
      const li = document.createElement("li"); li.textContent = line; return li;
    }));
    for (const b of document.querySelectorAll("button")) b.disabled = false;
    $("reference-box").hidden = !s.reference;
    if (s.reference) $("reference").src = "/reference.jpg" + q + "&seq=" + s.seq;
    showOnly(s.phase);
    $("wait-text").textContent = s.phase === "closed" ? "The session ended." : s.note + " …";
  }
  $("timer").textContent = clock(s.elapsed);
  $("run-state").textContent = s.stopping ? "stopping…" : "running";
  if (s.stopping) $("stop").disabled = true;
  cameras(s);
}
async function poll() {
  try {
    const r = await fetch("/state" + q, {cache: "no-store"});
    if (r.status === 503) {  // busy for a moment: the session goes on
      $("error").textContent = "the console is busy; retrying";
      setTimeout(poll, 500);
      return;
    }
    if (!r.ok) throw new Error(await r.text());
    if ($("error").textContent === "the console is busy; retrying") $("error").textContent = "";
    render(await r.json());
  } catch (e) {
    showOnly("closed");
    $("camera-box").hidden = true;
    $("error").textContent = "";
    $("note").textContent = "the session ended";
    $("wait-text").textContent = "The console is not answering: the session has ended.";
    phase = "";
  }
  setTimeout(poll, 200);
}
async function answer(action) {
  if (busy) return;
  busy = true;
  const body = {seq: seq, action: action, score: $("score").value, notes: $("notes").value};
  const buttons = document.querySelectorAll("#" + (phase === "verdict" ? "ask" : phase === "gate"
    ? "gate" : "run") + " button");
  for (const b of buttons) b.disabled = true;
  try {
    const r = await fetch("/answer" + q, {method: "POST", cache: "no-store",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    const doc = await r.json().catch(() => ({error: "the console did not answer"}));
    if (!r.ok) {
      $("error").textContent = doc.error;
      for (const b of buttons) b.disabled = false;
    } else {
      $("error").textContent = "";
      $("note").textContent = doc.said;
    }
  } catch (e) {
    $("error").textContent = "the console is not answering";
  } finally {
    busy = false;
  }
}
for (const b of document.querySelectorAll("button[data-action]")) {
  b.addEventListener("click", () => answer(b.dataset.action));
}
document.addEventListener("keydown", (e) => {
  if (e.target instanceof HTMLInputElement || e.target instanceof HTMLButtonElement) return;
  const action = phase === "running" && (e.key === " " || e.key === "x") ? "stop"
    : phase === "gate" && e.key === "Enter" ? "go" : null;
  if (action) { e.preventDefault(); answer(action); }
});
poll();
</script>
</body></html>
"""
