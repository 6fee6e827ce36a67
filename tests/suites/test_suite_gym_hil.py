"""The shipped gym-hil suite: its rows, its env (real gym-hil 0.1.14 on MuJoCo, rendered headless:
gym-hil builds a renderer even state-only), ``gym-hil-expert`` through the plugin, and the
fidelity of its episodes against lerobot-eval's ``rollout`` loop.

LeRobot (0.4.4 and 0.6.1) ships no env type that lerobot-eval can build gym-hil from (its
``gym_manipulator`` type serves lerobot.rl.gym_manipulator's teleoperation loop, with a viewer
window); a config registered the way a ``lerobot_env_*`` plugin registers one makes LeRobot's
own ``make_env`` build gym-hil's PandaPickCube on its generic path, and lerobot-eval's
``rollout`` drives it. gym-hil reports ``info["succeed"]`` where ``rollout`` reads
``is_success`` (a KeyError at the episode's end without it), so the registered gym id adds
that key from gym-hil's own, as such a plugin must (tests/helpers/own_loops.py)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require, require_lerobot
from own_loops import gym_hil_episodes

from pytest_hud import LocalRuntime, Task, Taskset, run
from pytest_hud.suites.gym_hil import tasks as hil_tasks

pytestmark = pytest.mark.suites

MODULE = "pytest_hud.suites.gym_hil"


@pytest.fixture(autouse=True)
def _gym_hil() -> None:
    require(
        importlib.util.find_spec("gym_hil"),
        "gym-hil",
        "run scripts/setup --metaworld (pytest-hud[gym-hil])",
    )


def rollouts(rows: list[Task], agent: Any) -> list[Any]:
    return asyncio.run(run(rows, agent, LocalRuntime(MODULE), rollout_timeout=240))


def test_rows_and_shipped_file() -> None:
    rows = hil_tasks.pick_cube()
    assert len(rows) == 50 and {t.env for t in rows} == {"gym-hil"}
    assert rows[3].args == {"seed": 3} and rows[3].metadata["module"] == MODULE
    for path, make in hil_tasks.SUITE_FILES.values():
        assert path.parent.joinpath("__init__.py").exists()
        assert [t.key for t in Taskset.load(path)] == [t.key for t in make()]


def test_the_image_is_specified_from_the_suites_module() -> None:
    """``--hud-runtime=docker`` specifies its image from the files that declared the rows'
    Environments: the suite's own module, with its REQUIRES and APT."""
    from pytest_hud.runtime.docker.auto import image_spec
    from pytest_hud.suites import gym_hil as suite

    assert suite.env.declared_in == suite.__file__
    spec = image_spec([suite.__file__])
    assert list(spec.modules.values()) == [MODULE]
    assert set(suite.REQUIRES) <= set(spec.requires) and set(suite.APT) <= set(spec.apt)


def test_the_seed_places_the_cube() -> None:
    from pytest_hud.suites.gym_hil.sim import make_env

    env = make_env()
    try:
        cubes = [env.reset(seed=s)[0]["observation/environment_state"] for s in (0, 1, 0)]
    finally:
        env.close()
    assert np.array_equal(cubes[0], cubes[2])  # the same seed, the same cube
    assert not np.allclose(cubes[0], cubes[1])


def test_expert_lifts_the_cube_through_the_plugin(pytester: pytest.Pytester) -> None:
    rows = hil_tasks.pick_cube(3)
    lines = [json.dumps({**t.to_row(), "module": MODULE}) for t in rows]
    pytester.makefile(".jsonl", pick="\n".join(lines))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--hud-agent=gym-hil-expert", "--hud-results=r.json", timeout=240
    )
    result.assert_outcomes(passed=3)
    data = json.loads(Path(pytester.path, "r.json").read_text())
    assert {r["prompt"] for r in data["rollouts"]} == {"pick up the cube"}
    assert all(r["steps"] < 100 for r in data["rollouts"])  # ended at success, not the limit


def test_a_do_nothing_agent_fails_at_the_limit() -> None:
    from pytest_hud.robot import RobotAgent, ZeroModel

    (result,) = rollouts(hil_tasks.pick_cube(1), RobotAgent(ZeroModel(), name="zero"))
    assert result.error is None, result.error
    assert (result.steps, result.success, result.total_reward) == (100, False, 0.0)


@pytest.mark.lerobot
def test_fidelity_against_lerobot_eval_rollout() -> None:
    """The same expert, seeds and 100-step limit: per episode the same length, summed reward
    and success through the plugin as through lerobot-eval's loop."""
    require_lerobot()
    from pytest_hud.suites.gym_hil import expert_agent

    rows = hil_tasks.pick_cube(3)
    ours = rollouts(rows, expert_agent())
    theirs = gym_hil_episodes("PandaPickCube-v0", [t.args["seed"] for t in rows])
    for row, result, (length, reward, success) in zip(rows, ours, theirs, strict=True):
        assert result.error is None, result.error
        assert (result.steps, result.success) == (length, success), row.key
        assert result.total_reward == pytest.approx(reward, abs=1e-9), row.key
    assert all(r.success for r in ours)
