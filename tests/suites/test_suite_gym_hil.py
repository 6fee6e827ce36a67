"""The shipped gym-hil suite: its rows, its env (real gym-hil 0.1.14 on MuJoCo, rendered headless:
gym-hil builds a renderer even state-only), ``gym-hil-expert`` through the plugin, and the
fidelity of its episodes against lerobot-eval's ``rollout`` loop.

LeRobot (0.4.4 and 0.6.1) ships no env type that lerobot-eval can build gym-hil from (its
``gym_manipulator`` type serves lerobot.rl.gym_manipulator's teleoperation loop, with a viewer
window); a config registered the way a ``lerobot_env_*`` plugin registers one makes LeRobot's
own ``make_env`` build gym-hil's PandaPickCube on its generic path, and lerobot-eval's
``rollout`` drives it. gym-hil reports ``info["succeed"]`` where ``rollout`` reads
``is_success`` (a KeyError at the episode's end without it), so the registered gym id adds
that key from gym-hil's own, as such a plugin must."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require, require_lerobot

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
    for path, make in hil_tasks.SUITE_FILES.items():
        assert path.parent.joinpath("__init__.py").exists()
        assert [t.key for t in Taskset.load(path)] == [t.key for t in make()]


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


@dataclass
class _Expert:
    """gym-hil-expert as the torch module lerobot-eval's ``rollout`` drives."""

    module: Any = field(default=None)

    @staticmethod
    def make() -> Any:
        import torch

        from pytest_hud.suites.gym_hil.expert import pick

        class Policy(torch.nn.Module):
            def reset(self) -> None:
                pass

            def select_action(self, batch: dict[str, Any]) -> Any:
                state = batch["observation.state"].numpy().astype(np.float64)
                cube = batch["observation.environment_state"].numpy().astype(np.float64)
                rows = [pick(s[15:18], float(s[14]), c) for s, c in zip(state, cube, strict=True)]
                return torch.from_numpy(np.stack(rows).astype(np.float32))

        return Policy()


def _lerobot_eval_episodes(seeds: list[int]) -> list[tuple[int, float, bool]]:
    """lerobot-eval's ``rollout`` over LeRobot's ``make_env`` of gym-hil, one seed per call
    (the suite's seeding: NumPy's global RNG, then ``reset(seed=)``)."""
    from dataclasses import dataclass as config_dataclass

    from lerobot.envs.configs import EnvConfig
    from lerobot.envs.factory import make_env, make_env_pre_post_processors
    from lerobot.scripts.lerobot_eval import rollout

    if "hil" not in EnvConfig.get_known_choices():
        import gymnasium as gym

        class IsSuccess(gym.Wrapper):  # type: ignore[type-arg]
            def step(self, action: Any) -> Any:
                obs, reward, terminated, truncated, info = self.env.step(action)
                return obs, reward, terminated, truncated, {**info, "is_success": info["succeed"]}

        def make(**kwargs: Any) -> Any:
            import gym_hil  # noqa: F401

            return IsSuccess(gym.make("gym_hil/PandaPickCube-v0", **kwargs))

        gym.register("gym_hil_eval/PandaPickCube-v0", entry_point=make, max_episode_steps=100)

        @EnvConfig.register_subclass("hil")
        @config_dataclass
        class HilEnv(EnvConfig):  # what a lerobot_env_* plugin for gym-hil would register
            task: str | None = "PandaPickCube-v0"
            fps: int = 10

            @property
            def package_name(self) -> str:
                return "gym_hil"

            @property
            def gym_id(self) -> str:
                return f"gym_hil_eval/{self.task}"

            @property
            def gym_kwargs(self) -> dict:
                return {"reset_delay_seconds": 0.0, "random_block_position": True}

    config = EnvConfig.get_choice_class("hil")()
    [vec] = [v for tasks in make_env(config, n_envs=1).values() for v in tasks.values()]
    env_pre, env_post = make_env_pre_post_processors(config, None)
    policy = _Expert.make()
    out = []
    try:
        for seed in seeds:
            np.random.seed(seed)
            data = rollout(vec, policy, env_pre, env_post, lambda b: b, lambda a: a, seeds=[seed])
            done = data["done"][0].numpy()
            length = int(np.argmax(done)) + 1
            reward = float(data["reward"][0, :length].sum())
            out.append((length, reward, bool(data["success"][0, :length].any())))
    finally:
        vec.close()
    return out


@pytest.mark.lerobot
def test_fidelity_against_lerobot_eval_rollout() -> None:
    """The same expert, seeds and 100-step limit: per episode the same length, summed reward
    and success through the plugin as through lerobot-eval's loop."""
    require_lerobot()
    from pytest_hud.suites.gym_hil import expert_agent

    rows = hil_tasks.pick_cube(3)
    ours = rollouts(rows, expert_agent())
    theirs = _lerobot_eval_episodes([t.args["seed"] for t in rows])
    for row, result, (length, reward, success) in zip(rows, ours, theirs, strict=True):
        assert result.error is None, result.error
        assert (result.steps, result.success) == (length, success), row.key
        assert result.total_reward == pytest.approx(reward, abs=1e-9), row.key
    assert all(r.success for r in ours)
