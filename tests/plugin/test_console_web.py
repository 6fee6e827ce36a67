"""The web console (--hud-operator=web) in a real headless Chromium (over DevTools): through
pytest end to end (the page's gate, Start, the live timer and camera, Stop, a refused then an
accepted partial score with notes, a success; what reaches the results rows), and a console
driven from a thread (the token, the transcript, discard, close() waking a blocked gate). The
page gets the console's state and frames pushed over a WebSocket and answers over it; the
tests that speak to the server without a browser do the same (``answer``).

Chromium is Debian's (scripts/setup installs it), driven over its DevTools protocol
(tests/helpers/browser.py). Every wait is on the page or an event, bounded by a generous
timeout. ``PYTEST_HUD_DOCS_IMAGES=1`` also writes the screenshot the
docs show (docs/images/web-console.png)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
from browser import WAIT, Browser, click, element_text, page_text, shown, type_into, until
from camera_suite import ENV, TESTS
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from paths import ROOT
from waiting import wait_for

from pytest_hud.features.robots.operator import Ask, Episode, Gate, GateAnswer, Verdict
from pytest_hud.features.robots.web import (
    ACTIONS,
    MAX_BODY,
    MAX_CONNECTIONS,
    URL_FILE_ENV,
    ConsoleClosed,
    WebOperator,
)

SCREENSHOT = ROOT / "docs" / "images" / "web-console.png"


@pytest.fixture
def browser() -> Iterator[Browser]:
    """A headless Chromium at a fixed window size (tests/helpers/browser.py)."""
    driver = Browser()
    try:
        yield driver
    finally:
        driver.quit()


def camera_loaded(driver: Browser) -> bool:
    """A camera frame is on the page (a decoded JPEG, not a broken image)."""
    return bool(
        driver.js(
            "(i => !!i && i.complete && i.naturalWidth > 0)(document.querySelector('#cameras img'))"
        )
    )


def http(url: str, data: bytes | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def refused_without_token(url: str) -> None:
    """Every path, the WebSocket's included, without the token or with a wrong one: 403 and
    one plain line."""
    base = url.split("?")[0].rstrip("/")
    for path in ("/", "/state", "/frame/observation/images/front.jpg", "/?token=wrong",
                 "/console.js", "/ws"):  # fmt: skip
        status, body = http(base + path)
        assert status == 403, (path, status, body)
        assert body.count("\n") == 1 and "Traceback" not in body, body
        assert "forbidden" in body
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(url).replace(url.split("token=")[1], "wrong"), open_timeout=WAIT)
    assert refused.value.response.status_code == 403


def ws_url(url: str) -> str:
    base, token = url.split("?")
    return base.replace("http://", "ws://").rstrip("/") + "/ws?" + token


def messages(ws: object) -> Iterator[dict[str, object]]:
    """The console's text messages, in order (camera frames left out), each within WAIT."""
    while True:
        message = ws.recv(timeout=WAIT)  # type: ignore[attr-defined]
        if isinstance(message, str):
            yield json.loads(message)


def answer(url: str, action: str, **extra: object) -> dict[str, object]:
    """One answer as the page sends it, over the console's WebSocket: to the question the
    pushed state shows (or ``seq``), then the console's reply."""
    from websockets.sync.client import connect

    with connect(ws_url(url), open_timeout=WAIT) as ws:
        state = next(m for m in messages(ws) if "state" in m)["state"]
        assert isinstance(state, dict)
        ws.send(json.dumps({"seq": extra.pop("seq", state["seq"]), "action": action, **extra}))
        reply = next(m for m in messages(ws) if "reply" in m)["reply"]
        assert isinstance(reply, dict)
        return reply


