"""Warm pool benchmark: how much of the docker runtime's boot the pool hides.

N short CartPole episodes on the docker runtime (a fresh container per rollout), at
concurrency 1 and 4, three ways side by side in one run:

- ``off``: the pool off (``warm=0``): each rollout boots its container when it starts;
- ``inline``: the pool on, but each rollout exits its own substrate before it ends (the
  pool before it exited finished rollouts' substrates behind them);
- ``on``: the pool on (``warm=c``, what ``auto`` gives docker: one substrate booted
  ahead per concurrent slot, finished ones exited behind their rollouts);
- ``up``: the episodes alone: the same rollouts on one container already up
  (``Shared(width=c)``, booted before the clock starts), the floor the pool aims for.

The policy is a zero model that takes ``--latency`` seconds per forward off the event
loop (a stand-in for a policy on a GPU or a policy server, which this machine does not
have: the episode waits on it without using the CPU the boots need). Per-rollout wall is
the batch's wall over N; the hidden fraction is ``(off - on) / (off - up)``: 1.0 means
the pool's rollouts cost what the episodes alone cost.

    PYTHONPATH=$PWD .venv/bin/python bench/warm.py [--rollouts 12] [--latency 0.3] [--reps 1]
        [--concurrency 1 4] [--runtime docker|subprocess|local] [--sim-ports 1]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_hud import Shared, Task, run  # noqa: E402
from pytest_hud.robot import RobotAgent, ZeroModel  # noqa: E402
from pytest_hud.runtime.warm import WarmPool  # noqa: E402

MODES = ("off", "inline", "on", "up")
CHEAP = ROOT / "bench" / "envs" / "cheap.py"


class LatencyModel(ZeroModel):
    """Zeros after ``latency`` seconds, each row on its own (as a policy server answers
    concurrent requests while the client's CPU idles)."""

    def __init__(self, latency: float) -> None:
        super().__init__()
        self.latency = latency

    async def ainfer(self, row: dict[str, Any]) -> Any:
        await asyncio.sleep(self.latency)
        return await super().ainfer(row)


def make_provider(kind: str, sim_ports: int = 1) -> Any:
    """The docker runtime (the image bench/placement.py builds), or local / subprocess."""
    if kind != "docker":
        from pytest_hud import LocalRuntime, SubprocessRuntime

        return (LocalRuntime if kind == "local" else SubprocessRuntime)(CHEAP)
    from pytest_hud.runtime.docker import DockerRuntime, build_image

    tag = build_image(
        "pytest-hud-bench:placement",  # the image bench/placement.py builds
        module="envs/cheap.py",
        extra_files={"envs": ROOT / "bench" / "envs"},
    )
    # sim_ports: what --hud-runtime=docker publishes for a one-robot module (docker_auto)
    return DockerRuntime(tag, labels={"pytest-hud.bench": "warm"}, sim_ports=sim_ports)


async def one_batch(provider: Any, agent: Any, tasks: list[Task], c: int, mode: str) -> float:
    """Seconds for the batch, per rollout; every row must grade without an error."""
    if mode == "up":
        async with Shared(provider, width=c) as shared:
            await run(tasks[:1], agent, shared)  # boot it before the clock starts
            t0 = time.perf_counter()
            results = await run(tasks, agent, shared, max_concurrent=c)
    else:
        t0 = time.perf_counter()
        warm = 0 if mode == "off" else c  # on: what auto gives docker (any runtime here)
        behind = WarmPool._exit_behind
        if mode == "inline":  # the rollout exits its substrate itself
            WarmPool._exit_behind = lambda self, cm: False  # type: ignore[method-assign]
        try:
            results = await run(tasks, agent, provider, max_concurrent=c, warm=warm)
        finally:
            WarmPool._exit_behind = behind  # type: ignore[method-assign]
    wall = time.perf_counter() - t0
    errors = [r.error for r in results if r.error]
    assert not errors, errors[:1]
    return wall / len(tasks)


async def main(args: argparse.Namespace) -> None:
    provider = make_provider(args.runtime, args.sim_ports)
    agent = RobotAgent(LatencyModel(args.latency))
    tasks = [Task("cheap", "balance", {"seed": s}) for s in range(args.rollouts)]
    samples: dict[tuple[int, str], list[float]] = {}
    for _ in range(args.reps):
        for c in args.concurrency:
            for mode in MODES:  # side by side: each rep runs every mode once
                per = await one_batch(provider, agent, tasks, c, mode)
                samples.setdefault((c, mode), []).append(per)
    print(
        f"{args.rollouts} CartPole rollouts on {args.runtime}, zero policy with "
        f"{args.latency * 1000:.0f} ms per forward, median of {args.reps}; per-rollout wall (s)"
    )
    print(
        f"{'concurrency':>11}{'off':>9}{'inline':>9}{'on':>9}{'up':>9}{'on/up':>8}"
        f"{'hidden inline':>14}{'hidden':>8}"
    )
    for c in args.concurrency:
        off, inline, on, up = (statistics.median(samples[(c, m)]) for m in MODES)

        def hidden(x: float, off: float = off, up: float = up) -> float:
            return (off - x) / (off - up) if off > up else float("nan")

        print(
            f"{c:>11}{off:>9.3f}{inline:>9.3f}{on:>9.3f}{up:>9.3f}{on / up:>8.2f}"
            f"{hidden(inline):>14.0%}{hidden(on):>8.0%}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=12)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument(
        "--sim-ports",
        type=int,
        default=1,
        help="docker: sim ports to publish (DockerRuntime's default: 8)",
    )
    parser.add_argument("--runtime", choices=["docker", "subprocess", "local"], default="docker")
    asyncio.run(main(parser.parse_args()))
