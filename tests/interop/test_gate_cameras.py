"""The reset gate's live camera on the physics SO-101 (plugins/lerobot_robot_so101_sim, its 128x128
front camera rendered by MuJoCo; the robot hardware is the one stand-in): the env server's
``cameras`` control method reaches the robot bridge in the robot's own process, which reads
the cameras while no episode holds the robot, claiming no slot. Before the first episode it
connects the robot and shows the scene the episode then starts from; during an episode it
refuses (the episode's agent reads the robot); after it, it shows the scene the episode left,
which is the last frame its agent saw."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from so101_robot import SO101, so101_robot_env

from pytest_hud import LocalRuntime, Task
from pytest_hud.robot import RobotClient
from pytest_hud.robot.sim.cameras import MAX_SIDE, decode_frames, encode_frames
from pytest_hud.runtime.control import ControlClient, Run

pytestmark = pytest.mark.lerobot

HERE = Path(__file__).resolve().parents[1] / "helpers"
FRONT = "observation/images/front"


@pytest.fixture(autouse=True)
def _robot_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    # SO101_DETECTOR=0: the episode runs its steps, not to success
    return so101_robot_env(monkeypatch, tmp_path, SO101_CAMERA="1", SO101_DETECTOR="0")


async def drive(run: Run, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """An agent that moves the arm sideways and down for ``steps`` ticks (a fixed action:
    no policy to import): the first and the last frames of the front camera it saw (the
    last is the scene it leaves)."""
    client = await RobotClient.connect(run.robot, token=run.robot_token)
    try:
        obs = await client.get_observation()
        first = np.asarray(obs["data"][FRONT])
        for _ in range(steps):
            obs = await client.step(np.array([0.5, 0.5, -0.5, 0.0], np.float32))
        return first, np.asarray(obs["data"][FRONT])
    finally:
        await client.close()


def as_sent(frame: np.ndarray) -> np.ndarray:
    """``frame`` as the cameras read sends it (a JPEG, decoded): the same Pillow encodes it
    the same way, so the robot's current frame and the read compare equal."""
    return decode_frames(encode_frames({"front": frame}))["front"]


def test_the_bridge_reads_the_robots_camera_between_episodes(_robot_env: Path) -> None:
    task = Task("so101", "reach", {"seed": 0})

    async def session() -> tuple[dict, dict, np.ndarray, np.ndarray, dict]:
        async with LocalRuntime(SO101)(task) as runtime:
            control = await ControlClient.connect(runtime)
            try:
                before = await control.cameras("so101")  # no episode yet: connects the robot
                run = await control.start(task)
                held = await control.cameras("so101")
                first, last = await drive(run, steps=3)
                await control.result(run)
                after = await control.cameras("so101")
            finally:
                await control.close()
        return before, held, first, last, after

    before, held, first, last, after = asyncio.run(session())
    # the robot was connected by the gate's read, once; the episode reused the connection
    words = [w for w in _robot_env.read_text().split() if "=" not in w]
    assert words[:1] == ["connect"] and words.count("connect") == 1, words

    seen = decode_frames(before["cameras"])
    assert list(seen) == ["front"] and seen["front"].shape == (128, 128, 3)
    assert max(seen["front"].shape) <= MAX_SIDE
    # while the episode runs its agent reads the robot: the gate's read is refused, no slot taken
    assert held == {"cameras": None, "why": "an episode holds the robot"}

    now = decode_frames(after["cameras"])["front"]
    assert not np.array_equal(first, last), "the arm did not move in the camera's view"
    # before the episode: the scene it then started from; after it: the scene it left
    assert np.array_equal(seen["front"], as_sent(first))
    assert np.array_equal(now, as_sent(last))
    assert not np.array_equal(now, seen["front"])


def test_an_env_without_a_robot_and_a_sim_without_a_camera_read_say_so() -> None:
    """The gate is told why it has no live view: an env serving no robot; a sim bridge that
    is not read between episodes (RobotBridge.camera_frames left to its default)."""
    counter = HERE / "envs" / "counter_env.py"
    task = Task("counter", "count", {})

    async def ask() -> dict:
        async with LocalRuntime(counter)(task) as runtime:
            control = await ControlClient.connect(runtime)
            try:
                return await control.cameras("counter")
            finally:
                await control.close()

    said = asyncio.run(ask())
    assert said["cameras"] is None and said["why"], said