# -- through pytest ---------------------------------------------------------------------------
def test_an_operator_grades_in_the_browser(suite: pytest.Pytester, browser: Browser) -> None:
    """Two rows of the camera env under --hud-operator=web: the first is watched live and
    stopped, refused a partial score of 1.5 and given 0.5 with notes; the second runs out
    and is graded a success."""
    suite.makepyfile(camera_env=ENV, test_camera=TESTS)
    url_file = suite.path / "console-url.txt"
    env = {URL_FILE_ENV: str(url_file), "PYTEST_ADDOPTS": ""}
    out, err = suite.path / "out.txt", suite.path / "err.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0"]
        command += ["--hud-operator=web", "--hud-results=r.json", "test_camera.py"]
        proc = subprocess.Popen(
            command,
            cwd=suite.path,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # no controlling terminal: the url goes to stderr
        )
    try:
        assert wait_for(lambda: url_file.exists() and url_file.read_text().strip(), 120), (
            out.read_text() + err.read_text()
        )
        url = url_file.read_text().strip()
        assert url.startswith("http://127.0.0.1:") and "?token=" in url
        browser.get(url)

        # the gate: the row, its set-up text, the three buttons
        until(browser, lambda: shown(browser, "gate"), "the reset gate")
        text = page_text(browser)
        assert "episode 1 of 2 · cam/push[length:6000]" in text
        assert "instruction: the env's (shown once the episode starts)" in text
        assert "episode 1 of 2" in element_text(browser, "progress")
        assert "set up: the orange block at the left edge, gripper open" in text
        assert "Put this row off" in text and "End session" in text
        assert "zero" not in text  # never the agent's name
        click(browser, "start")

        # the running episode: the timer moves, the camera shows, the stop button
        until(browser, lambda: shown(browser, "run"), "the running episode")
        until(browser, lambda: element_text(browser, "timer") not in ("", "00:00.0"), "a timer")
        until(browser, lambda: camera_loaded(browser), "the front camera")
        until(browser, lambda: "the policy is told: push the orange block" in page_text(browser),
              "the env's instruction")  # fmt: skip
        text = page_text(browser)
        assert "observation/images/front" in text and "Stop episode" in text
        assert "zero" not in text
        if os.environ.get("PYTEST_HUD_DOCS_IMAGES") == "1":
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            SCREENSHOT.write_bytes(browser.get_screenshot_as_png())
        refused_without_token(url)
        click(browser, "stop")

        # the verdict: a partial score out of range is refused on the page, then 0.5
        until(browser, lambda: shown(browser, "ask"), "the verdict")
        assert "episode 1 stopped by you after" in page_text(browser)
        # the set-up text stays on the verdict screen (issue 55: it was dropped there)
        assert "set up: the orange block at the left edge, gripper open" in page_text(browser)
        type_into(browser, "score", "1.5")
        click(browser, "partial")
        until(browser, lambda: "between 0 and 1" in element_text(browser, "error"), "an error")
        assert element_text(browser, "error") == "'1.5' is not a number between 0 and 1"
        assert shown(browser, "ask")  # still asked
        type_into(browser, "score", "0.5")
        type_into(browser, "notes", "jaw slipped")
        click(browser, "partial")

        # the second row runs out by itself; a success
        until(
            browser,
            lambda: (
                shown(browser, "gate")
                and "episode 2 of 2 · cam/push[length:20]" in page_text(browser)
            ),
            "the second gate",
        )
        click(browser, "start")
        until(
            browser,
            lambda: (
                shown(browser, "ask") and "episode 2 ended after 20 steps" in page_text(browser)
            ),
            "the second verdict",
        )
        assert "zero" not in page_text(browser)
        click(browser, "success")
        until(browser, lambda: shown(browser, "summary"), "the session's summary")
        assert "session ended: 2 graded, 0 errors, 0 not run" in page_text(browser)
        assert proc.wait(timeout=120) == 1, out.read_text()  # the partial grade fails its item
        until(browser, lambda: "the session has ended" in page_text(browser), "the end")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    stderr_text = err.read_text()
    assert "Traceback" not in stderr_text and "Traceback" not in out.read_text()
    assert f"hud operator console: {url}" in stderr_text  # printed once, where no tty is
    assert stderr_text.count("hud operator console:") == 1
    rows = {
        r["args"]["length"]: r for r in json.loads((suite.path / "r.json").read_text())["rollouts"]
    }
    first, second = rows[6000], rows[20]
    assert first["score"] == 0.5 and first["success"] is False
    assert first["notes"] == "jaw slipped" and first["grade_source"] == "operator"
    assert first["stopped"] == "operator"
    assert second["score"] == 1.0 and second["success"] is True
    assert second["grade_source"] == "operator" and second["stopped"] is None
    assert second["notes"] is None


