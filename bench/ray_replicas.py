"""Episodes/s of 8 sim actors feeding 1 vs 2 PolicyServer replicas (Ray actors).

Starts the two-node loopback cluster of tests/runtime/test_ray.py
(tests/helpers/ray_cluster.py). Eight
pendulum rows (seeds 0..7, 200 steps each) run at once, each env server in its own
RayRuntime actor (``num_cpus=0.25``); the policy is ``PolicyReplicas(BusyZero, n)``:
n PolicyServer actors whose forward costs a fixed ``--forward-ms`` of single-threaded
CPU work whatever the batch width (a compute-bound batching policy, as a VLA forward is
at small widths) and returns zeros. Every rollout goes to the next replica in turn.

Reported per n: wall time of the 8 episodes, episodes/s, control ticks/s, forwards per
replica and their mean width. On this 2-core machine two replicas contend for the same
cores as the sims and each other, so the figure bounds what a second replica can give
here; on a cluster each replica would have its own cores or GPU.

    python bench/ray_replicas.py [--forward-ms 20] [--sims 8] [--replicas 1 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from ray_cluster import bench_cluster  # noqa: E402

from pytest_hud import Task, run  # noqa: E402
from pytest_hud.robot.agent.model import ZeroModel  # noqa: E402
from pytest_hud.robot.agent.replicas import PolicyReplicas  # noqa: E402
from pytest_hud.runtime.ray import RayRuntime  # noqa: E402

PENDULUM = ROOT / "examples" / "envs" / "pendulum.py"


class BusyZero(ZeroModel):
    """Zeros after ``ms`` of CPU work per forward (thread time, so waiting does not count)."""

    def __init__(self, ms: float) -> None:
        super().__init__()
        self.ms = ms
        self.work = np.ones((64, 64), np.float32)

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        end = time.thread_time() + self.ms / 1000
        while time.thread_time() < end:
            self.work = np.tanh(self.work @ self.work / 64)
        return super().infer(batch)


async def measure(n: int, args: argparse.Namespace) -> None:
    rows = [Task("pendulum", "swing_up", {"seed": s}) for s in range(args.sims)]
    env = {"env_vars": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}}
    ms = args.forward_ms
    async with PolicyReplicas(lambda: BusyZero(ms), n, num_cpus=0.5, runtime_env=env) as pol:
        start = time.perf_counter()
        results = await run(
            rows,
            pol.agent(),
            runtime=RayRuntime(PENDULUM, num_cpus=0.25),
            max_concurrent=args.sims,
        )
        wall = time.perf_counter() - start
        batches = await pol.batches()
    errors = [r.error for r in results if r.error]
    if errors:
        raise SystemExit(f"{len(errors)} rollouts errored; first:\n{errors[0]}")
    ticks = sum(r.steps or 0 for r in results)
    widths = ", ".join(f"{len(b)} x {np.mean(b):.1f}" for b in batches)
    print(
        f"{n} replica(s): {len(results)} episodes in {wall:6.2f} s = "
        f"{len(results) / wall:5.2f} episodes/s, {ticks / wall:6.1f} ticks/s; "
        f"forwards x mean width per replica: {widths}",
        flush=True,
    )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--forward-ms", type=float, default=20.0)
    parser.add_argument("--sims", type=int, default=8)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    with bench_cluster():
        for n in args.replicas:
            asyncio.run(measure(n, args))


if __name__ == "__main__":
    cli()
