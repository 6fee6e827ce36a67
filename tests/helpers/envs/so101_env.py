"""Env module for the robot tests: the physics SO-101 (tests/helpers/lerobot_robot_so101_sim)
served as a real robot through LeRobot's factory. Variants come from the environment, so
one module serves every test: SO101_LOG (the robot's lifecycle file), SO101_FAULT_AT (a
motor error at that step), SO101_DETECTOR=0 (no success detector: the operator grades),
SO101_LIMITS=1 (a tight clamp and max move), SO101_FPS, SO101_CAMERA=1 (its front camera),
SO101_CONNECT_DELAY (seconds the arm takes to connect), SO101_EPISODE_SECONDS (an
episode's time limit; unset: the bridge's default, "none": no limit)."""

import os

from pytest_hud import Environment

detect = os.environ.get("SO101_DETECTOR", "1") == "1"
fault = os.environ.get("SO101_FAULT_AT")
tight = os.environ.get("SO101_LIMITS") == "1"
seconds = os.environ.get("SO101_EPISODE_SECONDS")
limit = (
    {} if seconds is None else {"episode_seconds": None if seconds == "none" else float(seconds)}
)

env = Environment("so101")
arm = env.lerobot_robot(
    "so101_sim",
    fps=float(os.environ.get("SO101_FPS", "10")),
    prompt="reach the cube and close the jaw",
    detector="lerobot_robot_so101_sim:reached" if detect else None,
    limits={"delta_x": (-0.5, 0.5), "delta_y": (-0.5, 0.5)} if tight else None,
    max_step={"delta_z": 0.25} if tight else None,
    log=os.environ.get("SO101_LOG"),
    fault_at=int(fault) if fault else None,
    camera=os.environ.get("SO101_CAMERA") == "1",
    connect_delay=float(os.environ.get("SO101_CONNECT_DELAY", "0")),
    **limit,
)


@env.template()
async def reach(seed: int = 0, setup: str = "cube at a random spot on the mat"):
    ep = await arm.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await arm.result(token=ep["token"])