# -- a console driven from a thread -------------------------------------------------------------
class Asker:
    """Calls one blocking console method on a thread, as the plugin does."""

    def __init__(self, call: Callable[[], GateAnswer | Verdict]) -> None:
        self.answer: GateAnswer | Verdict | None = None
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[], GateAnswer | Verdict]) -> None:
        self.answer = call()

    def result(self) -> GateAnswer | Verdict | None:
        self.thread.join(timeout=WAIT)
        assert not self.thread.is_alive(), "the console never answered"
        return self.answer


def test_the_console_stops_refuses_and_closes(browser: Browser) -> None:
    console = WebOperator()
    try:
        refused_without_token(console.url)
        browser.get(console.url)
        until(browser, lambda: "waiting for the first episode" in page_text(browser), "waiting")

        gate = Gate("cam/push[length=5]", "block left", "push it", arm="K", number=1)
        asked = Asker(lambda: console.gate(gate))
        until(browser, lambda: shown(browser, "gate"), "the gate")
        assert element_text(browser, "arm") == "arm K"
        click(browser, "start")
        assert asked.result() == "go"

        episode = Episode(gate)
        close = console.watch(episode)
        image = np.zeros((48, 64, 3), np.uint8)
        image[:, :32] = (255, 0, 0)
        console.frame({"observation/images/front": image})
        until(browser, lambda: camera_loaded(browser), "the camera")
        click(browser, "stop")
        assert episode.stop.wait(WAIT)
        until(browser, lambda: "stopping" in element_text(browser, "run-state"), "stopping")
        close()

        asked = Asker(lambda: console.verdict(Ask(gate, 7, detector=True, stopped=True)))
        until(browser, lambda: shown(browser, "ask"), "the verdict")
        assert "the env's detector says: success" in page_text(browser)
        type_into(browser, "score", "abc")
        click(browser, "partial")
        until(browser, lambda: element_text(browser, "error"), "an error")
        assert element_text(browser, "error") == "'abc' is not a number between 0 and 1"
        assert asked.thread.is_alive()  # not taken
        type_into(browser, "notes", "camera bumped")
        click(browser, "discard")
        assert asked.result() == Verdict(None, "camera bumped", discard=True)

        # close() wakes a gate that waits for a person: it answers quit
        asked = Asker(lambda: console.gate(Gate("cam/push[length=5]", "", "push it", number=2)))
        until(browser, lambda: "episode 2" in page_text(browser), "the second gate")
        console.close()
        assert asked.result() == "quit"
        until(browser, lambda: "the session has ended" in page_text(browser), "the end")
    finally:
        console.close()
    assert console.shown == [
        "episode 1 · cam/push[length=5] · arm K",
        "instruction: push it",
        "set up: block left",
        "position the scene, then Start",
        "starting",
        "the episode is running",
        "stopping the episode",
        "episode 1 stopped by you after 7 steps",
        "set up: block left",
        "the env's detector says: success",
        "verdict?",
        "'abc' is not a number between 0 and 1",
        "discarded: the row runs again",
        "episode 2 · cam/push[length=5]",
        "instruction: push it",
        "position the scene, then Start",
    ]


