"""The shipped Kinetix suite: its rows, its env (real kinetix-env 3.0.2 on JAX, CPU),
``kinetix-expert`` through the plugin, and fidelity against vla-eval's own Kinetix benchmark
class driven by vla-eval's own episode loop (``SyncEpisodeRunner``).

Kept cheap: the small levels only (their step compiles once per process, ~20-30 s here,
then runs at ~250-500 steps/s; the on-disk JAX cache shortens later processes)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require

from pytest_hud import LocalRuntime, Task, Taskset, run
from pytest_hud.robot import Model, RobotAgent, Spaces
from pytest_hud.suites.kinetix import tasks as kx_tasks

pytestmark = pytest.mark.suites

MODULE = "pytest_hud.suites.kinetix"
#: small levels the expert solves, and one it does not (aiming needs feedback)
SOLVED = ["s_h0_weak_thrust", "s_h2_one_wheel_car", "s_h6_unicycle_right"]
UNSOLVED = "s_h4_thrust_aim"


@pytest.fixture(autouse=True)
def _kinetix() -> None:
    require(importlib.util.find_spec("kinetix"), "kinetix-env", "run scripts/setup --metaworld")


def rollouts(rows: list[Task], agent: Any) -> list[Any]:
    return asyncio.run(run(rows, agent, LocalRuntime(MODULE), rollout_timeout=900))


# -- rows: pure data ---------------------------------------------------------------------
def test_rows_name_every_shipped_level_with_stable_ids() -> None:
    import kinetix

    shipped = Path(kinetix.__file__).parent / "levels"
    for size, names in kx_tasks.SIZES.items():
        assert sorted(p.stem for p in (shipped / size).glob("*.json")) == sorted(names), size
    assert len(kx_tasks.LEVELS) == 74 and len(set(kx_tasks.PROMPTS.values())) == 74
    small = kx_tasks.rows("s")
    assert [t.id for t in small][:2] == ["s_h0_weak_thrust", "s_h1_thrust_over_ball"]
    assert small[0].args == {"seed": 0} and small[0].metadata["module"] == MODULE
    assert len(kx_tasks.rows(seeds=3)) == 222
    assert kx_tasks.level_file("l_h1_car_left") == "l/h1_car_left.json"
    for level, prompt in kx_tasks.PROMPTS.items():
        assert kx_tasks.level_for_prompt(prompt) == level
    with pytest.raises(LookupError, match="unknown Kinetix level"):
        kx_tasks.level_file("h1_car_left")
    with pytest.raises(LookupError, match="names no Kinetix level"):
        kx_tasks.level_for_prompt("balance the pole")
    with pytest.raises(ValueError, match="unknown Kinetix size"):
        kx_tasks.rows("xl")


def test_shipped_task_files_match_the_row_functions() -> None:
    from pytest_hud.suites import kinetix

    for size in kx_tasks.SIZES:
        path, _ = kx_tasks.SUITE_FILES[size]
        assert path.parent.joinpath("__init__.py").exists(), size  # --pyargs needs a package
        assert [t.key for t in Taskset.load(path)] == [t.key for t in kx_tasks.rows(size)]
        assert json.loads(path.read_text().splitlines()[0])["module"] == MODULE
    assert set(kinetix.env.templates) == set(kx_tasks.LEVELS)
    for row in kx_tasks.rows():
        kinetix.env.get_template(row.id).bind(dict(row.args))


# -- the env ---------------------------------------------------------------------------------
class Seen:
    spaces: list[Spaces] = []

    def __init__(self, run: Any, spaces: Spaces) -> None:
        Seen.spaces.append(spaces)

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        pass

    def end(self, ok: bool) -> dict[str, Any]:
        return {}


def test_expert_solves_what_it_can_and_the_contract_is_kinetixs() -> None:
    """kinetix-expert on three levels it solves and one it cannot, in one substrate: the
    episode ends at Kinetix's own done, success is its GoalR."""
    from pytest_hud.suites.kinetix import expert_agent

    Seen.spaces.clear()
    agent = expert_agent()
    agent.observers.append(Seen)
    rows = [t for t in kx_tasks.rows("s") if t.id in [*SOLVED, UNSOLVED]]
    results = {r.task.id: r for r in rollouts(rows, agent)}
    for level in SOLVED:
        r = results[level]
        assert r.error is None, r.error
        assert r.success and r.score == 1.0 and r.steps < 100, (level, r.steps)
        assert r.total_reward > 1.0  # the goal's +1 and the shaping's approach
    missed = results[UNSOLVED]
    assert missed.error is None and not missed.success
    assert missed.total_reward < 0  # it touched red: Kinetix ended the episode
    assert missed.steps < kx_tasks_max()
    spaces = Seen.spaces[0]
    assert spaces.state is not None and spaces.state.shape == (140,)
    action = spaces.action_feature
    assert action.size == 6
    assert list(action.stats["min"]) == [-1.0] * 4 + [0.0] * 2
    assert results[SOLVED[0]].prompt.startswith("Kinetix level s/h0_weak_thrust:")


def kx_tasks_max() -> int:
    from pytest_hud.suites.kinetix import MAX_STEPS

    return MAX_STEPS


def test_a_wrong_action_size_is_refused_with_the_fix() -> None:
    from pytest_hud.suites.kinetix.sim import make_env

    env = make_env("s_h0_weak_thrust")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="6-d action"):
        env.step(np.zeros(4, np.float32))


