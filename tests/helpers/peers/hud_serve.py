#!/usr/bin/env python
"""Serve a gymnasium env over openpi/0 with the real HUD SDK (run with the HUD venv's python).

    hud_serve.py [--env Pendulum-v1] [--num-envs N] [--claims K] [--seed S]

The sim is HUD's own ``GymBridge`` + ``serve_bridge`` in a child process, spawned
and driven through HUD's ``RobotEndpoint`` (the path ``env.gym()`` uses): its
JSON-RPC control channel claims K slots (default: N, or 1), each with a
``reset(seed=S)``. Every machine-readable line on stdout starts with
``HUD_SERVE `` followed by one JSON object with an ``event`` field:

    {"event": "ready", "url", "tokens", "prompts", "capability", "contract", "sim_pid"}
    {"event": "result", "token", "grade"}          answer to ``result TOKEN`` (``-``: no token)
    {"event": "reset", "token", "prompt"}          answer to ``reset``
    {"event": "error", "command", "message"}       a command failed (serving goes on)
    {"event": "bye"}                               the sim has been stopped

Other stdout lines (HUD's own ``[env] ...`` logs) are noise to callers.
Commands arrive one per line on stdin: ``result TOKEN``, ``reset``, ``quit``. The
script stops when stdin closes (EOF), on ``quit`` or on SIGTERM, so it never
outlives whoever started it; the sim child also exits when this process dies.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import time
from typing import Any

PREFIX = "HUD_SERVE "


def emit(event: str, **fields: Any) -> None:
    print(PREFIX + json.dumps({"event": event, **fields}), flush=True)


# -- the sim child -----------------------------------------------------------------
def _watch_parent() -> None:
    """Exit when the launcher dies (we are in our own session, so nobody else will stop us)."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGTERM)  # serve_bridge's handler cancels serving
    time.sleep(10)
    os._exit(3)


def sim_main(args: argparse.Namespace) -> None:
    from hud.environment.robot import GymBridge, serve_bridge

    threading.Thread(target=_watch_parent, name="hud-serve-parent-watch", daemon=True).start()
    defaults: dict[str, Any] = {"num_envs": args.num_envs} if args.num_envs else {}
    # contract=None: derive the contract, never read or write ./contract.json.
    serve_bridge(GymBridge(args.env, contract=None, **defaults))


# -- the launcher ----------------------------------------------------------------------
def _stdin_lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
    """Daemon thread: forward stdin lines; None at EOF (a daemon never blocks exit)."""
    try:
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line)
    finally:
        loop.call_soon_threadsafe(queue.put_nowait, None)


async def launcher_main(args: argparse.Namespace) -> int:
    from hud.environment.robot import RobotEndpoint

    cmd = [sys.executable, os.path.abspath(__file__), "--sim", "--env", args.env]
    if args.num_envs:
        cmd += ["--num-envs", str(args.num_envs)]
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    threading.Thread(target=_stdin_lines, args=(loop, lines), daemon=True).start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lines.put_nowait, None)

    ep = RobotEndpoint.spawn(cmd, connect_timeout_s=args.timeout)
    reset_kwargs = {"seed": args.seed} if args.seed is not None else {}
    try:
        await asyncio.wait_for(ep.start(), args.timeout)
        cap = (await asyncio.wait_for(ep.capabilities("robot"), args.timeout))[0].to_manifest()
        claims = args.claims if args.claims is not None else max(1, args.num_envs or 1)
        episodes = [
            await asyncio.wait_for(ep.reset(**reset_kwargs), args.timeout) for _ in range(claims)
        ]
        proc = getattr(ep, "_proc", None)
        emit(
            "ready",
            url=cap["url"],
            tokens=[e["token"] for e in episodes],
            prompts=[e["prompt"] for e in episodes],
            capability=cap,
            contract=cap["params"].get("contract"),
            sim_pid=getattr(getattr(proc, "process", None), "pid", None),
        )
        while (line := await lines.get()) is not None:
            parts = line.split()
            if not parts:
                continue
            try:
                if parts[0] == "quit":
                    break
                if parts[0] == "result":
                    token = parts[1] if len(parts) > 1 and parts[1] != "-" else None
                    grade = await asyncio.wait_for(ep.result(token=token), args.timeout)
                    emit("result", token=token, grade=grade)
                elif parts[0] == "reset":
                    e = await asyncio.wait_for(ep.reset(**reset_kwargs), args.timeout)
                    emit("reset", token=e["token"], prompt=e["prompt"])
                else:
                    raise ValueError(f"unknown command {parts[0]!r} (result TOKEN, reset, quit)")
            except Exception as exc:  # report and keep serving
                emit("error", command=line.strip(), message=f"{type(exc).__name__}: {exc}")
        return 0
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ep.stop(), 30)
        emit("bye")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="Pendulum-v1")
    p.add_argument("--num-envs", type=int, default=0, help="vectorize (gymnasium.make_vec)")
    p.add_argument("--claims", type=int, default=None, help="slots to claim (default: all)")
    p.add_argument("--seed", type=int, default=None, help="reset(seed=...) for every claim")
    p.add_argument("--timeout", type=float, default=120.0, help="bound on each control call")
    p.add_argument("--sim", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.sim:
        sim_main(args)
    else:
        sys.exit(asyncio.run(launcher_main(args)))


if __name__ == "__main__":
    main()
