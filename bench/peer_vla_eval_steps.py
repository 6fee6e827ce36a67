"""Where a control step's time goes: pytest-hud's vla-eval path against vla-eval's own loop.

No pytest, no start-up: N episodes in flight of the CartPole StepBenchmark
(tests/helpers/vla_eval_peer/cartpole_bench.py) against one vla-eval model server process
(the scripted controller behind vla-eval's PredictModelServer on 127.0.0.1, its
``max_batch_size`` = N so a batch is dispatched once every episode in flight sent its
observation, unless ``--batch``), each run long enough to time (``--steps`` per episode).
From the floor up:

    vla-eval       N processes, each vla-eval's own SyncEpisodeRunner + Connection (what
                   one shard runs per episode: the benchmark steps in its process)
    hud bare       N bare loops in one process, each stepping its own benchmark right
                   there and asking the server through pytest-hud's VlaEvalSession: the
                   floor of any client (no robot wire, no agent stack)
    hud default    N rollouts of pytest-hud's VlaEvalAgent in one process, the benchmark
                   served in the env server's process (the default placement; here this
                   process): no sim process, no socket between agent and benchmark
    hud sim process  the same with the benchmark in a sim process of its own (N slots,
                   ``inline=False``, ``--hud-sim-process``) and
                   the real openpi/0 WebSocket between them
    hud by hand    those processes and sockets driven by the smallest loop that can be
                   written over them (RobotClient.step + VlaEvalSession.act, nothing else)

For each: wall per tick (one step of every episode in flight) and the CPU each process
spent per tick (from /proc), best of ``--reps``, variants interleaved. A tick is strictly
sequential at N=1 (the processes wake each other in turn), so its wall is about the sum of
the CPU. ``--report`` writes the table into docs/performance.md.

    PYTHONPATH=$PWD .venv/bin/python bench/peer_vla_eval_steps.py [--inflight 1,4] [--steps 2000]
        [--reps 3] [--report]
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


async def bare(url: str, server: int, n: int, steps: int) -> Row:
    """N bare loops in this process: the benchmark stepped here, VlaEvalSession asking."""
    import numpy as np
    from cartpole_bench import CartPoleBenchmark

    from pytest_hud.interop.vla_eval.session import VlaEvalSession

    async def loop(session: VlaEvalSession) -> int:
        bench = CartPoleBenchmark(max_steps=steps, goals=(1e9,))
        bench._task = TASK
        raw, done = bench.reset(TASK), 0
        await session.start_episode(TASK)
        for _ in range(steps):
            action = await session.act(bench.make_obs(raw, TASK))
            result = bench.step({"actions": np.asarray(action)})
            raw, done = result.obs, done + 1
            if result.done:
                break
        await session.end_episode({"success": True})
        return done

    sessions = [VlaEvalSession(url) for _ in range(n)]
    for session in sessions:
        await session.open()
    try:
        me, srv, t0 = cpu_seconds(os.getpid()), cpu_seconds(server), time.perf_counter()
        ticks = (await asyncio.gather(*(loop(s) for s in sessions)))[0]
        wall = time.perf_counter() - t0
        me, srv = cpu_seconds(os.getpid()) - me, cpu_seconds(server) - srv
    finally:
        for session in sessions:
            await session.close()
    return {"wall": 1e3 * wall / ticks, "client": 1e3 * me / ticks, "server": 1e3 * srv / ticks}


async def hud(url: str, server: int, n: int, steps: int, by_hand: bool, inline: bool) -> Row:
    from cartpole_bench import CartPoleBenchmark

    from pytest_hud.interop.vla_eval.agent import VlaEvalAgent
    from pytest_hud.interop.vla_eval.env import serve_benchmark

    sim = serve_benchmark(
        CartPoleBenchmark, max_steps=steps, goals=(1e9,), num_envs=n, inline=inline
    )
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

        sim_pid = sim.pid or os.getpid()  # inline: the sim is this process
        before = (cpu_seconds(os.getpid()), cpu_seconds(sim_pid), cpu_seconds(server))
        t0 = time.perf_counter()
        ticks = (await asyncio.gather(*(run(g) for g in grants)))[0]
        wall = time.perf_counter() - t0
        after = (cpu_seconds(os.getpid()), cpu_seconds(sim_pid), cpu_seconds(server))
        for g in grants:
            await sim.result(token=g["token"])
    finally:
        await sim.stop()
    agent_s, sim_s, server_s = (b - a for a, b in zip(before, after, strict=True))
    row = {"wall": 1e3 * wall / ticks, "client": 1e3 * agent_s / ticks}
    if not inline:  # inline, the sim's CPU is the agent's process's
        row["sim"] = 1e3 * sim_s / ticks
    return row | {"server": 1e3 * server_s / ticks}


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


VARIANTS = ("vla-eval", "hud bare", "hud default", "hud sim process", "hud by hand")


async def measure(name: str, url: str, server: int, n: int, steps: int) -> Row:
    if name == "vla-eval":
        return await vla_eval(url, server, n, steps)
    if name == "hud bare":
        return await bare(url, server, n, steps)
    return await hud(url, server, n, steps, name == "hud by hand", name == "hud default")


async def main(args: argparse.Namespace) -> None:
    from server_proc import controller_server

    header = ["in flight", "variant", "wall ms/tick", "vs vla-eval", "CPU ms/tick by process"]
    rows: list[list[str]] = []
    print("  ".join(header))
    for n in args.inflight:
        batch = str(args.batch or n)
        with controller_server("--batch", batch, "--wait", str(args.wait)) as (port, proc):
            url = f"ws://127.0.0.1:{port}"
            best: dict[str, Row] = {}
            names = args.variants
            for rep in range(args.reps):
                k = rep % len(names)  # rotate the order: no variant always runs first
                for name in names[k:] + names[:k]:
                    row = await measure(name, url, proc.pid, n, args.steps)
                    if name not in best or row["wall"] < best[name]["wall"]:
                        best[name] = row
            ref = best["vla-eval"]["wall"]
            for name in names:
                row = best[name]
                who = "shards" if name == "vla-eval" else "client"
                parts = [f"{who} {row['client']:.3f}"]
                parts += [f"sim {row['sim']:.3f}"] if "sim" in row else []
                parts += [f"server {row['server']:.3f}"]
                total = sum(v for k, v in row.items() if k != "wall")
                ratio = "1" if name == "vla-eval" else f"{row['wall'] / ref:.2f}x"
                cpu = ", ".join(parts) + f" (sum {total:.3f})"
                rows.append([str(n), name, f"{row['wall']:.3f}", ratio, cpu])
                print("  ".join(rows[-1]), flush=True)
    if args.report:
        from _report import write_table

        write_table(
            "vla-eval-steps",
            "Where a step's time goes, state only: vla-eval's loop against pytest-hud's, "
            "from the bare client up (bench/peer_vla_eval_steps.py)",
            header,
            rows,
            note=(
                f"One CartPole episode of {args.steps} steps per episode in flight, no pytest, "
                "no start-up; server: the scripted controller behind vla-eval's "
                f"PredictModelServer (max_batch_size {args.batch or 'the number in flight'}, "
                f"window {args.wait * 1e3:g} ms). hud bare: the benchmark stepped in the "
                "client's process, so its CPU is in the client's. Best of "
                f"{args.reps} interleaved reps."
            ),
        )


#: Where a profiled step's own time goes: the first bucket whose words a frame's file holds.
BUCKETS = (
    ("agent stack (RobotAgent, adapter, vla-eval model)", ("robot/agent/", "vla_eval/agent")),
    ("bridge + slot barrier", ("robot/sim/", "vla_eval/bridge")),
    ("codecs (openpi/0 carry, vla-eval msgpack)", ("codec.py", "msgpack")),
    ("transports (WebSocket client, in-process pair, watchdog)", ("robot/wire/",)),
    ("vla-eval session", ("vla_eval/session",)),
    ("the benchmark and its env (same in both harnesses)", ("cartpole", "gymnasium")),
    ("socket and poll syscalls", ("'send'", "'recv", "'poll'", "'sendall'")),
    ("the event loop (asyncio, selectors)", ("asyncio", "selectors")),
)


async def profile(url: str, server: int, steps: int) -> None:
    """One episode of the default variant (1 in flight) under cProfile: each bucket's
    share of the profiled self time, scaled to the client CPU per step measured without
    the profiler in the same run (cProfile inflates Python calls more than C calls, so
    the split is a guide and the total is the measured one). The profile's clock is the
    process's CPU time, so waiting for the server counts nowhere."""
    import cProfile
    import pstats

    plain = await hud(url, server, 1, steps, by_hand=False, inline=True)
    prof = cProfile.Profile(time.process_time)  # CPU time: a blocked poll costs nothing
    prof.enable()
    await hud(url, server, 1, steps, by_hand=False, inline=True)
    prof.disable()

    def bucket(path: str, func: str) -> str:
        where = f"{path} {func}"
        return next((b for b, words in BUCKETS if any(w in where for w in words)), "other")

    own: dict[str, float] = {}
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    for (path, _, func), (_, _, self_s, _, callers) in stats.items():
        name = bucket(path, func)
        if path == "~" and name == "other" and callers:  # a C call: its callers' bucket
            spent = sum(c[2] for c in callers.values()) or 1.0
            for (cpath, _, cfunc), c in callers.items():
                cname = bucket(cpath, cfunc)
                own[cname] = own.get(cname, 0.0) + self_s * c[2] / spent
            continue
        own[name] = own.get(name, 0.0) + self_s
    total = sum(own.values())
    print(f"client CPU {plain['client'] * 1e3:.0f} us a step (measured); split by profile:")
    for name, _ in (*BUCKETS, ("other", ())):
        share = own.get(name, 0.0) / total
        print(f"  {share * plain['client'] * 1e3:6.1f} us  {100 * share:4.1f}%  {name}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--inflight", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4])
    parser.add_argument("--steps", type=int, default=2000, help="steps per episode")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch", type=int, help="server max_batch_size (default: in flight)")
    parser.add_argument("--wait", type=float, default=0.002, help="server max_wait_time (s)")
    parser.add_argument(
        "--variants",
        type=lambda s: tuple(v.strip() for v in s.split(",")),
        default=VARIANTS,
        help=f"comma-separated, vla-eval first (default: {','.join(VARIANTS)})",
    )
    parser.add_argument("--report", action="store_true", help="write docs/performance.md")
    parser.add_argument(
        "--profile", action="store_true", help="where the default variant's client CPU goes"
    )
    args = parser.parse_args()
    if args.profile:

        async def profiled() -> None:
            from server_proc import controller_server

            with controller_server("--batch", "1", "--wait", "0") as (port, proc):
                await profile(f"ws://127.0.0.1:{port}", proc.pid, args.steps)

        asyncio.run(profiled())
    else:
        asyncio.run(main(args))
