"""Benchmark dataset recording: the same evaluation with and without a DatasetWriter.

Two envs, each one vectorized sim in its own process shared by concurrent rollouts:

* Pendulum-v1 (state only: 3 floats, 1 action), episodes of 200 ticks;
* PushT (gym-pusht, a 96x96 RGB camera + 2-d state, 2-d action), episodes capped by
  ``max_steps``; recording encodes the camera to AV1 video.

The agent is a RandomModel (chunks of 1: one inference per tick), so the env and the
harness dominate, the worst case for recording overhead. Reported per env:

* steps/s over the rollouts' window (first tick to last episode end; sim boot excluded),
  without recording, with recording, and their ratio;
* drain: how long ``finalize()`` then waits for the writer thread's queued commits;
* end(): the longest a rollout's ``observer.end`` held the event loop (episode handoff);
* loop lag: the worst lateness of a 10 ms ticker on the event loop while rollouts ran.

An untimed warm-up recording runs first: lerobot's one-off imports and first dataset
creation (a ~5 s import, then one ~80 ms loop stall) are not in the figures.

    python bench/recording.py [--quick] [--repeats N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_hud import LocalRuntime, Shared, Task, run
from pytest_hud.robot import RandomModel, RobotAgent
from pytest_hud.robot.record.writer import DatasetWriter
from pytest_hud.runtime import Environment

PUSHT = "gym_pusht:gym_pusht/PushT-v0"


def episode_env(
    name: str, target: Any, num_envs: int, prompt: str, **gym_kwargs: Any
) -> Environment:
    """An env of one gym sim and one template that runs an episode and returns its grade."""
    env = Environment(name)
    sim = env.gym(target, num_envs=num_envs, prompt=prompt, **gym_kwargs)

    @env.template()
    async def swing(seed: int = 0):
        ep = await sim.reset(seed=seed)
        yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    return env


def pendulum(num_envs: int) -> Environment:
    return episode_env("bench_pendulum", "Pendulum-v1", num_envs, "Swing up.")


def pusht(num_envs: int) -> Environment:
    return episode_env(
        "bench_pusht",
        PUSHT,
        num_envs,
        "Push the T.",
        make_kwargs={"obs_type": "pixels_agent_pos"},
    )


class Window:
    """Observer factory: the first tick and the last episode end over all episodes."""

    def __init__(self) -> None:
        self.first = float("inf")
        self.last = 0.0

    def __call__(self, run: Any, spaces: Any) -> Any:
        window = self

        class Observer:
            def step(self, data: dict, action: Any) -> None:
                window.first = min(window.first, time.perf_counter())

            def end(self, ok: bool) -> dict:
                window.last = max(window.last, time.perf_counter())
                return {}

        return Observer()


class TimedFactory:
    """Wraps the writer's observer factory to time each episode's ``end()``."""

    def __init__(self, factory: Any) -> None:
        self.factory = factory
        self.end_s: list[float] = []

    def __call__(self, run: Any, spaces: Any) -> Any:
        inner = self.factory(run, spaces)
        timings = self.end_s

        class Observer:
            def step(self, data: dict, action: Any) -> None:
                inner.step(data, action)

            def end(self, ok: bool) -> dict:
                t0 = time.perf_counter()
                try:
                    return inner.end(ok)
                finally:
                    timings.append(time.perf_counter() - t0)

        return Observer()


async def lag_probe(stop: asyncio.Event, out: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.01)
        out.append(time.perf_counter() - t0 - 0.01)


async def evaluate(
    build: Any, template: str, n: int, width: int, max_steps: int | None, root: Path | None
) -> dict[str, float]:
    agent = RobotAgent(RandomModel(seed=0), max_steps=max_steps)
    writer = timed = None
    if root is not None:
        writer = DatasetWriter(root)
        timed = TimedFactory(writer.observer)
        agent.observers.append(timed)
    window = Window()
    agent.observers.append(window)
    env_name = build(1).name

    def substrate(task: Task) -> Environment:
        return build(width)

    tasks = [Task(env_name, template, {"seed": s}) for s in range(n)]
    if writer is not None:  # the plugin calls check() at the first run: lerobot imports here
        writer.check(_CONTRACTS[build])
    stop = asyncio.Event()
    lags: list[float] = []
    ticker = asyncio.create_task(lag_probe(stop, lags))
    results = await run(
        tasks, agent, Shared(LocalRuntime(substrate), width=width), max_concurrent=width
    )
    stop.set()
    await ticker
    errors = [r.error for r in results if r.error]
    if errors:
        raise RuntimeError(errors[0])
    steps = sum(r.agent_info["steps"] for r in results)
    out = {
        "steps": steps,
        "steps_per_s": steps / (window.last - window.first),
        "loop_lag_ms": 1000 * max(lags, default=0.0),
    }
    if writer is not None:
        t0 = time.perf_counter()
        writer.finalize()
        out["drain_s"] = time.perf_counter() - t0
        out["end_ms"] = 1000 * max(timed.end_s)
        out["episodes"] = writer.episodes
    return out


_CONTRACTS: dict[Any, dict[str, Any]] = {}


async def contract_of(build: Any) -> None:
    """The contract the env's sim publishes (boots it once), for ``writer.check``."""
    env = build(1)
    endpoint = next(iter(env.capabilities.values()))
    await endpoint.start()
    try:
        _CONTRACTS[build] = endpoint.contract.to_dict()
    finally:
        await endpoint.stop()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    quick = args.quick
    cases = [
        ("Pendulum-v1 (state)", pendulum, "swing", 4 if quick else 8, 4, None),
        ("PushT 96x96 (image)", pusht, "swing", 4 if quick else 8, 4, 50 if quick else 150),
    ]
    report: dict[str, Any] = {}
    tmp = Path(tempfile.mkdtemp(prefix="hud-bench-rec-"))
    try:
        # warm-up, untimed: lerobot's one-off imports and first dataset creation
        await contract_of(pendulum)
        await evaluate(pendulum, "swing", 1, 1, 5, tmp / "warmup")
        for name, build, template, n, width, max_steps in cases:
            await contract_of(build)
            plain, rec = [], []
            for i in range(args.repeats):
                plain.append(await evaluate(build, template, n, width, max_steps, None))
                root = tmp / f"{build.__name__}-{i}"
                rec.append(await evaluate(build, template, n, width, max_steps, root))
            best_plain = max(plain, key=lambda r: r["steps_per_s"])
            best_rec = max(rec, key=lambda r: r["steps_per_s"])
            report[name] = {
                "rollouts": n,
                "concurrent": width,
                "steps": best_plain["steps"],
                "plain_steps_per_s": best_plain["steps_per_s"],
                "rec_steps_per_s": best_rec["steps_per_s"],
                "overhead": best_plain["steps_per_s"] / best_rec["steps_per_s"],
                "drain_s": statistics.median(r["drain_s"] for r in rec),
                "end_ms": max(r["end_ms"] for r in rec),
                "plain_lag_ms": max(r["loop_lag_ms"] for r in plain),
                "rec_lag_ms": max(r["loop_lag_ms"] for r in rec),
                "episodes": best_rec["episodes"],
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report


def show(report: dict[str, Any]) -> None:
    head = (
        f"{'env':<22}{'steps':>7}{'plain st/s':>12}{'rec st/s':>11}{'ratio':>8}"
        f"{'drain s':>9}{'end() ms':>10}{'lag ms plain/rec':>18}"
    )
    print(head)
    for name, r in report.items():
        print(
            f"{name:<22}{r['steps']:>7}{r['plain_steps_per_s']:>12.0f}{r['rec_steps_per_s']:>11.0f}"
            f"{r['overhead']:>7.2f}x{r['drain_s']:>9.2f}{r['end_ms']:>10.2f}"
            f"{r['plain_lag_ms']:>9.1f}/{r['rec_lag_ms']:<8.1f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rollouts")
    parser.add_argument("--repeats", type=int, default=2, help="runs per setting (best kept)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    ns = parser.parse_args()
    figures = asyncio.run(main(ns))
    show(figures)
    if ns.json:
        ns.json.write_text(json.dumps(figures, indent=2))
