"""The shipped gymnasium-robotics suite: its rows, its envs (real gymnasium-robotics 1.4.2 on
MuJoCo), ``fetch-expert`` and ``kitchen-expert`` through the plugin, the fidelity of their
episodes against a plain gymnasium loop, and a camera-rendered smoke episode. Kept to a few
short episodes (Fetch's are 50 steps, the kitchen's here 35-60); the full-size runs are
bench/suites.py's."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require
from own_loops import fetch_episodes, kitchen_episodes

from pytest_hud import LocalRuntime, SubprocessRuntime, Task, Taskset, run
from pytest_hud.robot import RandomModel, RobotAgent
from pytest_hud.suites.gymnasium_robotics import tasks as gr_tasks

pytestmark = pytest.mark.suites

MODULE = "pytest_hud.suites.gymnasium_robotics"


@pytest.fixture(autouse=True)
def _gymnasium_robotics() -> None:
    require(
        importlib.util.find_spec("gymnasium_robotics"),
        "gymnasium-robotics",
        "run scripts/setup --metaworld (pytest-hud[gymnasium-robotics])",
    )


def rollouts(rows: list[Task], agent: Any, provider: Any = None) -> list[Any]:
    provider = provider or LocalRuntime(MODULE)
    return asyncio.run(run(rows, agent, provider, rollout_timeout=240))


def test_rows_and_shipped_files() -> None:
    fetch, kitchen = gr_tasks.fetch(), gr_tasks.kitchen()
    assert (len(fetch), len(kitchen)) == (150, 80)
    assert {t.env for t in fetch} == {"fetch-reach", "fetch-push", "fetch-pick-and-place"}
    assert {t.env for t in kitchen} == {"franka-kitchen"}
    assert fetch[0].args == {"seed": 0} and fetch[0].metadata["module"] == MODULE
    assert len({t.key for t in fetch + kitchen}) == 230
    for path, rows in gr_tasks.SUITE_FILES.values():
        assert path.parent.joinpath("__init__.py").exists()  # --pyargs needs a package
        assert [t.key for t in Taskset.load(path)] == [t.key for t in rows()]
    with pytest.raises(ValueError, match="unknown Fetch task"):
        gr_tasks.fetch(tasks=("FetchSlide-v4",))
    with pytest.raises(LookupError, match="names no gymnasium-robotics task"):
        gr_tasks.task_for_prompt("dance")


def test_the_image_is_specified_from_the_suites_module() -> None:
    """``--hud-runtime=docker`` specifies its image from the files that declared the rows'
    Environments: the suite's own module, with its REQUIRES and APT."""
    from pytest_hud.runtime.docker.auto import image_spec
    from pytest_hud.suites import gymnasium_robotics as suite

    assert {e.declared_in for e in suite.make_environments().values()} == {suite.__file__}
    spec = image_spec([suite.__file__])
    assert list(spec.modules.values()) == [MODULE]
    assert set(suite.REQUIRES) <= set(spec.requires) and set(suite.APT) <= set(spec.apt)


def test_contracts_match_the_envs() -> None:
    """Each env's declared contract is what gymnasium-robotics' env observes and takes."""
    import gymnasium as gym
    import gymnasium_robotics

    from pytest_hud.suites import gymnasium_robotics as suite
    from pytest_hud.suites.gymnasium_robotics.sim import make_env

    gym.register_envs(gymnasium_robotics)
    for task in ("FetchReach-v4", "FetchPush-v4", "FrankaKitchen-v1"):
        features = suite.contract(task)["features"]
        env = make_env(task)
        try:
            obs, _ = env.reset(seed=0)
            raw = gym.make("FrankaKitchen-v1" if task.startswith("Franka") else task)
            assert features["action"]["shape"] == list(raw.action_space.shape)
            raw.close()
            for key, value in obs.items():
                assert features[key]["shape"] == list(value.shape), (task, key)
        finally:
            env.close()


def test_fetch_success_is_the_last_steps_is_success() -> None:
    """A random agent on FetchReach: 50 steps, no success (the target is out of its reach),
    every episode cut at gymnasium-robotics' limit."""
    agent = RobotAgent(RandomModel(seed=0), name="random")
    (result,) = rollouts(gr_tasks.fetch(1, ("FetchReach-v4",)), agent)
    assert result.error is None, result.error
    assert (result.steps, result.success) == (50, False)
    assert result.total_reward == pytest.approx(-50.0)


def test_expert_solves_each_fetch_task_through_the_plugin(pytester: pytest.Pytester) -> None:
    rows = [t for t in gr_tasks.fetch(2)]
    lines = [json.dumps({**t.to_row(), "module": MODULE}) for t in rows]
    pytester.makefile(".jsonl", fetch_part="\n".join(lines))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--hud-agent=fetch-expert", "--hud-results=r.json", timeout=240
    )
    result.assert_outcomes(passed=6)
    data = json.loads(Path(pytester.path, "r.json").read_text())
    assert {r["prompt"] for r in data["rollouts"]} == set(gr_tasks.FETCH.values())