class Strangers:
    """``count`` connections to the console without its token that keep a request open,
    as the probe did: one byte of it, then one more every 2 s (the console waits 10 s for
    each read), until closed."""

    def __init__(self, url: str, count: int) -> None:
        parts = urlsplit(url)
        assert parts.hostname == "127.0.0.1" and parts.port
        self.connections = [
            socket.create_connection((parts.hostname, parts.port)) for _ in range(count)
        ]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._dribble, daemon=True)
        self.thread.start()

    def _dribble(self) -> None:
        while True:
            for connection in self.connections:
                with contextlib.suppress(OSError):  # let go by the console: that is its right
                    connection.sendall(b"G")
            if self.done.wait(2.0):
                return

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=WAIT)
        for connection in self.connections:
            connection.close()


def _state(url: str) -> dict[str, object] | None:
    """The console's /state with the url's token (None: not served)."""
    base, token = url.split("?")
    try:
        status, body = http(f"{base.rstrip('/')}/state?{token}")
    except OSError:
        return None
    return dict(json.loads(body)) if status == 200 else None


def test_idle_strangers_never_keep_the_operator_from_the_console() -> None:
    """Issue 52 #2: 16 idle connections without the token held every slot, so the operator's
    page got 503 (its Stop button too) and said the session had ended. Three times as many
    idle strangers now: the page's state, the gate and the answer to it are served."""
    console = WebOperator()
    strangers = Strangers(console.url, 3 * MAX_CONNECTIONS)
    try:
        asked = Asker(lambda: console.gate(Gate("line/reach", "cup left", "reach it", number=1)))
        assert wait_for(lambda: (_state(console.url) or {}).get("phase") == "gate", WAIT)
        assert answer(console.url, "go")["said"] == "starting"
        assert asked.result() == "go"
    finally:
        strangers.close()
        console.close()


def test_requests_with_the_token_are_bounded_and_bodies_checked() -> None:
    """At most MAX_CONNECTIONS pages are connected at once (one more is answered 503, served
    once one goes); a message past MAX_BODY closes its connection (1009), and an answer that
    is not JSON, or nested past the JSON depth bound, gets one error line back."""
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.sync.client import connect

    console = WebOperator()
    held: list[Any] = []
    pages = contextlib.ExitStack()
    try:
        for _ in range(MAX_CONNECTIONS):  # pages that stay: each holds one of the places
            held.append(pages.enter_context(connect(ws_url(console.url), open_timeout=WAIT)))
        with pytest.raises(InvalidStatus) as refused:
            connect(ws_url(console.url), open_timeout=WAIT)
        assert refused.value.response.status_code == 503
        assert b"busy" in refused.value.response.body
        held.pop().close()
        assert wait_for(lambda: answer(console.url, "go")["status"] == 409, WAIT)
        with connect(ws_url(console.url), open_timeout=WAIT, max_size=None) as ws:
            ws.send("x" * (MAX_BODY + 1))
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    ws.recv(timeout=WAIT)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        with connect(ws_url(console.url), open_timeout=WAIT) as ws:
            for bad in ("not json", "[" * 30_000 + "]" * 30_000):
                ws.send(bad)
                reply = next(m for m in messages(ws) if "reply" in m)["reply"]
                assert reply == {"error": "an answer is a JSON object", "status": 400}
        reply = answer(console.url, "go", seq=0)
        assert reply["status"] == 409 and "not an answer to this question" in str(reply["error"])
    finally:
        pages.close()
        console.close()


