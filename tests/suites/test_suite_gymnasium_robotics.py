"""The shipped gymnasium-robotics suite: its rows, its envs (real gymnasium-robotics 1.4.2 on
MuJoCo), ``fetch-expert`` through the plugin, the fidelity of its episodes against a plain
gymnasium loop, and a camera-rendered smoke episode. Kept to a few short episodes (Fetch's
are 50 steps); the full-size runs are bench/suites.py's."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require

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
    for path, rows in gr_tasks.SUITE_FILES.items():
        assert path.parent.joinpath("__init__.py").exists()  # --pyargs needs a package
        assert [t.key for t in Taskset.load(path)] == [t.key for t in rows()]
    with pytest.raises(ValueError, match="unknown task"):
        gr_tasks.fetch(tasks=("FetchSlide-v4",))
    with pytest.raises(LookupError, match="names no gymnasium-robotics task"):
        gr_tasks.task_for_prompt("dance")


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


def _plain_loop(task: str, seed: int) -> tuple[int, float, bool]:
    """gymnasium-robotics as a user drives it: make, reset(seed), step the expert until the
    env ends the episode; success is the final step's ``is_success``."""
    import gymnasium as gym
    import gymnasium_robotics

    from pytest_hud.suites.gymnasium_robotics.expert import pick_and_place, push, reach

    gym.register_envs(gymnasium_robotics)
    env = gym.make(task)
    obs, _ = env.reset(seed=seed)
    steps, total = 0, 0.0
    while True:
        o, goal = obs["observation"].astype(np.float64), obs["desired_goal"].astype(np.float64)
        if task == "FetchReach-v4":
            action = reach(o[0:3], goal)
        elif task == "FetchPush-v4":
            action = push(o[0:3], o[3:6], goal)
        else:
            action = pick_and_place(o[0:3], o[3:6], o[9:11], goal)
        obs, reward, terminated, truncated, info = env.step(action.astype(np.float32))
        steps, total = steps + 1, total + float(reward)
        if terminated or truncated:
            env.close()
            return steps, total, bool(info["is_success"])


def test_fidelity_against_a_plain_gymnasium_loop() -> None:
    """The same expert, seeds and limit: per episode the same steps, reward and success."""
    from pytest_hud.suites.gymnasium_robotics import expert_agent

    rows = gr_tasks.fetch(2)
    ours = rollouts(rows, expert_agent())
    for row, result in zip(rows, ours, strict=True):
        assert result.error is None, result.error
        steps, total, success = _plain_loop(row.id, row.args["seed"])
        assert (result.steps, result.success) == (steps, success), row.key
        assert result.total_reward == pytest.approx(total, abs=1e-9), row.key
    assert all(r.success for r in ours)


def test_kitchen_episode_runs_to_its_limit_with_a_random_agent() -> None:
    agent = RobotAgent(RandomModel(seed=0), name="random", max_steps=30)
    (result,) = rollouts(gr_tasks.kitchen(1, ("kitchen-microwave",)), agent)
    assert result.error is None, result.error
    assert (result.steps, result.success) == (30, False)
    assert result.prompt == "open the microwave"


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