@pytest.mark.docker
@pytest.mark.timeout(3600)  # a cold image: gymnasium-robotics + mujoco ~5 min under load
def test_fetch_expert_under_the_docker_runtime(pytester: pytest.Pytester) -> None:
    """``--hud-runtime=docker`` with no image flag builds (or finds: scripts/setup --all
    prebuilds it) the image from the suite's REQUIRES and APT, and serves the Fetch rows in
    it: one seed of each task, fetch-expert, every episode a success."""
    from docker_helpers import engine

    client = engine()
    require(client, "a Docker engine", "start one with scripts/setup --docker")
    client.close()
    rows = gr_tasks.fetch(1)
    lines = [json.dumps({**t.to_row(), "module": MODULE}) for t in rows]
    pytester.makefile(".jsonl", fetch_docker="\n".join(lines))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--hud-runtime=docker", "--hud-agent=fetch-expert",
        "--hud-results=r.json", timeout=3000,
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    data = json.loads(Path(pytester.path, "r.json").read_text())
    assert [r["steps"] for r in data["rollouts"]] == [50, 50, 50]
    assert data["overall"]["success_rate"] == 1.0


def test_fidelity_against_a_plain_gymnasium_loop() -> None:
    """The same expert, seeds and limit: per episode the same steps, reward and success."""
    from pytest_hud.suites.gymnasium_robotics import expert_agent

    rows = gr_tasks.fetch(2)
    ours = rollouts(rows, expert_agent())
    for row, result in zip(rows, ours, strict=True):
        assert result.error is None, result.error
        ((steps, total, success),) = fetch_episodes(row.id, [row.args["seed"]])
        assert (result.steps, result.success) == (steps, success), row.key
        assert result.total_reward == pytest.approx(total, abs=1e-9), row.key
    assert all(r.success for r in ours)


def test_kitchen_episode_runs_to_its_limit_with_a_random_agent() -> None:
    agent = RobotAgent(RandomModel(seed=0), name="random", max_steps=30)
    (result,) = rollouts(gr_tasks.kitchen(1, ("kitchen-microwave",)), agent)
    assert result.error is None, result.error
    assert (result.steps, result.success) == (30, False)
    assert result.prompt == "open the microwave"


def test_kitchen_expert_and_fidelity_against_a_plain_gymnasium_loop() -> None:
    """kitchen-expert opens the microwave and turns on the light, and per episode the plugin
    gives the steps, reward and success of a plain gymnasium loop with the same policy."""
    from pytest_hud.suites.gymnasium_robotics import kitchen_agent

    rows = gr_tasks.kitchen(1, ("kitchen-microwave", "kitchen-light-switch"))
    ours = rollouts(rows, kitchen_agent())
    for row, result in zip(rows, ours, strict=True):
        assert result.error is None, result.error
        assert result.success, row.key
        ((steps, total, success),) = kitchen_episodes(row.id, [row.args["seed"]])
        assert (result.steps, result.success) == (steps, success), row.key
        assert result.total_reward == pytest.approx(total, abs=1e-9), row.key


def test_kitchen_expert_refuses_other_contracts_and_tasks() -> None:
    from pytest_hud.robot import ContractError
    from pytest_hud.robot.contract import Contract
    from pytest_hud.suites import gymnasium_robotics as suite
    from pytest_hud.suites.gymnasium_robotics import KitchenExpert

    expert = KitchenExpert()
    expert.bind(Contract.from_dict(suite.contract("kitchen-kettle")).spaces())
    with pytest.raises(LookupError, match="FrankaKitchen goals only"):
        expert.act("FetchPush-v4", np.zeros(59))
    with pytest.raises(ContractError, match="kitchen rows"):
        expert.bind(Contract.from_dict(suite.contract("FetchPush-v4")).spaces())


def test_rendered_smoke_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few camera-rendered steps (Fetch's external camera, 64x64) through the real wire, in a
    fresh process (MuJoCo picks its GL backend when first imported)."""
    monkeypatch.setenv("PYTEST_HUD_GYMNASIUM_ROBOTICS_CAMERAS", "external_camera_0")
    monkeypatch.setenv("PYTEST_HUD_GYMNASIUM_ROBOTICS_SIZE", "64")
    monkeypatch.setenv("MUJOCO_GL", "egl")
    monkeypatch.setenv("PYOPENGL_PLATFORM", "egl")
    from pytest_hud.suites.gymnasium_robotics import FetchExpert

    frames: list[np.ndarray] = []

    class Frames:
        def __init__(self, run: Any, spaces: Any) -> None:
            pass

        def step(self, data: dict[str, Any], action: np.ndarray) -> None:
            frames.append(np.array(data["observation/images/external_camera_0"]))

        def end(self, ok: bool) -> dict[str, Any]:
            return {}

    agent = RobotAgent(FetchExpert(), max_steps=4)
    agent.observers.append(Frames)
    (result,) = rollouts(gr_tasks.fetch(1, ("FetchPush-v4",)), agent, SubprocessRuntime(MODULE))
    assert result.error is None, result.error
    assert result.steps == 4 and len(frames) == 4
    assert frames[0].shape == (64, 64, 3) and frames[0].dtype == np.uint8
    assert frames[0].std() > 5  # a scene, not a blank frame
    assert not np.array_equal(frames[0], frames[-1])  # the arm moved
