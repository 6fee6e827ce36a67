"""``--hud-replay``, end to end on the plugin's line env (real pytest runs, real LeRobot
datasets): episodes recorded with ``--hud-record`` come back as items; the honest stack
passes (env reproduces, policy matches), a negated policy and a changed env are each named,
with and without ``-n 2``; the terminal, the results JSON and the html report carry it."""

from __future__ import annotations

import json
import re

import pytest
from line_suite import ENV, run
from needs import require_lerobot

pytestmark = pytest.mark.lerobot_version

AGENTS = """
import numpy as np
from pytest_hud.robot import Adapter, Model, RobotAgent


class Toward(Model):
    '''Steps less the further along it is: 1 - 0.3 * position.'''

    def infer(self, batch):
        state = np.asarray(batch["observation/state"], np.float32)
        return (1.0 - 0.3 * state)[:, None, :]


class Negated(Adapter):
    def action(self, chunk):
        return -chunk


def toward():
    return RobotAgent(Toward(), name="toward")


def negated():
    return RobotAgent(Toward(), Negated(), name="negated")


async def plain(run):
    '''An agent without a model: nothing to run open loop.'''
    return {}
"""

RECORD = """
import pytest
from line_env import reach

@pytest.mark.hud(tasks=[reach.task(goal=g, seed=s) for s, g in enumerate((1.0, 2.0, 9.0))])
def test_rec(hud_result):
    pass
"""

#: the same env with a 10% stronger step: every replayed episode drifts at its first step
FASTER = """
import pytest
from pytest_hud import LocalRuntime

@pytest.fixture(scope="session")
def hud_provider():
    return LocalRuntime("line_fast.py")
"""


def verdicts(result: pytest.RunResult) -> list[str]:
    """The terminal summary's verdict lines, one per replayed episode."""
    return [line for line in result.outlines if re.match(r"episode \d+: ", line)]


@pytest.fixture
def recorded(pytester: pytest.Pytester) -> pytest.Pytester:
    """Three line episodes recorded with the ``toward`` policy (one fails its goal)."""
    require_lerobot()
    pytester.makepyfile(line_env=ENV, replay_agents=AGENTS, test_rec=RECORD)
    pytester.makepyfile(
        line_fast=ENV.replace(
            "np.where(live, actions[:, 0], 0)", "np.where(live, 1.1 * actions[:, 0], 0)"
        )
    )
    result = run(pytester, "test_rec.py", "--hud-agent=replay_agents:toward", "--hud-record=ds")
    result.assert_outcomes(passed=3)
    return pytester


def test_replay_names_the_env_or_the_policy(recorded: pytest.Pytester) -> None:
    result = run(
        recorded,
        "--hud-replay=ds",
        "--hud-agent=replay_agents:toward",
        "--hud-results=r.json",
        "--html=report.html",
        "-n",
        "2",
    )
    result.assert_outcomes(passed=3)  # the dataset's episodes only: test_rec.py is not run
    assert "hud replay: " in result.stdout.str()
    lines = verdicts(result)
    assert [line.split(":")[0] for line in lines] == ["episode 0", "episode 1", "episode 2"]
    assert all("env reproduces (3 steps, success " in line for line in lines)
    assert all("policy matches (mean error within 1 std on every dim" in line for line in lines)
    doc = json.loads((recorded.path / "r.json").read_text())
    block = doc["replay"]
    assert block["episodes"] == 3 and block["env_reproduces"] == 3 and block["policy_matches"] == 3
    assert block["tolerances"] == {"env": 0.05, "policy": 1.0, "image": 0.1}
    rows = sorted(doc["rollouts"], key=lambda r: r["replay"]["episode"])
    assert [r["args"] for r in rows] == [
        {"goal": g, "seed": s} for s, g in enumerate((1.0, 2.0, 9.0))
    ]
    assert [r["replay"]["env"]["success"] for r in rows] == [
        {"recorded": s, "replayed": s} for s in (True, True, False)
    ]
    assert all(r["replay"]["env"]["max_error"] == 0.0 for r in rows)
    assert all(max(d["mean"] for d in r["replay"]["policy"]["dims"]) == 0.0 for r in rows)
    html = (recorded.path / "report.html").read_text()
    assert "Golden replay: " in html and html.count('class="hud-figure"') == 3

    negated = run(recorded, "--hud-replay=ds", "--hud-agent=replay_agents:negated")
    negated.assert_outcomes(failed=3)
    lines = verdicts(negated)
    assert len(lines) == 3 and all("env reproduces (3 steps" in line for line in lines)
    assert all("policy diverges on dims ['action[0]']" in line for line in lines)
    assert all("action[0] matches when negated: a sign convention" in line for line in lines)
    assert negated.ret == 1

    recorded.makeconftest(FASTER)
    drifted = run(recorded, "--hud-replay=ds", "--hud-agent=replay_agents:toward")
    drifted.assert_outcomes(failed=3)
    lines = verdicts(drifted)
    # the first action (the same in every episode) lands 10% further: step 1 shows it
    assert len(lines) == 3
    assert all("env drifts at step 1 (observation/state past 0.05 std;" in x for x in lines)
    assert all("policy matches" in line for line in lines)  # the policy is not to blame
    env_only = run(recorded, "--hud-replay=ds")
    env_only.assert_outcomes(failed=3)
    assert all("no policy check (no --hud-agent)" in line for line in verdicts(env_only))
    modelless = run(recorded, "--hud-replay=ds", "--hud-agent=replay_agents:plain")
    assert modelless.ret == 4  # before any item
    assert "the policy check runs a RobotAgent's adapter and model" in modelless.stderr.str()


def test_a_folder_that_is_not_a_dataset_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.mkdir("empty")
    result = run(pytester, "--hud-replay=empty")
    assert result.ret == 4
    assert "--hud-replay: expected a LeRobot v3 dataset folder (with meta/info.json)" in (
        result.stderr.str()
    )
    bad = run(pytester, "--hud-replay=empty", "--hud-replay-tolerance=policy=x")
    assert bad.ret == 4
    assert "--hud-replay-tolerance: expected env=STD, policy=STD or image=FRACTION" in (
        bad.stderr.str()
    )
