"""The floor under bench/peer_vla_eval.py's state-only rows: one bare in-process loop (the
CartPole StepBenchmark stepped right here, no harness around it) driving the same vla-eval
model server through pytest-hud's ``VlaEvalSession`` or vla-eval's own ``Connection``.

Per client it prints the wall per step, this process's CPU per step (the client, the
codec and the CartPole step) and the server process's CPU per step (what every client
waits for). Reps run interleaved; the fastest of each is kept.

    PYTHONPATH=$PWD .venv/bin/python bench/vla_eval_clients.py [--episodes 10] [--reps 4] [--report]
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
sys.path.insert(0, str(ROOT / "tests" / "helpers" / "vla_eval_peer"))
sys.path.insert(0, str(ROOT / "bench"))

GOALS = (50.0, 1e9)


async def bare_loop(url: str, client: str, episodes: int, steps: int) -> int:
    """``episodes`` CartPole episodes against the server at ``url``; returns the steps run."""
    from cartpole_bench import CartPoleBenchmark
    from vla_eval.connection import Connection

    from pytest_hud.interop.vla_eval.session import VlaEvalSession

    bench = CartPoleBenchmark(goals=GOALS, max_steps=steps)
    ours = client == "pytest-hud"
    session: Any = VlaEvalSession(url) if ours else Connection(url)
    await (session.open() if ours else session.connect())
    done = 0
    for ep in range(episodes):
        task = {"name": f"goal{ep % 2}", "goal": GOALS[ep % 2], "episode_idx": ep // 2}
        bench._task = task
        raw = bench.reset(task)
        await session.start_episode(task)
        for _ in range(steps):
            reply = await session.act(bench.make_obs(raw, task))
            action = reply if ours else reply["actions"]
            result = bench.step({"actions": np.asarray(action)})
            raw, done = result.obs, done + 1
            if result.done:
                break
        await session.end_episode({"success": True})
    await session.close()
    return done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--report", action="store_true", help="write docs/performance.md")
    args = parser.parse_args()

    from peer_vla_eval_steps import cpu_seconds
    from server_proc import controller_server

    clients = ("pytest-hud", "vla-eval")
    best: dict[str, tuple[float, float, float]] = {}
    with controller_server("--batch", "1") as (port, proc):
        url = f"ws://127.0.0.1:{port}"
        for rep in range(args.reps):
            for client in clients[rep % 2 :] + clients[: rep % 2]:
                server0, cpu0, t0 = cpu_seconds(proc.pid), time.process_time(), time.perf_counter()
                n = asyncio.run(bare_loop(url, client, args.episodes, args.max_steps))
                wall = time.perf_counter() - t0
                ms = tuple(
                    1e3 * x / n
                    for x in (wall, time.process_time() - cpu0, cpu_seconds(proc.pid) - server0)
                )
                print(f"  rep {rep + 1} {client:<10} {ms[0]:.3f} ms/step", file=sys.stderr)
                if client not in best or ms[0] < best[client][0]:
                    best[client] = ms  # type: ignore[assignment]
    header = ["client", "ms/step", "client CPU ms/step", "server CPU ms/step", "vs vla-eval"]
    ref = best["vla-eval"][0]
    rows = [
        [c, *(f"{x:.3f}" for x in best[c]), "1" if c == "vla-eval" else f"{best[c][0] / ref:.2f}x"]
        for c in clients
    ]
    for row in [header, *rows]:
        print("  ".join(str(x).ljust(20) for x in row))
    if args.report:
        from _report import write_table

        write_table(
            "vla-eval-clients",
            "The floor: a bare loop on each client against the same vla-eval server "
            "(bench/vla_eval_clients.py)",
            header,
            rows,
            note=(
                f"{args.episodes} CartPole episodes x up to {args.max_steps} steps stepped in "
                "the client's own process, no harness; server: the scripted controller behind "
                "vla-eval's PredictModelServer, max_batch_size 1. Client CPU includes the "
                f"CartPole step. Fastest of {args.reps} interleaved reps."
            ),
        )


if __name__ == "__main__":
    main()