def test_the_url_file_is_never_written_through_a_link_or_into_anothers_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 52 (secrets in files of the user's own): ``$PYTEST_HUD_OPERATOR_URL_FILE`` was
    opened ``O_CREAT | O_TRUNC``, following a link and keeping a file that was there: in a
    shared folder, another user's link made the console truncate and write its target, and
    another user's world-readable file there received the url with its token. Both are now
    refused with the fix; a file of the user's own is written 0600."""
    from pytest_hud.plumbing.private_dir import PrivateDirError

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp
    kept = tmp_path / "someone-elses.txt"
    kept.write_text("theirs\n")
    planted = shared / "console-url.txt"
    planted.symlink_to(kept)
    monkeypatch.setenv(URL_FILE_ENV, str(planted))
    consoles = [t for t in threading.enumerate() if t.name == "pytest-hud-web-console"]
    with pytest.raises(PrivateDirError, match="fix: remove it"):
        WebOperator()
    assert kept.read_text() == "theirs\n"
    assert [t for t in threading.enumerate() if t.name == "pytest-hud-web-console"] == consoles
    planted.unlink()
    if os.getuid() == 0:  # another user's file: as root, one handed to nobody
        planted.write_text("")
        planted.chmod(0o666)
        os.chown(planted, 65534, 65534)
        with pytest.raises(PrivateDirError, match="not a regular file of this user's"):
            WebOperator()
        assert planted.read_text() == ""
        planted.unlink()
    planted.write_text("an old url\n")
    planted.chmod(0o644)
    console = WebOperator()
    try:
        assert planted.read_text() == console.url + "\n"
        assert stat.S_IMODE(planted.stat().st_mode) == 0o600
    finally:
        console.close()


class _Recorder(BaseHTTPRequestHandler):
    """Another local server the operator's browser visits: it keeps the Cookie headers."""

    cookies: list[str] = []

    def do_GET(self) -> None:
        self.cookies.append(self.headers.get("Cookie") or "")
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<p>another local server</p>")

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def test_the_token_is_never_a_cookie_another_local_server_receives(browser: Browser) -> None:
    """Issue 52 #5: the page set its token as a cookie, and a browser sends the cookies of
    127.0.0.1 to every port there: any other local server the operator's browser visited
    got the token, and could post verdicts or quit. Now the token is in no cookie: such a
    server receives none of it, and a cookie holding it admits nothing."""
    console = WebOperator()
    other = HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    _Recorder.cookies = []
    token = console.url.split("token=", 1)[1]
    try:
        browser.get(console.url)
        until(browser, lambda: "waiting for the first episode" in page_text(browser), "the page")
        browser.get(f"http://127.0.0.1:{other.server_address[1]}/")
        until(browser, lambda: "another local server" in page_text(browser), "the other page")
        assert _Recorder.cookies and not any(token in c for c in _Recorder.cookies)
        base = console.url.split("?")[0].rstrip("/")
        with urllib.request.urlopen(console.url, timeout=WAIT) as page:
            assert token not in str(page.headers.get_all("Set-Cookie") or [])
        for path, data in (("/state", None), ("/ws", None)):
            request = urllib.request.Request(
                base + path, data=data, headers={"Cookie": f"hud_console={token}"}
            )
            try:
                with urllib.request.urlopen(request, timeout=WAIT) as response:
                    status = response.status
            except urllib.error.HTTPError as error:
                status = error.code
            assert status == 403, path
    finally:
        other.shutdown()
        other.server_close()
        console.close()


def test_the_gate_shows_its_reference_image(browser: Browser, tmp_path: Path) -> None:
    """A gate with a reference image: the page shows it (re-encoded, only that file); a
    file that is not an image is answered as absent, never served as it is."""
    from PIL import Image

    picture = tmp_path / "scene.png"
    Image.fromarray(np.full((40, 40, 3), (0, 200, 0), np.uint8)).save(picture)
    bogus = tmp_path / "secret.txt"
    bogus.write_text("not an image")
    console = WebOperator()
    try:
        browser.get(console.url)
        gate = Gate("cam/push", "as the reference shows", "push it", number=1, image=str(picture))
        asked = Asker(lambda: console.gate(gate))
        until(browser, lambda: shown(browser, "reference-box"), "the reference image")
        base, _, query = console.url.partition("?")
        with urllib.request.urlopen(f"{base.rstrip('/')}/reference.jpg?{query}", timeout=WAIT) as r:
            assert r.headers["Content-Type"] == "image/jpeg"
            assert r.read()[:2] == b"\xff\xd8"
        click(browser, "start")
        assert asked.result() == "go"
        other = Gate("cam/push", "", "push it", number=2, image=str(bogus))
        asked = Asker(lambda: console.gate(other))
        until(browser, lambda: element_text(browser, "title") == "Episode 2", "the next gate")
        status, body = http(f"{base.rstrip('/')}/reference.jpg?{query}")
        assert status == 404 and "not an image" not in body
        click(browser, "start")
        assert asked.result() == "go"
    finally:
        console.close()


# -- fuzzing the request parser over HTTP (issue 52) ------------------------------------------
FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
#: what the console may answer a request with: never 500, never a traceback
ANSWERS = {200, 400, 403, 404, 409, 410, 411, 413, 414, 426, 431, 501, 503, 505}
TOKEN = "{TOKEN}"  # replaced by the console's own in some requests


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[WebOperator]:
    console = WebOperator()
    try:
        yield console
    finally:
        console.close()


_text = st.text(st.characters(codec="latin-1"), max_size=40)
_bodies = st.one_of(
    st.binary(max_size=512),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    ).map(lambda value: json.dumps(value).encode()),
    st.integers(1, 5000).map(lambda n: b'{"seq": ' + b"[" * n + b"]" * n + b"}"),
)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    """A request as a browser or a stranger might send it: a method, a path (with the
    console's token or not), a version, headers, a Content-Length true or not, a body; or
    bytes of any kind."""
    if draw(st.integers(0, 5)) == 0:
        return draw(st.binary(max_size=1024))
    method = draw(st.one_of(st.sampled_from(["GET", "POST", "HEAD", "PUT", "OPTIONS"]), _text))
    path = draw(
        st.one_of(
            st.sampled_from(["/", "/state", "/answer", "/frame/front.jpg", "/reference.jpg"]),
            st.sampled_from(["//[", "/frame/%2e%2e/.jpg", "/%00", "/?token=&token="]),
            _text,
        )
    )
    if draw(st.booleans()):
        path += ("&" if "?" in path else "?") + f"token={TOKEN}"
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "", "HTTP/x"]))
    body = draw(_bodies)
    length = draw(st.one_of(st.just(str(len(body))), _text, st.integers(-5, 10**9).map(str)))
    headers = draw(st.lists(st.tuples(_text, _text), max_size=4))
    head = f"{method} {path} {version}".rstrip() + "\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in [*headers, ("Content-Length", length)])
    return (head + "\r\n").encode("latin-1") + body


