"""The shipped robosuite suite: its rows, its envs (real robosuite 1.5.1 on MuJoCo, default OSC
controller), ``robosuite-expert`` through the plugin on Lift, Stack, Door and TwoArmLift, and the
fidelity of its episodes against robosuite's own env loop. One seed a task (~50-130 steps each);
the full-size runs are bench/suites.py's."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import numpy as np
import pytest
from needs import require
from own_loops import robosuite_episodes

from pytest_hud import LocalRuntime, Task, Taskset, run
from pytest_hud.robot import RobotAgent, ZeroModel
from pytest_hud.suites.robosuite import tasks as rs_tasks

pytestmark = pytest.mark.suites

MODULE = "pytest_hud.suites.robosuite"


@pytest.fixture(autouse=True)
def _robosuite() -> None:
    require(
        importlib.util.find_spec("robosuite"),
        "robosuite",
        "run scripts/setup --metaworld (pytest-hud[robosuite])",
    )


def rollouts(rows: list[Task], agent: Any) -> list[Any]:
    return asyncio.run(run(rows, agent, LocalRuntime(MODULE), rollout_timeout=300))


def test_rows_and_shipped_files() -> None:
    for path, make in rs_tasks.SUITE_FILES.values():
        assert path.parent.joinpath("__init__.py").exists()
        assert [t.key for t in Taskset.load(path)] == [t.key for t in make()]
    rows = rs_tasks.rows("TwoArmLift", 3)
    assert [t.env for t in rows] == ["robosuite-two-arm-lift"] * 3
    assert rows[2].args == {"seed": 2}
    with pytest.raises(ValueError, match="unknown robosuite task"):
        rs_tasks.rows("NutAssembly")


def test_the_image_is_specified_from_the_suites_module() -> None:
    """``--hud-runtime=docker`` specifies its image from the files that declared the rows'
    Environments: the suite's own module, with its REQUIRES and APT."""
    from pytest_hud.runtime.docker.auto import image_spec
    from pytest_hud.suites import robosuite as suite

    assert {e.declared_in for e in suite.make_environments().values()} == {suite.__file__}
    spec = image_spec([suite.__file__])
    assert list(spec.modules.values()) == [MODULE]
    assert set(suite.REQUIRES) <= set(spec.requires) and set(suite.APT) <= set(spec.apt)


def test_contracts_match_robosuite() -> None:
    """The declared layout is robosuite's: object observables and action size per task."""
    from pytest_hud.suites import robosuite as suite
    from pytest_hud.suites.robosuite.sim import make_env

    for task in ("Lift", "TwoArmLift"):
        env = make_env(task)
        try:
            obs, _ = env.reset(seed=0)
            raw = env.sim._get_observations()
            features = suite.contract(task)["features"]
            assert features["action"]["shape"] == [env.sim.action_dim]
            for key, value in obs.items():
                assert features[key]["shape"] == list(value.shape), (task, key)
            for key, size in rs_tasks.OBJECTS[task]:
                assert np.asarray(raw[key]).size == size, (task, key)
        finally:
            env.close()


def test_a_do_nothing_agent_fails_at_the_cut() -> None:
    (result,) = rollouts(rs_tasks.rows("Door", 1), RobotAgent(ZeroModel(), max_steps=20))
    assert result.error is None, result.error
    assert (result.steps, result.success) == (20, False)
    assert result.prompt == "open the door"


@pytest.mark.timeout(900)  # 4 episodes twice, ~50-130 steps each: minutes on a loaded machine
def test_expert_and_fidelity_against_robosuites_loop() -> None:
    """robosuite-expert succeeds on each task (Door: the lever turned past its latch, then
    pulled; TwoArmLift: both arms), and per episode the plugin gives the steps, reward and
    success robosuite's own loop gives for the same policy and seed."""
    from pytest_hud.suites.robosuite import expert_agent

    rows = [t for task in rs_tasks.PROMPTS for t in rs_tasks.rows(task, 1)]
    ours = rollouts(rows, expert_agent())
    for row, result in zip(rows, ours, strict=True):
        assert result.error is None, result.error
        assert result.success, row.key
        ((steps, total, success),) = robosuite_episodes(row.id, [row.args["seed"]])
        assert (result.steps, result.success) == (steps, success), row.key
        assert result.total_reward == pytest.approx(total, abs=1e-9), row.key


def test_expert_refuses_tasks_it_has_no_policy_for() -> None:
    from pytest_hud.suites.robosuite import RobosuiteExpert

    with pytest.raises(LookupError, match="no policy for 'NutAssembly'"):
        RobosuiteExpert().act("NutAssembly", np.zeros(9), np.zeros(14))
