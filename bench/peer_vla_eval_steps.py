"""Where a control step's time goes: pytest-hud's vla-eval path against vla-eval's own loop.

No pytest, no start-up: N episodes in flight of the CartPole StepBenchmark
(tests/helpers/vla_eval_peer/cartpole_bench.py) against one vla-eval model server process
(the scripted controller behind vla-eval's PredictModelServer on 127.0.0.1, its
``max_batch_size`` = N so a batch is dispatched once every episode in flight sent its
observation, unless ``--batch``), each run long enough to time (``--steps`` per episode):

    vla-eval       N processes, each vla-eval's own SyncEpisodeRunner + Connection (what
                   one shard runs per episode: the benchmark steps in its process)
    hud agent      N rollouts of pytest-hud's VlaEvalAgent in one process, the benchmark
                   served by env.vla_eval in its sim process (N slots), the real openpi/0
                   WebSocket between them
    hud by hand    the same processes and sockets driven by the smallest loop that can be
                   written over them (RobotClient.step + VlaEvalSession.act, nothing else):
                   the floor of that architecture

For each: wall per tick (one step of every episode in flight) and the CPU each process
spent per tick (from /proc), best of ``--reps``. A tick is strictly sequential at N=1 (the
processes wake each other in turn), so its wall is about the sum of the CPU.

    PYTHONPATH=$PWD .venv/bin/python bench/peer_vla_eval_steps.py [--inflight 1,4] [--steps 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "tests" / "helpers" / "vla_eval_peer"
sys.path[:0] = [str(HELPERS), str(ROOT)]

TASK = {"name": "goal0", "goal": 1e9, "episode_idx": 7}  # balanced for every step asked

SHARD = """
import asyncio, sys, time
from vla_eval.connection import Connection
from vla_eval.runners.sync_runner import SyncEpisodeRunner
from cartpole_bench import CartPoleBenchmark

async def main(url, steps):
    bench = CartPoleBenchmark(max_steps=steps, goals=(1e9,))
    conn = Connection(url)
    await conn.connect()
    print("ready", flush=True)
    sys.stdin.readline()
    cpu = time.process_time()
    task = {"name": "goal0", "goal": 1e9, "episode_idx": 7}
    out = await SyncEpisodeRunner().run_episode(bench, task, conn, max_steps=steps)
    print(out["steps"], time.process_time() - cpu, flush=True)
    await conn.close()

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Row = dict[str, float]  # "wall" and CPU per tick by process, in ms


async def vla_eval(url: str, server: int, n: int, steps: int) -> Row:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HELPERS), str(ROOT)])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SHARD, url, str(steps)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(n)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        srv, t0 = cpu_seconds(server), time.perf_counter()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.stdout.readline().split() for p in procs if p.stdout is not None]
        wall, srv = time.perf_counter() - t0, cpu_seconds(server) - srv
    finally:
        for p in procs:
            p.wait(60)
    ticks = int(outs[0][0])
    shards = sum(float(o[1]) for o in outs)
    return {"wall": 1e3 * wall / ticks, "client": 1e3 * shards / ticks, "server": 1e3 * srv / ticks}


async def hud(url: str, server: int, n: int, steps: int, by_hand: bool) -> Row:
    from cartpole_bench import CartPoleBenchmark

    from pytest_hud.interop.vla_eval.agent import VlaEvalAgent
    from pytest_hud.interop.vla_eval.env import serve_benchmark

    sim = serve_benchmark(CartPoleBenchmark, max_steps=steps, goals=(1e9,), num_envs=n)
    await sim.start()
    try:
        grants = [await sim.reset(task=TASK) for _ in range(n)]
        cap = await sim.capability()
        agent = VlaEvalAgent(url)
        run: Callable[[dict[str, Any]], Awaitable[int]]
        if by_hand:
            run = lambda g: minimal_loop(cap, g["token"], url)  # noqa: E731
        else:

            async def run(g: dict[str, Any]) -> int:
                report = await agent.run_episode(cap, token=g["token"], prompt=g["prompt"])
                return report.steps

        assert sim.pid is not None
        before = (cpu_seconds(os.getpid()), cpu_seconds(sim.pid), cpu_seconds(server))
        t0 = time.perf_counter()
        ticks = (await asyncio.gather(*(run(g) for g in grants)))[0]
        wall = time.perf_counter() - t0
        after = (cpu_seconds(os.getpid()), cpu_seconds(sim.pid), cpu_seconds(server))
        for g in grants:
            await sim.result(token=g["token"])
    finally:
        await sim.stop()
    agent_s, sim_s, server_s = (b - a for a, b in zip(before, after, strict=True))
    return {
        "wall": 1e3 * wall / ticks,
        "client": 1e3 * agent_s / ticks,
        "sim": 1e3 * sim_s / ticks,
        "server": 1e3 * server_s / ticks,
    }


async def minimal_loop(cap: dict[str, Any], token: str, url: str) -> int:
    """The fewest lines that run an episode over the same two sockets."""
    import numpy as np

    from pytest_hud.interop.vla_eval.session import VlaEvalSession
    from pytest_hud.robot.wire.client import RobotClient

    session = VlaEvalSession(url)
    await session.open()
    await session.start_episode({"name": "goal0"})
    client = await RobotClient.connect(cap, token=token)
    obs, steps = await client.get_observation(), 0
    while not obs["terminated"]:
        state = np.asarray(obs["data"]["states"], np.float32)
        action = await session.act({"states": state, "task_description": "balance the pole"})
        obs = await client.step(np.asarray(action, np.float32).reshape(-1))
        steps += 1
    await client.close()
    await session.end_episode({})
    await session.close()
    return steps


async def main(args: argparse.Namespace) -> None:
    from server_proc import controller_server

    print(f"{'in flight':<10}{'variant':<14}{'wall ms/tick':>13}   CPU ms/tick by process")
    for n in args.inflight:
        batch = str(args.batch or n)
        with controller_server("--batch", batch, "--wait", str(args.wait)) as (port, proc):
            url = f"ws://127.0.0.1:{port}"
            best: dict[str, Row] = {}
            for _ in range(args.reps):
                for name in ("vla-eval", "hud agent", "hud by hand"):
                    if name == "vla-eval":
                        row = await vla_eval(url, proc.pid, n, args.steps)
                    else:
                        row = await hud(url, proc.pid, n, args.steps, name == "hud by hand")
                    if name not in best or row["wall"] < best[name]["wall"]:
                        best[name] = row
            for name, row in best.items():
                who = "shards" if name == "vla-eval" else "agent"
                parts = [f"{who} {row['client']:.3f}"]
                parts += [f"sim {row['sim']:.3f}"] if "sim" in row else []
                parts += [f"server {row['server']:.3f}"]
                total = sum(v for k, v in row.items() if k != "wall")
                print(
                    f"{n:<10}{name:<14}{row['wall']:>13.3f}   "
                    + ", ".join(parts)
                    + f" (sum {total:.3f})"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--inflight", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4])
    parser.add_argument("--steps", type=int, default=2000, help="steps per episode")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch", type=int, help="server max_batch_size (default: in flight)")
    parser.add_argument("--wait", type=float, default=0.002, help="server max_wait_time (s)")
    asyncio.run(main(parser.parse_args()))
