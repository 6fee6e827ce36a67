"""Booting ahead of the agent (issue 18): the session starts the first items' substrates
before it loads the agent, so the boots run while torch and the policy load.

Real pytest runs (pytester, in subprocesses). The sim writes a marker when it is built
(that is, when a substrate boots); the agent's factory waits for that marker before it
returns (bounded at 60 s) and records whether it came. Without booting ahead, no
substrate boots until the agent exists, so the factory would wait out its bound.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ENV = '''
import os
import uuid
from pathlib import Path

import numpy as np
from pytest_hud import Environment
from pytest_hud.robot import RobotBridge, RobotEndpoint


class MarkedSim(RobotBridge):
    """Two ticks; writes a marker (named for its xdist worker) when it is built."""

    num_envs = 2
    contract = {"control_rate": 20, "features": {
        "observation/state": {"role": "observation", "shape": [1]},
        "action": {"role": "action", "shape": [1], "stats": {"min": [-1], "max": [1]}}}}

    def __init__(self):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        marks = Path(os.environ["MARK_DIR"])
        (marks / f"booted-{worker}-{uuid.uuid4().hex[:8]}").write_text(str(os.getpid()))
        self.t = np.zeros(2, int)

    def can_reset_slot(self):
        return True

    def reset(self, seed=0):
        self.t[:] = 0
        return "tick"

    def reset_slot(self, index, seed=0):
        self.t[index] = 0
        return "tick"

    def step(self, actions):
        self.t += 1

    def get_observation(self):
        return {"observation/state": self.t[:, None].astype(np.float32)}, self.t >= 2

    def result_slots(self):
        return [{"score": 1.0, "success": True, "steps": int(t)} for t in self.t]


env = Environment("marked")
sim = RobotEndpoint(MarkedSim)
env.add_capability(sim)


@env.template()
async def tick(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
'''

AGENTS = '''
import json, os, time
from pathlib import Path
from pytest_hud.robot import RobotAgent, ZeroModel


def slow_to_load():
    """Loads 'until a substrate has booted' (at most 240 s: a subprocess env server's boot
    on a loaded machine), as torch and a policy take seconds; records whether one had."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    marks = Path(os.environ["MARK_DIR"])
    deadline = time.monotonic() + 240
    while not list(marks.glob(f"booted-{worker}-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = bool(list(marks.glob(f"booted-{worker}-*")))
    (marks / f"agent-{worker}.json").write_text(json.dumps({"booted_before_loaded": seen}))
    return RobotAgent(ZeroModel(), name="slow")
'''

TESTS = """
import pytest
from marked_env import tick


@pytest.mark.hud(tasks=[tick.task(seed=s) for s in range(4)])
def test_tick(hud_result):
    assert hud_result.success
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(marked_env=ENV, my_agents=AGENTS, test_marked=TESTS)
    pytester.makeconftest("import marked_env  # noqa: F401\n")
    monkeypatch.setenv("MARK_DIR", str(pytester.path))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this run's own workers set it
    return pytester


def loaded_after_a_boot(path: Path) -> dict[str, bool]:
    return {
        p.stem.removeprefix("agent-"): json.loads(p.read_text())["booted_before_loaded"]
        for p in path.glob("agent-*.json")
    }


@pytest.mark.parametrize(
    "args",
    [
        ["--hud-shared=2", "--hud-concurrency=2"],  # Shared: the first row's substrate
        ["--hud-runtime=subprocess", "--hud-concurrency=2"],  # the warm pool's first rows
    ],
    ids=["shared", "warm-pool"],
)
def test_the_first_substrates_boot_while_the_agent_loads(suite, args) -> None:
    result = suite.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--hud-agent=my_agents:slow_to_load",
        *args, timeout=900,
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    assert loaded_after_a_boot(suite.path) == {"main": True}


def test_each_xdist_worker_boots_its_first_substrates_before_it_loads_the_agent(suite) -> None:
    """With a copy of the agent per worker (a model shared by the workers is loaded by the
    controller's model server before they start: tests/plugin/test_model_servers.py)."""
    result = suite.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2",
        "--hud-agent=my_agents:slow_to_load", "--hud-runtime=subprocess",
        "--hud-model-placement=worker", timeout=900,
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    loaded = loaded_after_a_boot(suite.path)
    assert loaded and all(loaded.values()), loaded
