"""Per-rollout overhead of a fresh substrate: plain spawn vs fork server vs Shared.

Runs N short episodes (CartPole, --max-steps ticks, zero agent, one at a time) for each
of six placements, interleaved in blocks so that load drifts hit all of them alike:

    local       fresh LocalRuntime, sims spawned plainly   (PYTEST_HUD_FORK=0)
    local       fresh LocalRuntime, sims forked by a zygote (the default)
    local       Shared(LocalRuntime, width=4): one substrate for every episode
    subprocess  the same three with SubprocessRuntime (env server + its sims forked)

Prints the mean wall per rollout and the overhead over Shared (what a fresh substrate
costs), and the ratios. The first rollout of each placement (the zygote's boot for the
fork rows) is left out of the means and printed on its own.

    PYTHONPATH=$PWD .venv/bin/python bench/overhead.py [--episodes 200] [--block 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_hud import LocalRuntime, Shared, SubprocessRuntime, Task  # noqa: E402
from pytest_hud.forkserver import client as forkserver  # noqa: E402
from pytest_hud.robot import RobotAgent, ZeroModel  # noqa: E402
from pytest_hud.runtime import rollout  # noqa: E402

ENV = ROOT / "bench" / "envs" / "cartpole.py"


class Placement:
    def __init__(self, runtime: str, mode: str, make: Callable[[], Any]) -> None:
        self.runtime, self.mode, self.make = runtime, mode, make
        self.provider: Any = None
        self.first = 0.0
        self.walls: list[float] = []
        self.steps = 0

    @property
    def fork(self) -> bool:
        return self.mode != "plain"


async def episode(place: Placement, agent: RobotAgent, seed: int) -> float:
    os.environ[forkserver.SWITCH] = "1" if place.fork else "0"
    t0 = time.perf_counter()
    result = await rollout(Task("cartpole", "balance", {"seed": seed}), agent, place.provider)
    wall = time.perf_counter() - t0
    if result.error:
        raise SystemExit(f"{place.runtime}/{place.mode}: {result.error}")
    place.steps = result.steps
    return wall


async def main(args: argparse.Namespace) -> None:
    places = [
        Placement(rt, mode, make)
        for rt, make in (
            ("local", lambda: LocalRuntime(ENV)),
            ("subprocess", lambda: SubprocessRuntime(ENV)),
        )
        for mode in ("plain", "fork", "shared")
    ]
    agent = RobotAgent(ZeroModel(), max_steps=args.max_steps)
    for place in places:
        inner = place.make()
        place.provider = Shared(inner, width=4) if place.mode == "shared" else inner
        if place.mode == "shared":
            await place.provider.__aenter__()
        place.first = await episode(place, agent, 0)
    seed = 1
    while any(len(p.walls) < args.episodes for p in places):
        for place in places:
            for _ in range(min(args.block, args.episodes - len(place.walls))):
                place.walls.append(await episode(place, agent, seed))
                seed += 1
    for place in places:
        if place.mode == "shared":
            await place.provider.__aexit__(None, None, None)
    forkserver.shutdown()
    report(places, args)


def report(places: list[Placement], args: argparse.Namespace) -> None:
    print(f"{args.episodes} episodes per placement, {places[0].steps} steps each, one at a time")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    head = f"{'runtime':<11}{'substrate':<10}{'first ms':>10}{'mean ms':>10}{'p50 ms':>9}"
    print(head + f"{'p90 ms':>9}{'overhead ms':>13}")
    shared = {p.runtime: statistics.mean(p.walls) for p in places if p.mode == "shared"}
    over: dict[tuple[str, str], float] = {}
    for p in places:
        mean = statistics.mean(p.walls)
        p90 = statistics.quantiles(p.walls, n=10)[-1] if len(p.walls) > 1 else mean
        over[p.runtime, p.mode] = 1000 * (mean - shared[p.runtime])
        print(
            f"{p.runtime:<11}{p.mode:<10}{1000 * p.first:>10.0f}{1000 * mean:>10.1f}"
            f"{1000 * statistics.median(p.walls):>9.1f}{1000 * p90:>9.1f}"
            f"{over[p.runtime, p.mode]:>13.1f}"
        )
    for rt in ("local", "subprocess"):
        plain, fork = over[rt, "plain"], over[rt, "fork"]
        print(
            f"{rt}: fresh overhead {plain:.0f} ms plain -> {fork:.0f} ms forked "
            f"({plain / max(fork, 1e-9):.1f}x less); a forked fresh rollout takes "
            f"{(fork + shared[rt] * 1000) / (shared[rt] * 1000):.2f}x a Shared one"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
