"""The web console's reset gate shows the robot's camera live (issue 55), in a real headless
Chromium (tests/helpers/browser.py): while the gate waits, the session reads the robot's
cameras through its env server a few times a second (the bridge's ``cameras`` control
method, no episode slot claimed) and the page shows the frames, which change as the scene
does; once the operator starts the episode the reads stop. Where a read fails, the gate falls
back to its reference image (the first frame an earlier episode of the row saw) and says
which it shows.

The robot is a one-slot sim whose camera draws the number of reads so far (each read is a
new frame, as a person moving the scene makes one) and records that number in a file; after
its first episode its camera is unplugged (every read raises). Every wait is on the page or
an event, bounded by a generous timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser import WAIT, Browser, click, element_text, page_text, shown, until
from waiting import wait_for

from pytest_hud.features.robots.web import URL_FILE_ENV

ENV = '''
import os
import time
from pathlib import Path

import numpy as np
from pytest_hud import Environment
from pytest_hud.robot import RobotBridge, RobotEndpoint

SIZE = 64


class GateCameraSim(RobotBridge):
    """A camera whose frame, read between episodes, shows how many reads there were (a bar
    that grows); after the first episode it is unplugged."""

    num_envs = 1
    contract = {"control_rate": 20, "features": {
        "observation/state": {"role": "observation", "shape": [1]},
        "observation/images/front": {"role": "observation", "type": "rgb",
                                     "shape": [SIZE, SIZE, 3]},
        "action": {"role": "action", "shape": [1], "stats": {"min": [-1], "max": [1]}}}}

    def __init__(self):
        self.t = self.length = self.reads = self.episodes = 0

    def frame(self, n):
        image = np.zeros((SIZE, SIZE, 3), np.uint8)
        image[:, :, 2] = 90
        image[20:44, : 4 + (n * 3) % (SIZE - 4)] = (250, 200, 40)
        return image

    def camera_frames(self):
        if os.environ.get("GATE_NO_CAMERA") == "1":
            return {}
        if self.episodes:
            raise RuntimeError("the front camera is unplugged")
        self.reads += 1
        Path(os.environ["GATE_READS"]).write_text(str(self.reads))
        return {"front": self.frame(self.reads)}

    def reset(self, length=20):
        self.t, self.length = 0, length
        self.episodes += 1
        return "hold still"

    def step(self, actions):
        time.sleep(1 / 20)
        self.t += 1

    def get_observation(self):
        data = {"observation/state": np.array([[self.t]], np.float32),
                "observation/images/front": self.frame(1000 + self.t)[None]}
        return data, np.array([self.t >= self.length])

    def result_slots(self):
        return [{"score": 0.0, "success": False, "steps": int(self.t)}]


env = Environment("gatecam")
sim = RobotEndpoint(GateCameraSim)
env.add_capability(sim)


@env.template()
async def hold(length: int = 20):
    ep = await sim.reset(length=length)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
'''

TESTS = """
import pytest
from gatecam_env import hold


@pytest.mark.hud(tasks=[hold.task(length=20)])
def test_hold(hud_result):
    assert hud_result.success, hud_result.summary()