@FUZZ
@given(raw=requests())
@example(raw=b" //[ HTTP/1.1\r\nContent-Length: 0\r\n\r\n")  # urlsplit raised: a 500
@example(raw=b"GET /state?token={TOKEN} HTTP/1.1\r\nUpgrade: a\r\nUpgrade: b\r\n\r\n")
def test_any_request_gets_one_answer_and_the_operator_is_still_served(
    fuzzed: WebOperator, raw: bytes
) -> None:
    """Whatever arrives, the console answers with a status it documents (never 500, never a
    traceback) or hangs up, and the operator's next request is served."""
    token = fuzzed.url.split("token=", 1)[1]
    parts = urlsplit(fuzzed.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=WAIT) as connection:
        with contextlib.suppress(OSError):  # it may answer and hang up before all is sent
            connection.sendall(raw.replace(TOKEN.encode(), token.encode()))
            connection.shutdown(socket.SHUT_WR)
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := connection.recv(65536):
                answer += chunk
    assert b"Traceback" not in answer
    if answer.startswith(b"HTTP/"):
        status = int(answer.split(b" ", 2)[1])
        assert status in ANSWERS, answer[:200]
    assert _state(fuzzed.url) is not None


# -- fuzzing the answers a page sends over its WebSocket (issue 52) ---------------------------
class Questions:
    """A console that always has a question up, each kind in turn (the gate, the running
    episode, the verdict, a robot fault), the next one put up once the last is answered,
    until ``done``: what the plugin's thread does, so every answer meets a live phase."""

    def __init__(self, console: WebOperator) -> None:
        self.console, self.done = console, threading.Event()
        self.thread = threading.Thread(target=self._ask, daemon=True)
        self.thread.start()

    def _ask(self) -> None:
        gate = Gate("line/reach", "cup left", "reach it", arm="K", number=1)
        while not self.done.is_set():
            self.console.gate(gate)
            episode = Episode(gate)
            leave = self.console.watch(episode)
            while not (episode.stop.wait(0.5) or self.done.is_set()):
                pass  # running until a page stops it or grades it
            leave()
            try:
                if episode.early is None:  # graded during the episode: no question follows
                    self.console.verdict(Ask(gate, 3, stopped=True))
            except ConsoleClosed:
                return
            self.console.fault("motor 3 overheated", gate)


