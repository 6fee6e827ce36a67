"""Env module for the interrupt tests: a rollout that waits until interrupted."""

import asyncio
import os
import pathlib

from pytest_hud import Environment

env = Environment("hang")
pole = env.gym("CartPole-v1")


@env.template()
async def wait(n: int = 0):
    ep = await pole.reset(seed=n)
    if os.environ.get("HANG_DIR"):  # the local runtime: tell the test it started
        pathlib.Path(os.environ["HANG_DIR"], f"started-{n}").write_text(str(os.getpid()))
    await asyncio.sleep(600)  # the session is interrupted long before this ends
    yield {"prompt": "never", "robot": {"token": ep["token"]}}
    yield {"score": 0}
