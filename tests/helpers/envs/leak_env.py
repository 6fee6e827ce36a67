"""Env module for the isolation test: counts, in module-global state, the template runs
its env server saw; its sim (CountingSim) counts constructions and resets per process."""

from sims import CountingSim

from pytest_hud import Environment
from pytest_hud.robot import RobotEndpoint

env = Environment("leak")
sim = env.add_capability(RobotEndpoint(CountingSim, kwargs={"length": 2}))
RUNS = 0


@env.template()
async def count(seed: int = 0):
    global RUNS
    RUNS += 1
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield {**await sim.result(token=ep["token"]), "server_runs": RUNS}
