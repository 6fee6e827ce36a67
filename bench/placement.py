"""Placement benchmark: what a substrate costs, and what sharing one saves.

Prints, per runtime, the time from acquisition to the first observation and the
teardown time (median of --reps), then 32 rollouts of a cheap env (CartPole, zero
agent) with a fresh substrate per rollout vs Shared(width=8): wall time and ratio.

    .venv/bin/python bench/placement.py [--reps 3] [--rollouts 32] [--no-docker]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_hud import LocalRuntime, Shared, SubprocessRuntime, Task, run  # noqa: E402
from pytest_hud.robot import RobotAgent, RobotClient, ZeroModel  # noqa: E402
from pytest_hud.runtime import ControlClient  # noqa: E402

CHEAP = ROOT / "bench" / "envs" / "cheap.py"
TASK = Task("cheap", "balance", {"seed": 0})


async def first_observation(provider) -> tuple[float, float]:
    """Seconds from acquisition to the first observation, and teardown seconds."""
    t0 = time.perf_counter()
    cm = provider(TASK)
    runtime = await cm.__aenter__()
    try:
        async with await ControlClient.connect(runtime) as control:
            started = await control.start(TASK)
            client = await RobotClient.connect(started.robot, token=started.robot_token)
            await client.get_observation()
            ready = time.perf_counter() - t0
            await client.close()
            await control.result(started)
    finally:
        t1 = time.perf_counter()
        await cm.__aexit__(None, None, None)
        teardown = time.perf_counter() - t1
    return ready, teardown


def docker_provider():
    from pytest_hud.runtime.docker import DockerRuntime, build_image

    tag = build_image(
        "pytest-hud-bench:placement",
        module="envs/cheap.py",
        extra_files={"envs": ROOT / "bench" / "envs"},
    )
    return DockerRuntime(tag)


async def main(args: argparse.Namespace) -> None:
    providers = {"local": LocalRuntime(CHEAP), "subprocess": SubprocessRuntime(CHEAP)}
    if not args.no_docker:
        providers["docker"] = docker_provider()
    print(f"{'runtime':<12}{'to first obs (s)':>18}{'teardown (s)':>14}")
    for name, provider in providers.items():
        samples = [await first_observation(provider) for _ in range(args.reps)]
        ready = statistics.median(s[0] for s in samples)
        down = statistics.median(s[1] for s in samples)
        print(f"{name:<12}{ready:>18.3f}{down:>14.3f}")

    agent = RobotAgent(ZeroModel())
    tasks = [Task("cheap", "balance", {"seed": s}) for s in range(args.rollouts)]
    print(f"\n{args.rollouts} rollouts of CartPole (zero agent), 8 at a time")
    print(f"{'placement':<28}{'wall (s)':>10}{'rollouts/s':>12}")
    rows = {}
    for label, provider in [
        ("fresh LocalRuntime", LocalRuntime(CHEAP)),
        ("Shared(LocalRuntime, 8)", Shared(LocalRuntime(CHEAP), width=8)),
    ]:
        t0 = time.perf_counter()
        results = await run(tasks, agent, provider, max_concurrent=8)
        wall = time.perf_counter() - t0
        errors = [r.error for r in results if r.error]
        assert not errors, errors[:1]
        rows[label] = wall
        steps = int(np.sum([r.steps for r in results]))
        print(f"{label:<28}{wall:>10.2f}{args.rollouts / wall:>12.2f}   ({steps} steps)")
    fresh, shared = rows.values()
    print(f"\nShared(width=8) is {fresh / shared:.1f}x faster than a fresh substrate per rollout")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=32)
    parser.add_argument("--no-docker", action="store_true")
    asyncio.run(main(parser.parse_args()))
