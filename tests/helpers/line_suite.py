"""The plugin's test suite env: a line the agent walks along (``line_env``), agents
over it, and the way the plugin tests run pytest (a subprocess per run).

The built-in ``zero`` agent succeeds exactly when a row's ``goal <= 0``.
"""

from __future__ import annotations

import pytest

ENV = '''
import numpy as np
from pytest_hud import Environment
from pytest_hud.robot import RobotBridge, RobotEndpoint


class LineSim(RobotBridge):
    """Walk along a line for ``length`` ticks; success when the distance reaches goal."""

    num_envs = 4
    contract = {"control_rate": 20, "features": {
        "observation/state": {"role": "observation", "shape": [1]},
        "action": {"role": "action", "shape": [1], "stats": {"min": [-1], "max": [1]}}}}

    def __init__(self):
        self.pos = np.zeros(4)
        self.t = np.zeros(4, int)
        self.goal = np.zeros(4)

    def can_reset_slot(self):
        return True

    def reset(self, goal=0.0, length=3, seed=0):
        self.pos[:] = 0
        self.t[:] = 0
        self.goal[:] = goal
        self.length = length
        return f"reach {goal}"

    def reset_slot(self, index, goal=0.0, length=3, seed=0):
        self.pos[index] = 0
        self.t[index] = 0
        self.goal[index] = goal
        return f"reach {goal}"

    def step(self, actions):
        live = self.t < self.length
        self.pos += np.where(live, actions[:, 0], 0)
        self.t += live

    def get_observation(self):
        return {"observation/state": self.pos[:, None].astype(np.float32)}, self.t >= self.length

    def result_slots(self):
        return [{"score": float(self.pos[i] >= self.goal[i]),
                 "success": bool(self.pos[i] >= self.goal[i]),
                 "total_reward": float(self.pos[i]), "steps": int(self.t[i])}
                for i in range(4)]


env = Environment("line")
sim = RobotEndpoint(LineSim)
env.add_capability(sim)


@env.template()
async def reach(goal: float = 0.0, seed: int = 0):
    ep = await sim.reset(goal=goal, seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    grade = await sim.result(token=ep["token"])
    grade["seed"] = seed
    yield grade


@env.template()
async def detected(goal: float = 0.0, seed: int = 0):
    """reach, graded by the env as a success detector would be (definitive)."""
    ep = await sim.reset(goal=goal, seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    grade = await sim.result(token=ep["token"])
    grade["grade_source"] = "detector"
    yield grade


@env.template()
async def broken(seed: int = 0):
    raise RuntimeError("the env server could not set up this task")
    yield {"prompt": "never"}
'''

AGENTS = '''
import json, os
from pytest_hud.robot import RobotAgent, ZeroModel

LIVE = {"now": 0, "peak": 0}


class CountingAgent(RobotAgent):
    """zero, and it writes the peak number of concurrent episodes to peak.json."""

    async def run_episode(self, *args, **kwargs):
        LIVE["now"] += 1
        LIVE["peak"] = max(LIVE["peak"], LIVE["now"])
        try:
            return await super().run_episode(*args, **kwargs)
        finally:
            LIVE["now"] -= 1
            with open(os.path.join(os.environ["PEAK_DIR"], f"peak-{os.getpid()}.json"), "w") as f:
                json.dump(LIVE["peak"], f)


def counting():
    return CountingAgent(ZeroModel(), name="counting")
'''

TESTS = """
import pytest
from line_env import reach, broken


@pytest.mark.hud(tasks=[reach.task(goal=0.0, seed=1), reach.task(goal=5.0, seed=2)])
def test_reach(hud_result):
    assert hud_result.success, hud_result.summary()


@pytest.mark.hud(tasks=[broken.task()])
def test_broken(hud_result):
    pass
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=240)


#: ``my_agents:backwards``: always steps back, so it fails every goal above 0
BACKWARDS_AGENTS = """
import numpy as np
from pytest_hud.robot import RobotAgent, ZeroModel


class Backwards(ZeroModel):
    def infer(self, batch):
        return np.clip(np.full_like(super().infer(batch), -1.0), self.low, self.high)


def backwards():
    return RobotAgent(Backwards(), name="backwards")
"""


def make_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """line_env and my_agents in the pytester dir, imported by its conftest; agent zero."""
    pytester.makepyfile(line_env=ENV, my_agents=AGENTS)
    pytester.makeconftest("import line_env  # noqa: F401\n")
    pytester.makeini("[pytest]\nhud_agent = zero\n")
    return pytester


#: ``my_agents:forward`` (always steps forward: succeeds every goal up to the episode's 3
#: ticks, so it beats ``zero`` on goals in (0, 3]) and ``my_agents:backwards``
AB_AGENTS = (
    BACKWARDS_AGENTS
    + """

class Forward(ZeroModel):
    def infer(self, batch):
        return np.clip(np.full_like(super().infer(batch), 1.0), self.low, self.high)


def forward():
    return RobotAgent(Forward(), name="forward")
"""
)