@pytest.fixture(scope="module")
def asking() -> Iterator[WebOperator]:
    console = WebOperator()
    questions = Questions(console)
    try:
        yield console
    finally:
        questions.done.set()
        console.close()
        questions.thread.join(timeout=WAIT)


SEQ = "{SEQ}"  # replaced by the seq of the question the page shows now
_any = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
_actions = st.sampled_from(sorted({a for taken in ACTIONS.values() for a in taken}))


def _mostly(strategy: st.SearchStrategy[object], other: st.SearchStrategy[object]) -> Any:
    """``strategy`` in about three draws of four, else ``other``."""
    return st.integers(0, 3).flatmap(lambda n: other if n == 0 else strategy)


_answers = st.fixed_dictionaries(
    {  # mostly to the question up, with an action some phase takes: the phases' own checks
        "seq": _mostly(st.just(SEQ), _any),
        "action": _mostly(_actions, _any),
    },
    optional={
        "score": st.one_of(_any, st.sampled_from(["0.5", "1e400", "nan", "-0", " 1 "])),
        "notes": st.one_of(_any, st.lists(_any, max_size=3), st.text(max_size=1200)),
        "text": st.one_of(_any, st.text(max_size=1200), st.just(" \n\t ")),
    },
)
_messages = _mostly(
    _answers,
    st.one_of(
        st.text(max_size=300),
        st.binary(max_size=300),
        st.recursive(_any, lambda inner: st.lists(inner, max_size=3), max_leaves=8).map(json.dumps),
        st.integers(1, 3000).map(lambda n: '{"seq": ' + "[" * n + "]" * n + "}"),
    ),
)


#: answers that leave the question up (every other one that is taken ends it)
KEEPS = ("instruct", "hold")


def _next_question(ws: object, answered: int) -> int:
    """The seq of the first question the page is shown after question ``answered``."""
    for got in messages(ws):
        state = got.get("state")
        if isinstance(state, dict) and state["phase"] != "idle" and state["seq"] > answered:
            return int(state["seq"])
    raise AssertionError("unreachable: messages() waits at most WAIT for each")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(sent=st.lists(_messages, min_size=1, max_size=8))
