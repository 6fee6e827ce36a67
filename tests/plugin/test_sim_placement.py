"""Where an env module's sim runs (``serve_inline``, ``--hud-sim-process``): in the env
server's process unless the module or the session asks for a process of its own, through
pytest with the local runtime (the env server is the pytest process)."""

from __future__ import annotations

import json

import pytest

from pytest_hud import Environment
from pytest_hud.robot.sim.endpoint import SIM_PROCESS_ENV

ENV = """
import json, os
from pytest_hud import Environment

env = Environment("placement")
sim = env.gym("CartPole-v1")
apart = env.gym("CartPole-v1", name="apart", inline=False)

@env.template()
async def episode(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    grade = await sim.result(token=ep["token"])
    with open(os.environ["PLACEMENT_OUT"], "w") as out:
        json.dump({"pid": os.getpid(), "sim_pid": sim.pid, "inline": sim.inline,
                   "apart_inline": apart.inline}, out)
    yield {**grade, "success": True}
"""

TESTS = """
import pytest
from placement_env import episode

@pytest.mark.hud(tasks=[episode.task(seed=3)])
def test_episode(hud_result):
    assert hud_result.steps == 4
"""


def placement(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str
) -> dict[str, object]:
    pytester.makepyfile(placement_env=ENV, test_placement=TESTS)
    out = pytester.path / "placement.json"
    monkeypatch.setenv("PLACEMENT_OUT", str(out))
    monkeypatch.delenv(SIM_PROCESS_ENV, raising=False)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--hud-agent=random", "--hud-max-steps=4", *args, timeout=240
    )
    assert result.ret == 0, result.stdout.str()
    return dict(json.loads(out.read_text()))


def test_a_sim_runs_in_the_env_servers_process_by_default(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = placement(pytester, monkeypatch)
    assert seen["inline"] is True and seen["sim_pid"] is None  # the pytest process's loop
    assert seen["apart_inline"] is False  # inline=False in the module keeps its process


def test_hud_sim_process_gives_each_open_sim_a_process(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = placement(pytester, monkeypatch, "--hud-sim-process")
    assert seen["inline"] is False
    assert isinstance(seen["sim_pid"], int) and seen["sim_pid"] != seen["pid"]


def test_the_module_wins_over_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SIM_PROCESS_ENV, "1")
    env = Environment("placement-choices")
    assert not env.gym("CartPole-v1").inline  # left open: the session's sim process
    assert env.gym("CartPole-v1", name="forced", inline=True).inline
    monkeypatch.delenv(SIM_PROCESS_ENV)
    assert env.gym("CartPole-v1", name="open").inline
    assert not env.gym("CartPole-v1", name="apart", inline=False).inline
