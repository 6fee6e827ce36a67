"""Env module for the timed-loop tests: a counter sim long enough for chunks to overlap; its
image's first pixel is the tick, so a model can say which tick each action is meant for."""

from sims import CounterSim

from pytest_hud import Environment
from pytest_hud.robot import RobotEndpoint

env = Environment("ticks")
sim = RobotEndpoint(CounterSim, kwargs={"num_envs": 1, "length": 40, "target": 1e9})
env.add_capability(sim)


@env.template()
async def count(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
