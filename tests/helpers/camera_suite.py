"""A suite env with a camera, for the web console's tests: ``camera_env`` (a one-slot sim
whose 96x96 front camera shows a block sliding over a floor, paced at 20 ticks a second so
a person, or a browser, watches it live) and a test file over two rows: a long one (five
minutes, unless the operator stops it) and a short one (one second)."""

from __future__ import annotations

ENV = '''
import time

import numpy as np
from pytest_hud import Environment
from pytest_hud.robot import RobotBridge, RobotEndpoint

SIZE = 96


class CameraSim(RobotBridge):
    """A block slides across the camera's view, one pixel a tick; ``length`` ticks."""

    num_envs = 1
    contract = {"control_rate": 20, "features": {
        "observation/state": {"role": "observation", "shape": [1]},
        "observation/images/front": {"role": "observation", "type": "rgb",
                                     "shape": [SIZE, SIZE, 3]},
        "action": {"role": "action", "shape": [1], "stats": {"min": [-1], "max": [1]}}}}

    def __init__(self):
        self.t = 0
        self.length = 0
        ys, xs = np.mgrid[0:SIZE, 0:SIZE]
        floor = np.stack([30 + xs // 4, 60 + ys // 3, 110 + (xs + ys) // 6], -1)
        floor[(xs % 16 == 0) | (ys % 16 == 0)] = (70, 100, 150)  # a tiled floor
        self.floor = floor.astype(np.uint8)

    def reset(self, length=20, setup=""):
        self.t = 0
        self.length = length
        return "push the orange block to the right"

    def step(self, actions):
        time.sleep(1 / 20)  # live pace: the console's timer and cameras have time to show
        self.t += 1

    def image(self):
        frame = self.floor.copy()
        x = 8 + self.t % (SIZE - 28)
        frame[52:72, x:x + 20] = (240, 140, 30)  # the block
        frame[50:52, x:x + 20] = (255, 200, 120)
        frame[4:8, 4:4 + min(SIZE - 8, self.t % (SIZE - 8))] = (250, 250, 250)  # ticks
        return frame

    def get_observation(self):
        data = {"observation/state": np.array([[self.t]], np.float32),
                "observation/images/front": self.image()[None]}
        return data, np.array([self.t >= self.length])

    def result_slots(self):
        return [{"score": 0.0, "success": False, "steps": int(self.t)}]


env = Environment("cam")
sim = RobotEndpoint(CameraSim)
env.add_capability(sim)


@env.template()
async def push(length: int = 20, setup: str = ""):
    ep = await sim.reset(length=length, setup=setup)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
'''

TESTS = """
import pytest
from camera_env import push

LONG = push.task(length=6000, setup="the orange block at the left edge, gripper open")
SHORT = push.task(length=20, setup="the block where the last episode left it")


@pytest.mark.hud(tasks=[LONG, SHORT])
def test_push(hud_result):
    assert hud_result.success, hud_result.summary()
"""