@example(  # every phase in turn: gate, running (an instruction, then graded), gate, verdict, fault
    sent=[
        {"seq": SEQ, "action": "go"},
        {"seq": SEQ, "action": "instruct", "text": "\x1b]2;x\x07 left"},
        {"seq": SEQ, "action": "partial", "score": "0.5"},
        {"seq": SEQ, "action": "go"},
        {"seq": SEQ, "action": "stop"},
        {"seq": SEQ, "action": "partial", "score": "1e400", "notes": ["x"]},
        {"seq": SEQ, "action": "accept"},
        {"seq": SEQ, "action": "discard"},
        {"seq": SEQ, "action": "retry"},
    ]
)
def test_any_message_from_a_page_gets_one_reply_and_the_page_stays(
    asking: WebOperator, sent: list[object]
) -> None:
    """Whatever a page with the token sends over its WebSocket (an answer to the question
    up or to another, with any fields, or any text, bytes or nesting), the console replies
    to each message once, with what it did or one error line of a documented status,
    and the page's connection stays open for the next."""
    from websockets.sync.client import connect

    with connect(ws_url(asking.url), open_timeout=WAIT) as ws:
        seq = _next_question(ws, -1)
        for message in sent:
            action = message.get("action") if isinstance(message, dict) else None
            if isinstance(message, dict):
                message = json.dumps({k: seq if v == SEQ else v for k, v in message.items()})
            ws.send(message)  # type: ignore[arg-type]
            reply = next(m for m in messages(ws) if "reply" in m)["reply"]
            assert isinstance(reply, dict), reply
            if reply.get("ok") is True:
                assert isinstance(reply["said"], str) and "\n" not in reply["said"]
                if action not in KEEPS:  # answered: wait for the next question, as a person
                    seq = _next_question(ws, seq)
            else:
                assert reply["status"] in (400, 409, 410), reply
                error = reply["error"]
                assert isinstance(error, str) and "\n" not in error, reply
                assert "Traceback" not in error
    assert _state(asking.url) is not None


def key(browser: Browser, name: str) -> None:
    """A key pressed on the page (not in a field)."""
    event = f"new KeyboardEvent('keydown', {{key: {name!r}, bubbles: true}})"
    browser.js(f"document.body.dispatchEvent({event})")


def test_the_page_takes_keys_instructions_and_a_verdict_during_the_episode(
    browser: Browser,
) -> None:
    """Keys at every screen (Enter starts, y grades during the episode, h holds the
    detector's countdown, Enter accepts it), an instruction sent from the page reaches the
    episode, the progress and budget in the header, and the summary at the end."""
    from pytest_hud.features.robots.operator import Summary

    console = WebOperator()
    try:
        browser.get(console.url)
        until(browser, lambda: "waiting for the first episode" in page_text(browser), "the page")
        gate = Gate("cam/push", "block left", "push it", number=1, planned=3, budget="0:30 left")
        asked = Asker(lambda: console.gate(gate))
        until(browser, lambda: shown(browser, "gate"), "the gate")
        assert element_text(browser, "progress") == "episode 1 of 3 · budget 0:30 left"
        key(browser, "Enter")
        assert asked.result() == "go"

        episode = Episode(gate)
        close = console.watch(episode)
        until(browser, lambda: shown(browser, "run"), "the running episode")
        type_into(browser, "instruction", "push it gently")
        click(browser, "instruct")
        until(browser, lambda: episode.current() == "push it gently", "the instruction")
        until(browser, lambda: "push it gently" in element_text(browser, "told"), "it shown")
        key(browser, "y")
        until(browser, lambda: episode.stop.is_set(), "the verdict during the episode")
        assert episode.early == Verdict(1.0)
        close()

        ask = Ask(gate, 9, detector=True, accept_after=60.0)
        asked = Asker(lambda: console.verdict(ask))
        until(browser, lambda: shown(browser, "countdown-box"), "the countdown")
        key(browser, "h")
        until(browser, lambda: not shown(browser, "countdown-box"), "the countdown held")
        type_into(browser, "notes", "slid a little")
        key(browser, "Enter")
        assert asked.result() == Verdict(1.0, "slid a little")

        console.summary(Summary(["session ended: 1 graded, 0 errors, 0 not run"]))
        until(browser, lambda: shown(browser, "summary"), "the summary")
        assert "session ended: 1 graded" in element_text(browser, "summary-lines")
    finally:
        console.close()
