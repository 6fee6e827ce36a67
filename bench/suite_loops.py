"""Benchmark two shipped suites against their benchmark's own loop, on the same episodes.

Kinetix: the small levels x seeds with ``kinetix-expert``, through pytest-hud
(``run(rows, agent, provider)``: local, subprocess, docker) and through vla-eval's own
``KinetixBenchmark`` driven by its ``SyncEpisodeRunner`` (a local answerer in place of the
model server, the levels from a worlds folder as vla-eval reads custom levels).
ManiSkill: PickCube and PushCube x seeds with ``maniskill-expert``, through pytest-hud
(local, subprocess) and a plain loop over ManiSkill's own env (gym.make with the suite's
settings). Each row: episodes, successes, wall seconds (start-up included: one process
boot, the JAX compile or SAPIEN build once) and episodes/s. The docker rows use the image
``--hud-runtime=docker`` builds (``python -m pytest_hud image build --pyargs
pytest_hud.suites.kinetix.s``; scripts/setup --all prebuilds it).

    python bench/suite_loops.py [--suites kinetix maniskill] [--seeds 3]
        [--runtimes local subprocess docker] [--json out.json]

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
def kinetix_rows(seeds: int) -> list[Any]:
    from pytest_hud.suites.kinetix import rows

    return rows("s", seeds)


def kinetix_own(seeds: int) -> dict[str, Any]:
    import kinetix
    from vla_eval.benchmarks.kinetix.benchmark import KinetixBenchmark
    from vla_eval.runners.sync_runner import SyncEpisodeRunner

    from pytest_hud.suites.kinetix.expert import CONTROLS, SCRIPTS
    from pytest_hud.suites.kinetix.tasks import SIZES, level_file

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
        for name in SIZES["s"]:
            src = Path(kinetix.__file__).parent / "levels" / level_file(f"s_{name}")
            shutil.copy(src, Path(tmp) / "l" / f"{name}.json")
        bench = KinetixBenchmark(observation_type="symbolic", rtc_worlds_dir=tmp, seed=0)
        for name in SIZES["s"]:
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

    from pytest_hud.suites.maniskill.expert import ENV_STATE_KEY, ManiSkillExpert
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
                state = np.asarray(env.unwrapped.get_state()).reshape(-1)
                batch = {"prompt": [PROMPTS[row.id]], ENV_STATE_KEY: [state]}
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


SUITES = {
    "kinetix": ("pytest_hud.suites.kinetix", kinetix_rows, "kinetix-expert", kinetix_own),
    "maniskill": ("pytest_hud.suites.maniskill", maniskill_rows, "maniskill-expert", maniskill_own),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=list(SUITES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--runtimes", nargs="+", default=["local", "subprocess", "docker"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.setdefault(
        "PYTEST_HUD_MANISKILL_PLANNER", str(ROOT / ".ci/venvs/maniskill/bin/python")
    )
    from pytest_hud.robot.agent.registry import load_agent

    out = []
    for suite in args.suites:
        module, make_rows, agent, own = SUITES[suite]
        print(f"\n{suite}: {agent}, {args.seeds} seed(s) per row (load {os.getloadavg()[0]:.1f})")
        runs = [own(args.seeds)]
        for runtime in args.runtimes:
            if suite == "maniskill" and runtime == "docker":
                print("  docker: skipped (the image carries torch: see docs/guides/suites.md)")
                continue
            runs.append(plugin_run(module, make_rows(args.seeds), load_agent(agent), runtime))
        for r in runs:
            r["suite"] = suite
            r["episodes_per_s"] = r["episodes"] / r["wall_s"]
            out.append(r)
            print(
                f"  {r['loop']:<30}{r['episodes']:>4} episodes {r['successes']:>4} ok "
                f"{r['errors']:>2} errors {r['steps']:>6} steps {r['wall_s']:>7.1f} s "
                f"{r['episodes_per_s']:>6.2f} eps/s",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    sys.exit(0)


if __name__ == "__main__":
    main()
