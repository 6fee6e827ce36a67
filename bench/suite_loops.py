"""Benchmark the shipped seeded suites against their benchmark's own loop, on the same episodes.

Kinetix: the small levels x seeds with ``kinetix-expert``, through pytest-hud
(``run(rows, agent, provider)``: local, subprocess, docker) and through vla-eval's own
``KinetixBenchmark`` driven by its ``SyncEpisodeRunner`` (a local answerer in place of the
model server, the levels from a worlds folder as vla-eval reads custom levels).
ManiSkill: PickCube and PushCube x seeds with ``maniskill-expert``, through pytest-hud
(local, subprocess) and a plain loop over ManiSkill's own env (gym.make with the suite's
settings). robosuite (Lift, Stack, Door, TwoArmLift), gymnasium-robotics (Fetch's three
tasks; the kitchen's eight goals) and gym-hil (PandaPickCube) x seeds with their experts,
beside robosuite's env loop, a plain gymnasium loop and lerobot-eval's ``rollout``
(tests/helpers/own_loops.py, the loops their fidelity tests compare with). Each row:
episodes, successes, wall seconds (start-up included: one process boot, the JAX compile or
SAPIEN build once) and episodes/s. The docker rows use the image ``--hud-runtime=docker``
builds (``python -m pytest_hud image build --pyargs pytest_hud.suites.kinetix.s``;
scripts/setup --all prebuilds Kinetix's and gymnasium-robotics').

    python bench/suite_loops.py [--suites kinetix maniskill robosuite fetch kitchen gym_hil]
        [--seeds 3] [--runtimes local subprocess docker] [--json out.json]

ManiSkill's planner runs in ``$PYTEST_HUD_MANISKILL_PLANNER`` (default
.ci/venvs/maniskill/bin/python).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))  # own_loops: the benchmarks' own loops


def _provider(module: str, runtime: str) -> Any:
    from pytest_hud import LocalRuntime, SubprocessRuntime

    if runtime == "subprocess":
        return SubprocessRuntime(module, boot_timeout=1800)
    if runtime == "docker":
        import importlib

        from pytest_hud.runtime.docker.auto import AutoDockerRuntime

        path = importlib.import_module(module).__file__
        return AutoDockerRuntime([path], boot_timeout=1800).serving(module)
    return LocalRuntime(module)


def plugin_run(module: str, rows: list[Any], agent: Any, runtime: str) -> dict[str, Any]:
    """All ``rows`` through one substrate (``Shared``: what ``--hud-shared=1`` does)."""
    from pytest_hud import Shared, run

    provider = Shared(_provider(module, runtime), width=1)
    start = time.monotonic()
    results = asyncio.run(run(rows, agent, provider, rollout_timeout=3600))
    wall = time.monotonic() - start
    errors = [r.error for r in results if r.error]
    return {
        "loop": f"pytest-hud {runtime}",
        "episodes": len(results),
        "successes": sum(bool(r.success) for r in results),
        "errors": len(errors),
        "steps": sum(r.steps or 0 for r in results),
        "wall_s": wall,
    }


# -- Kinetix: vla-eval's class in vla-eval's loop ---------------------------------------
#: the small levels the Kinetix rows take (``--levels N``: the first N; all by default)
LEVELS: list[str] = []


def kinetix_rows(seeds: int) -> list[Any]:
    from pytest_hud.suites.kinetix import rows

    return [t for t in rows("s", seeds) if t.id[2:] in LEVELS]


def kinetix_own(seeds: int) -> dict[str, Any]:
    import kinetix
    from vla_eval.benchmarks.kinetix.benchmark import KinetixBenchmark
    from vla_eval.runners.sync_runner import SyncEpisodeRunner

    from pytest_hud.suites.kinetix.expert import CONTROLS, SCRIPTS
    from pytest_hud.suites.kinetix.tasks import level_file

    class Answer:  # vla-eval's Connection surface, answered here
        def __init__(self, action: np.ndarray) -> None:
            self.action = action

        async def start_episode(self, payload: dict[str, Any]) -> None:
            pass

        async def act(self, obs: dict[str, Any]) -> dict[str, Any]:
            return {"actions": self.action}

        async def end_episode(self, result: dict[str, Any]) -> None:
            pass

    start = time.monotonic()
    successes = steps = episodes = 0
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "l").mkdir()
        for name in LEVELS:
            src = Path(kinetix.__file__).parent / "levels" / level_file(f"s_{name}")
            shutil.copy(src, Path(tmp) / "l" / f"{name}.json")
        bench = KinetixBenchmark(observation_type="symbolic", rtc_worlds_dir=tmp, seed=0)
        for name in LEVELS:
            action = np.array(CONTROLS[SCRIPTS.get(f"s_{name}", "off")], np.float32)
            for seed in range(seeds):
                task = {"name": name, "level": name, "episode_idx": seed}
                out = asyncio.run(
                    SyncEpisodeRunner().run_episode(bench, task, Answer(action), max_steps=256)
                )
                episodes += 1
                steps += out["steps"]
                successes += bool(out["metrics"]["success"])  # vla-eval's rule
    wall = time.monotonic() - start
    return {
        "loop": "vla-eval SyncEpisodeRunner",
        "episodes": episodes,
        "successes": successes,
        "errors": 0,
        "steps": steps,
        "wall_s": wall,
    }


# -- ManiSkill: its own env in a plain loop ---------------------------------------------
def maniskill_rows(seeds: int) -> list[Any]:
    from pytest_hud.suites.maniskill import rows

    return rows(["PickCube-v1", "PushCube-v1"], seeds)


def maniskill_own(seeds: int) -> dict[str, Any]:
    import gymnasium as gym
    import mani_skill.envs  # noqa: F401

    from pytest_hud.suites.maniskill.expert import ManiSkillExpert
    from pytest_hud.suites.maniskill.sim import planner_observation
    from pytest_hud.suites.maniskill.tasks import MAX_STEPS, PROMPTS

    expert = ManiSkillExpert()
    start = time.monotonic()
    successes = steps = episodes = 0
    for row in maniskill_rows(seeds):
        env = gym.make(
            row.id,
            obs_mode="state",
            control_mode="pd_joint_pos",
            sim_backend="physx_cpu",
            num_envs=1,
            max_episode_steps=MAX_STEPS[row.id],
        )
        env.reset(seed=row.args["seed"])
        chunk: list[np.ndarray] = []
        success = False
        while True:
            if not chunk:
                observed = planner_observation(env.unwrapped).items()
                batch = {"prompt": [PROMPTS[row.id]], **{k: [v] for k, v in observed}}
                chunk = list(expert.infer(batch)[0])
            _, _, terminated, truncated, info = env.step(chunk.pop(0)[None])
            steps += 1
            success = success or bool(info["success"][0])
            if bool(terminated[0]) or bool(truncated[0]):
                break
        env.close()
        episodes += 1
        successes += success
    wall = time.monotonic() - start
    return {
        "loop": "ManiSkill env, plain loop",
        "episodes": episodes,
        "successes": successes,
        "errors": 0,
        "steps": steps,
        "wall_s": wall,
    }


# -- robosuite, gymnasium-robotics, gym-hil: tests/helpers/own_loops.py -----------------
def _own(label: str, episodes: Any, rows: list[Any]) -> dict[str, Any]:
    """``episodes(task, seeds)`` over ``rows``' tasks, each task's seeds in one call."""
    by_task: dict[str, list[int]] = {}
    for row in rows:
        by_task.setdefault(row.id, []).append(row.args["seed"])
    start = time.monotonic()
    done = [e for task, seeds in by_task.items() for e in episodes(task, seeds)]
    return {
        "loop": label,
        "episodes": len(done),
        "successes": sum(ok for _, _, ok in done),
        "errors": 0,
        "steps": sum(steps for steps, _, _ in done),
        "wall_s": time.monotonic() - start,
    }


def robosuite_rows(seeds: int) -> list[Any]:
    from pytest_hud.suites.robosuite import PROMPTS
    from pytest_hud.suites.robosuite.tasks import rows

    return [t for task in PROMPTS for t in rows(task, seeds)]


def fetch_rows(seeds: int) -> list[Any]:
    from pytest_hud.suites.gymnasium_robotics.tasks import fetch

    return fetch(seeds)


def kitchen_rows(seeds: int) -> list[Any]:
    from pytest_hud.suites.gymnasium_robotics.tasks import kitchen

    return kitchen(seeds)


def gym_hil_rows(seeds: int) -> list[Any]:
    from pytest_hud.suites.gym_hil.tasks import pick_cube

    return pick_cube(seeds)


def robosuite_own(seeds: int) -> dict[str, Any]:
    from own_loops import robosuite_episodes

    return _own("robosuite env loop", robosuite_episodes, robosuite_rows(seeds))


def fetch_own(seeds: int) -> dict[str, Any]:
    from own_loops import fetch_episodes

    return _own("gymnasium loop", fetch_episodes, fetch_rows(seeds))


def kitchen_own(seeds: int) -> dict[str, Any]:
    from own_loops import kitchen_episodes

    return _own("gymnasium loop", kitchen_episodes, kitchen_rows(seeds))


def gym_hil_own(seeds: int) -> dict[str, Any]:
    from own_loops import gym_hil_episodes

    return _own("lerobot-eval rollout", gym_hil_episodes, gym_hil_rows(seeds))


_GR = "pytest_hud.suites.gymnasium_robotics"
SUITES = {
    "kinetix": ("pytest_hud.suites.kinetix", kinetix_rows, "kinetix-expert", kinetix_own),
    "maniskill": ("pytest_hud.suites.maniskill", maniskill_rows, "maniskill-expert", maniskill_own),
    "robosuite": ("pytest_hud.suites.robosuite", robosuite_rows, "robosuite-expert", robosuite_own),
    "fetch": (_GR, fetch_rows, "fetch-expert", fetch_own),
    "kitchen": (_GR, kitchen_rows, "kitchen-expert", kitchen_own),
    "gym_hil": ("pytest_hud.suites.gym_hil", gym_hil_rows, "gym-hil-expert", gym_hil_own),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=list(SUITES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--runtimes", nargs="+", default=["local", "subprocess", "docker"])
    parser.add_argument("--levels", type=int, help="Kinetix: the first N small levels")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from pytest_hud.suites.kinetix.tasks import SIZES

    LEVELS[:] = list(SIZES["s"][: args.levels])
    os.environ.setdefault(
        "PYTEST_HUD_MANISKILL_PLANNER", str(ROOT / ".ci/venvs/maniskill/bin/python")
    )
    from pytest_hud.robot.agent.registry import load_agent

    out = []
    for suite in args.suites:
        module, make_rows, agent, own = SUITES[suite]
        print(f"\n{suite}: {agent}, {args.seeds} seed(s) per row (load {os.getloadavg()[0]:.1f})")
        runs = [{**own(args.seeds), "load": os.getloadavg()[0]}]
        for runtime in args.runtimes:
            if suite == "maniskill" and runtime == "docker":
                print("  docker: skipped (the image carries torch: see docs/guides/suites.md)")
                continue
            run = plugin_run(module, make_rows(args.seeds), load_agent(agent), runtime)
            runs.append({**run, "load": os.getloadavg()[0]})
        for r in runs:
            r["suite"] = suite
            r["episodes_per_s"] = r["episodes"] / r["wall_s"]
            out.append(r)
            print(
                f"  {r['loop']:<30}{r['episodes']:>4} episodes {r['successes']:>4} ok "
                f"{r['errors']:>2} errors {r['steps']:>6} steps {r['wall_s']:>7.1f} s "
                f"{r['episodes_per_s']:>6.2f} eps/s  (load {r['load']:.1f} at its end)",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    sys.exit(0)


if __name__ == "__main__":
    main()