# -- fidelity: vla-eval's Kinetix benchmark in vla-eval's own loop ---------------------------
class Linear(Model):
    """A fixed linear policy of the symbolic state (motors in [-1, 1], thrusters in
    [0, 1]): deterministic, so both loops must take the same actions."""

    def __init__(self) -> None:
        self.w = np.random.default_rng(7).normal(0, 0.3, (6, 140)).astype(np.float32)

    def act(self, state: np.ndarray) -> np.ndarray:
        a = np.tanh(self.w @ np.asarray(state, np.float32).reshape(-1))
        a[4:] = np.abs(a[4:])
        return a.astype(np.float32)

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        return np.stack([self.act(s) for s in batch["observation/state"]])[:, None, :]


class LocalConn:
    """vla-eval's ``Connection`` surface (start_episode, act, end_episode), answered by a
    policy in this process instead of a model server."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    async def start_episode(self, payload: dict[str, Any]) -> None:
        self.task = payload["task"]

    async def act(self, obs: dict[str, Any]) -> dict[str, Any]:
        return {"actions": self.policy(obs)}

    async def end_episode(self, result: dict[str, Any]) -> None:
        pass


def vla_eval_episodes(
    worlds: Path, levels: list[str], seeds: list[int], policy: Any
) -> dict[tuple[str, int], tuple[int, float, bool, bool]]:
    """(steps, summed reward, vla-eval's success, Kinetix's GoalR at the end) per
    (level, seed), from vla-eval's KinetixBenchmark run by its SyncEpisodeRunner;
    ``policy(level, state) -> action``."""
    from vla_eval.benchmarks.kinetix.benchmark import KinetixBenchmark
    from vla_eval.runners.sync_runner import SyncEpisodeRunner

    class Summed(KinetixBenchmark):  # the rewards and last GoalR its recorder would hold
        def step(self, action: Any) -> Any:
            result = super().step(action)
            self.total += result.reward
            self.goal = bool(result.info["GoalR"])
            return result

    out = {}
    bench = Summed(observation_type="symbolic", rtc_worlds_dir=str(worlds), seed=0)
    for level in levels:
        for seed in seeds:
            bench.total, bench.goal = 0.0, False
            task = {"name": level, "level": level[2:], "episode_idx": seed}
            conn = LocalConn(lambda obs, lv=level: policy(lv, obs["state"]))
            done = asyncio.run(SyncEpisodeRunner().run_episode(bench, task, conn, max_steps=256))
            out[level, seed] = (done["steps"], bench.total, done["metrics"]["success"], bench.goal)
    return out


@pytest.mark.vla_eval
def test_the_same_episodes_as_vla_evals_kinetix_benchmark(tmp_path: Path) -> None:
    """The same policy, seeds and step limit through pytest-hud and through vla-eval's
    Kinetix class in vla-eval's own loop: the same steps and summed reward per episode;
    success agrees with Kinetix's GoalR at the end. vla-eval's own success rule (any
    step's reward > 0) also counts the dense shaping's approach as a success: where it says
    so on an episode that ended without the goal, the test shows the difference."""
    require(importlib.util.find_spec("vla_eval"), "vla-eval", "run scripts/setup --all")
    import kinetix

    from pytest_hud.suites.kinetix.expert import CONTROLS, SCRIPTS

    levels = ["s_h0_weak_thrust", "s_h4_thrust_aim", "s_h7_unicycle_left"]
    seeds = [0, 1]
    worlds = tmp_path / "worlds"  # vla-eval reads custom levels from <worlds>/l/<level>.json
    (worlds / "l").mkdir(parents=True)
    for level in levels:
        src = Path(kinetix.__file__).parent / "levels" / kx_tasks.level_file(level)
        shutil.copy(src, worlds / "l" / f"{level[2:]}.json")
    linear = Linear()

    theirs = vla_eval_episodes(worlds, levels, seeds, lambda _, s: linear.act(s))
    rows = [t for t in kx_tasks.rows("s", seeds=2) if t.id in levels]
    ours = {(r.task.id, r.task.args["seed"]): r for r in rollouts(rows, RobotAgent(linear))}
    assert set(ours) == set(theirs)
    for key, (steps, total, _, goal) in theirs.items():
        r = ours[key]
        assert r.error is None, r.error
        assert (r.steps, r.success) == (steps, goal), key
        assert r.total_reward == pytest.approx(total, abs=1e-5), key
    # vla-eval's rule only ever adds successes: an approach rewarded by the shaping
    over = [key for key, (_, _, vla_success, goal) in theirs.items() if vla_success != goal]
    assert all(theirs[key][2] and not theirs[key][3] for key in over), over

    expert = {level: np.array(CONTROLS[SCRIPTS.get(level, "off")], np.float32) for level in levels}
    theirs = vla_eval_episodes(worlds, levels, [0], lambda lv, _: expert[lv])
    from pytest_hud.suites.kinetix import expert_agent

    ours_expert = rollouts([t for t in kx_tasks.rows("s") if t.id in levels], expert_agent())
    for r in ours_expert:
        steps, total, _, goal = theirs[r.task.id, 0]
        assert (r.steps, r.success) == (steps, goal) and r.total_reward == pytest.approx(total)
    assert [r.success for r in ours_expert] == [True, False, True]
