"""Env module for placement tests: a vectorized counter sim and plain templates."""

import asyncio
import os

from sims import SlotResetCounterSim

from pytest_hud import Environment
from pytest_hud.robot import RobotEndpoint

env = Environment("counter")
sim = RobotEndpoint(SlotResetCounterSim, kwargs={"num_envs": 4, "length": 3})
env.add_capability(sim)
EVENTS: list[str] = []


@env.template()
async def count(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])


@env.template()
async def cleanup_probe(tag: str = "x"):
    """Records its cleanup so a test can see a dropped session ran it."""
    try:
        yield {"prompt": f"probe {tag}"}
        yield {"score": 1.0, "success": True}
    finally:
        EVENTS.append(f"cleanup {tag}")


@env.template()
async def no_grade():
    yield {"prompt": "only one yield"}


@env.template()
async def bad_prompt():
    yield 42
    yield {"score": 0}


@env.template()
async def pid():
    yield {"prompt": str(os.getpid())}
    yield {"score": 1.0, "success": True, "pid": os.getpid()}


@env.template()
async def slow(seconds: float = 30.0):
    yield {"prompt": "slow"}
    await asyncio.sleep(seconds)
    yield {"score": 1.0}


TASKS = [count.task(seed=s) for s in range(4)]
