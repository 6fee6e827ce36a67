"""Episodes/s of the example rows: LocalRuntime vs RayRuntime on a real local Ray cluster.

Starts the same two-node loopback cluster as tests/runtime/test_ray.py
(tests/helpers/ray_cluster.py),
then runs the example suite's rows (examples/envs/pendulum.py: 3 pendulum + 3 cartpole
rows) ``--group`` times each with the zero agent, ``--concurrency`` rollouts at once:

* local: ``LocalRuntime`` (a fresh in-process env server per rollout);
* subprocess: ``SubprocessRuntime`` (a fresh ``python -m pytest_hud.serve`` per rollout);
* ray: ``RayRuntime`` (a fresh actor running that server per rollout);
* ray shared: ``Shared(RayRuntime, width=1)`` (one actor per env, reused);
* delegated: each whole rollout (``LocalRuntime`` + ``RobotAgent(ZeroModel())``) as a
  Ray task (``delegated_rollout``), results folded back.

Every rollout's (steps, reward) must match local's; the figures are wall time for the
whole batch. The cluster is stopped by the process groups it started.

    python bench/ray_runtime.py [--group 2] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from agents import zero_agent  # noqa: E402
from ray_cluster import bench_cluster  # noqa: E402

from pytest_hud import LocalRuntime, Shared, SubprocessRuntime, Taskset, run  # noqa: E402
from pytest_hud.robot import RobotAgent  # noqa: E402
from pytest_hud.robot.agent.model import ZeroModel  # noqa: E402
from pytest_hud.runtime.ray import RayRuntime  # noqa: E402
from pytest_hud.runtime.ray.delegate import delegated_rollout  # noqa: E402

PENDULUM = ROOT / "examples" / "envs" / "pendulum.py"


async def delegated(rows: list[Any], args: argparse.Namespace) -> list[Any]:
    agent, gate = RobotAgent(ZeroModel(), name="zero"), asyncio.Semaphore(args.concurrency)

    async def one(task: Any, index: int) -> Any:
        async with gate:
            return await delegated_rollout(task, agent, LocalRuntime(PENDULUM), index=index)

    return list(await asyncio.gather(*(one(t, i) for t in rows for i in range(args.group))))


async def measure(name: str, runtime: Any, args: argparse.Namespace) -> tuple[float, list[Any]]:
    rows = list(Taskset.load(PENDULUM))
    start = time.perf_counter()
    if runtime == "delegated":
        results = await delegated(rows, args)
    else:
        results = await run(
            rows, zero_agent, runtime=runtime, group=args.group, max_concurrent=args.concurrency
        )
    wall = time.perf_counter() - start
    errors = [r.error for r in results if r.error]
    if errors:
        raise SystemExit(f"{name}: {len(errors)} rollouts errored; first:\n{errors[0]}")
    n = len(results)
    print(f"{name:<12} {n:>3} episodes in {wall:6.2f} s = {n / wall:5.2f} episodes/s", flush=True)
    return wall, [(r.task.key, r.steps, r.total_reward) for r in results]


async def main(args: argparse.Namespace) -> None:
    base_wall, base = await measure("local", LocalRuntime(PENDULUM), args)
    for name, runtime in [
        ("subprocess", SubprocessRuntime(PENDULUM)),
        ("ray", RayRuntime(PENDULUM)),
        ("ray shared", Shared(RayRuntime(PENDULUM), width=1)),
        ("delegated", "delegated"),
    ]:
        wall, outcome = await measure(name, runtime, args)
        assert outcome == base, f"{name} differs from local"
        print(f"{'':<12} {wall / base_wall:5.2f}x local's wall time; same steps and rewards")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    t0 = time.perf_counter()
    with bench_cluster():
        print(f"cluster up (2 nodes, 127.0.0.1) in {time.perf_counter() - t0:.1f} s")
        asyncio.run(main(args))


if __name__ == "__main__":
    cli()
