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
import functools
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
    return await shards(SHARD, url, server, n, steps)


async def shards(script: str, url: str, server: int, n: int, steps: int) -> Row:
    """N processes running ``script`` (one episode each), started together once all are up."""
    path = os.pathsep.join([str(HELPERS), str(ROOT / "bench"), str(ROOT)])
    env = {**os.environ, "PYTHONPATH": path}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, url, str(steps)],
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


BARE = """
import asyncio, sys
from peer_vla_eval_steps import bare
import cartpole_bench, pytest_hud.interop.vla_eval.connection  # imported before the clock starts

async def main(url, steps):
    print("ready", flush=True)
    sys.stdin.readline()
    row = await bare(url, 0, 1, steps)  # its CPU from the first step on, as a shard's
    print(int(row["ticks"]), row["client"] * row["ticks"] / 1e3, flush=True)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


async def bare_procs(url: str, server: int, n: int, steps: int) -> Row:
    """N bare loops, each in a process of its own (as vla-eval's shards are)."""
    return await shards(BARE, url, server, n, steps)


def spin(seconds: float) -> None:
    """Busy-wait: a client that takes ``seconds`` longer to answer, without sleeping."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def bare_episode(
    session: Any, bench: Any, task: dict[str, Any], max_steps: int, delay: float = 0.0
) -> tuple[int, float]:
    """One episode of the bare client, the floor of any harness: the benchmark stepped in a
    plain loop, ``session`` (pytest-hud's VlaEvalSession) asking the server, ``delay``
    seconds of busy work before each answer; its steps and reward total."""
    import numpy as np

    bench._task = task
    raw, steps, total, done = bench.reset(task), 0, 0.0, False
    await session.start_episode(task)
    while steps < max_steps and not done:
        action = await session.act(bench.make_obs(raw, task))
        if delay:
            spin(delay)
        result = bench.step({"actions": np.asarray(action)})
        raw, steps, total, done = result.obs, steps + 1, total + result.reward, result.done
    await session.end_episode({"metrics": {"total_reward": total}, "steps": steps})
    return steps, total


async def bare(url: str, server: int, n: int, steps: int, delay: float = 0.0) -> Row:
    """N bare loops in this process: the benchmark stepped here, VlaEvalSession asking;
    ``delay`` seconds of busy work added before each answer (the server-timing floor)."""
    from cartpole_bench import CartPoleBenchmark

    from pytest_hud.interop.vla_eval.connection import VlaEvalSession

    async def loop(session: VlaEvalSession) -> int:
        bench = CartPoleBenchmark(max_steps=steps, goals=(1e9,))
        return (await bare_episode(session, bench, TASK, steps, delay))[0]

    sessions = [VlaEvalSession(url) for _ in range(n)]
    for session in sessions:
        await session.open()
    server_cpu = (lambda: cpu_seconds(server)) if server else (lambda: 0.0)
    try:
        me, srv, t0 = cpu_seconds(os.getpid()), server_cpu(), time.perf_counter()
        ticks = (await asyncio.gather(*(loop(s) for s in sessions)))[0]
        wall = time.perf_counter() - t0
        me, srv = cpu_seconds(os.getpid()) - me, server_cpu() - srv
    finally:
        for session in sessions:
            await session.close()
    per = 1e3 / ticks
    return {"wall": wall * per, "client": me * per, "server": srv * per, "ticks": ticks}


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

    from pytest_hud.interop.vla_eval.connection import VlaEvalSession
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


def report(args: argparse.Namespace, name: str, title: str, *table: Any, note: str) -> None:
    """With ``--report``, the table into docs/performance.md under ``name`` (``-pinned``
    with ``--pin``: the two settings are two tables)."""
    if args.report:
        from _report import write_table

        if args.pin:
            name, title = f"{name}-pinned", f"{title}, the server on a CPU of its own"
            note += " Pinned (--pin): the server's threads on CPU 0, the clients on the other."
        write_table(name, title, *table, note=note)


async def best_of(
    names: list[str], reps: int, run: Callable[[str], Awaitable[Row]]
) -> dict[str, Row]:
    """Each variant's row with the least wall over ``reps`` rounds, the order rotated each
    round so that no variant always runs first."""
    best: dict[str, Row] = {}
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            row = await run(name)
            if name not in best or row["wall"] < best[name]["wall"]:
                best[name] = row
    return best


async def main(args: argparse.Namespace) -> None:
    from server_proc import controller_server, pin_apart

    header = ["in flight", "variant", "wall ms/tick", "vs vla-eval", "CPU ms/tick by process"]
    rows: list[list[str]] = []
    print("  ".join(header))
    for n in args.inflight:
        batch = str(args.batch or n)
        with controller_server("--batch", batch, "--wait", str(args.wait)) as (port, proc):
            if args.pin:
                print(pin_apart(proc), flush=True)
            url = f"ws://127.0.0.1:{port}"
            names = list(args.variants)
            go = functools.partial(measure, url=url, server=proc.pid, n=n, steps=args.steps)
            best = await best_of(names, args.reps, go)
            ref = best["vla-eval"]["wall"]
            for name in names:
                row = best[name]
                who = "shards" if name == "vla-eval" else "client"
                parts = [f"{who} {row['client']:.3f}"]
                parts += [f"sim {row['sim']:.3f}"] if "sim" in row else []
                parts += [f"server {row['server']:.3f}"]
                total = sum(v for k, v in row.items() if k not in ("wall", "ticks"))
                ratio = "1" if name == "vla-eval" else f"{row['wall'] / ref:.2f}x"
                cpu = ", ".join(parts) + f" (sum {total:.3f})"
                rows.append([str(n), name, f"{row['wall']:.3f}", ratio, cpu])
                print("  ".join(rows[-1]), flush=True)
    report(
        args,
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


async def floor_run(
    name: str, runs: dict[str, tuple[str, float]], url: str, pid: int, n: int, steps: int
) -> Row:
    how, delay = runs[name]
    if how == "vla-eval":
        return await vla_eval(url, pid, n, steps)
    if how == "procs":
        return await bare_procs(url, pid, n, steps)
    return await bare(url, pid, n, steps, delay)


async def floor(args: argparse.Namespace) -> None:
    """What the server costs a step, by how its clients answer: at one in flight a bare
    client answering at once or after a busy delay; at N in flight N bare loops in one
    process or in N processes, beside vla-eval's N shards. The server's CPU over the wall
    is how busy it is: near 1, no client can make the tick shorter than the server's CPU."""
    from server_proc import controller_server, pin_apart

    header = ["in flight", "client", "wall ms/tick", "vs vla-eval", "client CPU ms/tick"]
    header += ["server CPU ms/tick", "server CPU ms/step", "server busy"]
    rows: list[list[str]] = []
    print("  ".join(header))
    for n in args.inflight:
        # name -> (how, answer delay in s)
        runs: dict[str, tuple[str, float]] = {"vla-eval": ("vla-eval", 0.0)}
        if n == 1:
            for us in (0, 25, 50, 100, 200):
                runs["hud bare" + (f", answers {us} us later" if us else "")] = ("bare", us * 1e-6)
        else:
            runs["hud bare, one process"] = ("bare", 0.0)
            runs[f"hud bare, {n} processes"] = ("procs", 0.0)
        with controller_server("--batch", str(n), "--wait", str(args.wait)) as (port, proc):
            if args.pin:
                print(pin_apart(proc), flush=True)
            url, names = f"ws://127.0.0.1:{port}", list(runs)

            go = functools.partial(
                floor_run, runs=runs, url=url, pid=proc.pid, n=n, steps=args.steps
            )
            best = await best_of(names, args.reps, go)
        ref = best["vla-eval"]["wall"]
        for name in names:
            row = best[name]
            ratio = "1" if name == "vla-eval" else f"{row['wall'] / ref:.2f}x"
            rows.append([
                str(n), name, f"{row['wall']:.3f}", ratio, f"{row['client']:.3f}",
                f"{row['server']:.3f}", f"{row['server'] / n:.3f}",
                f"{row['server'] / row['wall']:.0%}",
            ])  # fmt: skip
            print("  ".join(rows[-1]), flush=True)
    report(
        args,
        "vla-eval-server-floor",
        "What vla-eval's server costs a step, by how its clients answer "
        "(bench/peer_vla_eval_steps.py --floor)",
        header,
        rows,
        note=(
            f"One CartPole episode of {args.steps} steps per episode in flight against "
            "vla-eval's PredictModelServer (scripted controller, max_batch_size the number "
            f"in flight, window {args.wait * 1e3:g} ms); hud bare: pytest-hud's "
            "VlaEvalSession and the benchmark in one loop, nothing else; 'answers N us "
            "later': N microseconds of busy work before each answer. server busy: the "
            "server's CPU over the wall. Best of "
            f"{args.reps} interleaved reps (by wall)."
        ),
    )


#: Where a profiled step's own time goes: the first bucket whose words a frame's file holds.
BUCKETS = (
    ("agent stack (RobotAgent, adapter, vla-eval model)", ("robot/agent/", "vla_eval/agent")),
    ("bridge + slot barrier", ("robot/sim/", "vla_eval/bridge")),
    ("codecs (openpi/0 carry, vla-eval msgpack)", ("codec.py", "msgpack")),
    ("transports (WebSocket client, in-process pair, watchdog)", ("robot/wire/",)),
    ("vla-eval session", ("vla_eval/connection",)),
    ("the benchmark and its env (same in both harnesses)", ("cartpole", "gymnasium")),
    ("socket and poll syscalls", ("'send'", "'recv", "'poll'", "'sendall'")),
    ("the event loop (asyncio, selectors)", ("asyncio", "selectors")),
)


async def profile(url: str, server: int, steps: int, top: int = 0) -> None:
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
    if top:  # the functions behind the buckets, by self time a step (profiled, unscaled)
        print(f"top {top} functions by self time, us a step under the profiler:")
        rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
        for (path, line, func), (_, calls, self_s, cum_s, _) in rows:
            where = f"{Path(path).name}:{line}" if path != "~" else "~"
            per = 1e6 / steps
            rate = f"{self_s * per:6.1f} self {cum_s * per:7.1f} cum {calls / steps:5.1f}/step"
            print(f"  {rate}  {where} {func}")


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
    parser.add_argument("--top", type=int, default=0, help="with --profile: list N functions")
    parser.add_argument(
        "--pin", action="store_true", help="the server on CPU 0, the clients on the others"
    )
    parser.add_argument(
        "--floor", action="store_true", help="the server's cost a step by how clients answer"
    )
    args = parser.parse_args()
    if args.profile:

        async def profiled() -> None:
            from server_proc import controller_server

            with controller_server("--batch", "1", "--wait", "0") as (port, proc):
                await profile(f"ws://127.0.0.1:{port}", proc.pid, args.steps, args.top)

        asyncio.run(profiled())
    elif args.floor:
        asyncio.run(floor(args))
    else:
        asyncio.run(main(args))
