"""The web console (--hud-operator=web) in a real headless Chromium (over DevTools): through
pytest end to end (the page's gate, Start, the live timer and camera, Stop, a refused then an
accepted partial score with notes, a success; what reaches the results rows), and a console
driven from a thread (the token, the transcript, discard, close() waking a blocked gate).

Chromium is Debian's (scripts/setup installs it), driven over its DevTools protocol
(tests/helpers/browser.py). Every wait is on the page or an event, bounded by a generous
timeout. ``PYTEST_HUD_DOCS_IMAGES=1`` also writes the screenshot the
docs show (docs/images/web-console.png)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
from browser import WAIT, Browser, click, element_text, page_text, shown, type_into, until
from camera_suite import ENV, TESTS
from paths import ROOT
from waiting import wait_for

from pytest_hud.features.robots.operator import Ask, Episode, Gate, GateAnswer, Verdict
from pytest_hud.features.robots.web import MAX_BODY, MAX_CONNECTIONS, URL_FILE_ENV, WebOperator

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
    """Every path, without the token or with a wrong one: 403 and one plain line."""
    base = url.split("?")[0].rstrip("/")
    for path in ("/", "/state", "/frame/observation/images/front.jpg", "/?token=wrong"):
        status, body = http(base + path)
        assert status == 403, (path, status, body)
        assert body.count("\n") == 1 and "Traceback" not in body, body
        assert "forbidden" in body
    status, body = http(base + "/answer", b'{"seq": 1, "action": "go"}')
    assert status == 403 and "Traceback" not in body


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
        assert "episode 1 · cam/push[length=6000]" in text
        assert "task: push" in text
        assert "set up: the orange block at the left edge, gripper open" in text
        assert "Put this row off" in text and "End session" in text
        assert "zero" not in text  # never the agent's name
        click(browser, "start")

        # the running episode: the timer moves, the camera shows, the stop button
        until(browser, lambda: shown(browser, "run"), "the running episode")
        until(browser, lambda: element_text(browser, "timer") not in ("", "00:00.0"), "a timer")
        until(browser, lambda: camera_loaded(browser), "the front camera")
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
                shown(browser, "gate") and "episode 2 · cam/push[length=20]" in page_text(browser)
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
        "task: push it",
        "set up: block left",
        "position the scene, then Start",
        "starting",
        "the episode is running",
        "stopping the episode",
        "episode 1 stopped by you after 7 steps",
        "the env's detector says: success",
        "verdict?",
        "'abc' is not a number between 0 and 1",
        "discarded: the row runs again",
        "episode 2 · cam/push[length=5]",
        "task: push it",
        "position the scene, then Start",
    ]


def test_requests_are_bounded() -> None:
    """At most MAX_CONNECTIONS requests at once (idle ones hold theirs: one more is refused,
    and served once they go); a body past MAX_BODY, or not JSON, gets one line."""
    console = WebOperator()
    base, token = console.url.split("?")
    state = f"{base.rstrip('/')}/state?{token}"

    def refused() -> bool:
        try:
            return http(state)[0] == 503
        except OSError:  # refused before the request was read: the close may reset it
            return True

    try:
        parts = urlsplit(console.url)
        assert parts.hostname == "127.0.0.1" and parts.port
        idle = [
            socket.create_connection((parts.hostname, parts.port)) for _ in range(MAX_CONNECTIONS)
        ]
        try:
            assert wait_for(refused, WAIT)
        finally:
            for connection in idle:
                connection.close()
        assert wait_for(lambda: http(state)[0] == 200, WAIT)
        answer = f"{base.rstrip('/')}/answer?{token}"
        status, body = http(answer, b"x" * (MAX_BODY + 1))
        assert status == 413 and body == f"an answer is at most {MAX_BODY} bytes\n"
        status, body = http(answer, b"not json")
        assert status == 400 and json.loads(body) == {"error": "an answer is a JSON object"}
        status, body = http(answer, b'{"seq": 0, "action": "go"}')
        assert status == 409 and "not an answer to this question" in body  # no question yet
    finally:
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