"""

#: the first camera frame on the page, reduced to a few of its pixels (a frame's fingerprint)
FINGERPRINT = """(() => {
  const img = document.querySelector('#cameras img');
  if (!img || !img.complete || !img.naturalWidth) return null;
  const canvas = document.createElement('canvas');
  canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
  const g = canvas.getContext('2d'); g.drawImage(img, 0, 0);
  const row = g.getImageData(0, Math.floor(canvas.height / 2), canvas.width, 1).data;
  return Array.from(row.filter((_, i) => i % 4 === 0)).map((v) => v > 128 ? 1 : 0).join('');
})()"""


@pytest.fixture
def browser() -> Browser:
    driver = Browser()
    try:
        yield driver
    finally:
        driver.quit()


def reads(path: Path) -> int:
    return int(path.read_text() or 0) if path.exists() else 0


def test_the_gate_shows_the_robots_camera_live_until_the_episode_starts(
    pytester: pytest.Pytester, browser: Browser
) -> None:
    pytester.makepyfile(gatecam_env=ENV, test_gatecam=TESTS)
    url_file, counted = pytester.path / "url.txt", pytester.path / "reads.txt"
    out = pytester.path / "out.txt"
    env = {**os.environ, URL_FILE_ENV: str(url_file), "GATE_READS": str(counted),
           "PYTEST_ADDOPTS": ""}  # fmt: skip
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
               "--hud-operator=web", "--hud-results=r.json", "test_gatecam.py"]  # fmt: skip
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            command, cwd=pytester.path, env=env, stdin=subprocess.DEVNULL, stdout=sink,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        assert wait_for(lambda: url_file.exists() and url_file.read_text().strip(), 120), (
            out.read_text()
        )
        browser.get(url_file.read_text().strip())

        # the first gate: the robot's camera live, its frames changing while it waits
        until(browser, lambda: shown(browser, "gate") and shown(browser, "camera-box"),
              "the gate's live camera")  # fmt: skip
        assert element_text(browser, "gate-camera") == "live: the robot's camera now"
        assert not shown(browser, "reference-box")
        seen: set[str] = set()

        def another_frame() -> bool:
            fingerprint = browser.js(FINGERPRINT)
            if fingerprint:
                seen.add(fingerprint)
            return len(seen) >= 3

        until(browser, another_frame, "three different live frames")
        assert reads(counted) >= 3
        click(browser, "start")

        # the gate closed: the reads stopped before the episode began, and stay stopped
        until(browser, lambda: shown(browser, "run") or shown(browser, "ask"), "the episode")
        stopped_at = reads(counted)
        until(browser, lambda: shown(browser, "ask"), "the verdict")
        assert reads(counted) == stopped_at, "the camera was read after the gate closed"
        click(browser, "discard")

        # the rerun's gate: the camera is unplugged now, so the gate falls back to the
        # row's reference image (the first frame its discarded episode saw) and says so
        until(browser, lambda: shown(browser, "gate") and shown(browser, "reference-box"),
              "the rerun's gate with its reference image")  # fmt: skip
        said = element_text(browser, "gate-camera")
        assert said.startswith("reference: first frame of an earlier episode (no live camera:")
        assert "the front camera is unplugged" in said and "Traceback" not in page_text(browser)
        assert element_text(browser, "reference-said") == said
        assert not shown(browser, "camera-box")
        click(browser, "start")
        until(browser, lambda: shown(browser, "ask"), "the rerun's verdict")
        click(browser, "success")
        until(browser, lambda: shown(browser, "summary"), "the session's summary")
        assert proc.wait(timeout=WAIT) == 0, out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert "Traceback" not in out.read_text()
    (row,) = json.loads((pytester.path / "r.json").read_text())["rollouts"]
    assert row["success"] is True and len(row["discards"]) == 1


WATCHING = """
import json
import os
import threading

from pytest_hud.features.robots import ScriptedOperator


class Watching(ScriptedOperator):
    \"\"\"Says go at each gate once the gate's camera view is known (not 'reading'); keeps
    every view it was given, one JSON line each.\"\"\"

    def __init__(self):
        super().__init__()
        self.known = threading.Event()

    def gate_view(self, view, frames):
        with open(os.environ["GATE_VIEWS"], "a") as out:
            out.write(json.dumps([view.kind, view.said, sorted(frames or {})]) + "\\n")
        if view.kind != "reading":
            self.known.set()

    def gate(self, gate):
        assert self.known.wait(120), "the gate's camera view never came"
        self.known.clear()
        return super().gate(gate)


def make():
    return Watching()
"""


def test_a_robot_without_a_camera_is_said_so_at_the_gate(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The robot answers the gate's read with no camera: the console is told so (after the
    line it shows while the first read is on its way), and the episode runs as before."""
    pytester.makepyfile(gatecam_env=ENV, test_gatecam=TESTS, watching=WATCHING)
    views = pytester.path / "views.jsonl"
    monkeypatch.setenv("GATE_VIEWS", str(views))
    monkeypatch.setenv("GATE_NO_CAMERA", "1")
    monkeypatch.setenv("GATE_READS", str(pytester.path / "reads.txt"))
    paths = [str(pytester.path), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--hud-operator=watching:make", "--hud-override-window=0",
        "--hud-results=r.json", "test_gatecam.py", timeout=300,
    )  # fmt: skip
    said = [json.loads(line) for line in views.read_text().splitlines()]
    assert said == [
        ["reading", "reading the robot's camera …", []],
        ["none", "this robot has no camera", []],
    ], said
    (row,) = json.loads((pytester.path / "r.json").read_text())["rollouts"]
    assert row["steps"] == 20 and row["outcome"] == "failed", result.stdout.str()[-2000:]
