"""Env module for bench/robots.py: the physics SO-101 (tests/helpers/lerobot_robot_so101_sim)
served as a real robot through LeRobot's factory, with its success detector. SO101_FPS sets
the control rate; SO101_CAMERA=1 adds its 128x128 front camera (MuJoCo renders a frame each
step: set MUJOCO_GL=egl or osmesa); SO101_DETECTOR=0 leaves out the success detector (an
episode then runs to the agent's max steps); SO101_LOG names the robot's lifecycle file
(its stop() at an episode's end writes whether the jaw closed at the cube)."""

import os

from pytest_hud import Environment

env = Environment("so101")
arm = env.lerobot_robot(
    "so101_sim",
    fps=float(os.environ.get("SO101_FPS", "30")),
    prompt="reach the cube and close the jaw",
    detector=None if os.environ.get("SO101_DETECTOR") == "0" else "lerobot_robot_so101_sim:reached",
    camera=os.environ.get("SO101_CAMERA") == "1",
    log=os.environ.get("SO101_LOG") or None,
)


@env.template()
async def reach(seed: int = 0, case: str = ""):
    """``case`` names the bench's variant (the agent reads it); the robot ignores it."""
    ep = await arm.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await arm.result(token=ep["token"])
