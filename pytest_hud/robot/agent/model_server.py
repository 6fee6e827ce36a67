"""``python -m pytest_hud.robot.agent.model_server --agent SPEC --device DEV --stats PATH``: one of
a session's model servers (one per device under ``pytest -n K``). It builds the agent once here
(a factory called once, a checkpoint loaded on this process's device), serves its model on
the openpi wire through :class:`~.policy_server.PolicyServer` (requests from every worker's
rollouts batched in one forward; only holders of the session's key admitted), announces its
url and the agent's shell (:mod:`.shell`) on stdout, and writes its figures to ``--stats``
on SIGUSR1. It stops on SIGTERM, Ctrl-C or the end of its stdin (its owner is gone).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.plumbing.auth import auth_enabled, derive, session_secret
from pytest_hud.plumbing.process import serve_until_stopped
from pytest_hud.robot.agent.model import Model

__all__ = ["ANNOUNCE", "Metered", "main", "session_key"]

#: Prefix of the line the server prints once it serves (or finds its agent not servable).
ANNOUNCE = "PYTEST_HUD_MODEL_SERVER"


def session_key() -> str | None:
    """The key the session's model servers admit (derived from the session's secret, so
    a worker holds it without being told); None under ``--hud-no-auth``."""
    return derive(session_secret(), "model-server") if auth_enabled() else None


#: The batching window's share of the mean forward: a row that misses a forward waits a whole
#: forward for the next (and may split the rollouts in two groups for good), so a late row
#: is worth waiting for up to this share of one; the window is never below ``--window-ms``.
WINDOW_SHARE = 0.25


class Metered(Model):
    """``model``, with the width and the start and end of every forward it runs (on the
    thread it runs on), for the session's figures; ``on_forward(seconds)`` after each."""

    def __init__(self, model: Model, on_forward: Callable[[float], None] | None = None) -> None:
        self.model = model
        self.on_forward = on_forward
        self.ensembler = getattr(model, "ensembler", None)
        self.n_obs_steps = getattr(model, "n_obs_steps", 1)
        self.n_action_steps = getattr(model, "n_action_steps", None)
        self._lock = threading.Lock()
        self.widths: Counter[int] = Counter()
        self.busy_s = 0.0
        self.first: float | None = None  # the first forward's start
        self.last: float | None = None  # the latest forward's end

    def executor(self) -> Executor | None:
        return self.model.executor()

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        width = len(next(iter(batch.values()), ()))
        start = time.monotonic()
        try:
            return self.model.infer(batch)
        finally:
            end = time.monotonic()
            with self._lock:
                self.widths[width] += 1
                self.busy_s += end - start
                self.first = start if self.first is None else self.first
                self.last = end
            if self.on_forward is not None:
                self.on_forward(end - start)

    def figures(self) -> dict[str, object]:
        """Forwards, rows, widths, forward time and the share of the serving span (first
        forward's start to the latest's end) the forward ran."""
        with self._lock:
            widths = dict(sorted(self.widths.items()))
            busy, first, last = self.busy_s, self.first, self.last
        forwards = sum(widths.values())
        rows = sum(w * n for w, n in widths.items())
        span = (last - first) if first is not None and last is not None else 0.0
        return {
            "forwards": forwards,
            "requests": rows,
            "widths": {str(w): n for w, n in widths.items()},
            "mean_width": round(rows / forwards, 3) if forwards else None,
            "forward_ms": round(1e3 * busy / forwards, 3) if forwards else None,
            "busy_s": round(busy, 3),
            "span_s": round(span, 3),
            "busy_share": round(busy / span, 4) if span > 0 else None,
        }


def _write(path: Path, figures: dict[str, object]) -> None:
    """Write ``figures`` as JSON to ``path`` whole (a reader never sees half of it)."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(figures))
    os.replace(part, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_hud.robot.agent.model_server")
    parser.add_argument("--agent", required=True, help="the agent spec (--hud-agent syntax)")
    parser.add_argument("--device", required=True, help="the device, as the session names it")
    parser.add_argument("--stats", required=True, help="where SIGUSR1 writes the figures")
    parser.add_argument(
        "--window-ms", type=float, default=5.0, help="the batching window's floor (ms)"
    )
    parser.add_argument("--connections", type=int, default=256, help="connections held at most")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from pytest_hud.errors import AgentSpecError
    from pytest_hud.robot.agent.expects import metadata_entry
    from pytest_hud.robot.agent.policy_server import PolicyServer
    from pytest_hud.robot.agent.registry import AgentSpec, load_agent
    from pytest_hud.robot.agent.shell import NotServable, split

    try:
        agent = load_agent(AgentSpec(args.agent))  # the factory's one call for this device
    except AgentSpecError as exc:
        print(f"{exc}", file=sys.stderr, flush=True)
        return 2
    try:
        model, shell = split(agent)
    except NotServable as exc:
        print(f"{ANNOUNCE} {json.dumps({'servable': False, 'why': str(exc)})}", flush=True)
        return 0
    floor = args.window_ms / 1000
    meter = Metered(model, lambda seconds: window(seconds))
    meta = {"agent": args.agent, "model": type(model).__name__, "device": args.device}
    server = PolicyServer(
        meter,
        max_wait_s=floor,
        token=session_key(),
        max_connections=args.connections,
        max_per_peer=args.connections,
        metadata={**meta, **metadata_entry(model, args.agent)},
    )
    stats = Path(args.stats)
    mean: list[float] = []

    def window(seconds: float) -> None:
        """The window follows the mean forward (a running mean), never below the floor."""
        mean[:] = [seconds if not mean else 0.8 * mean[0] + 0.2 * seconds]
        server.batched.max_wait_s = max(floor, WINDOW_SHARE * mean[0])

    async def serve() -> None:
        url = await server.start()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, lambda: _write(stats, meter.figures()))
        found = {"servable": True, "url": url, "pid": os.getpid(), **meta}
        found["shell"] = base64.b64encode(shell).decode()
        print(f"{ANNOUNCE} {json.dumps(found)}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    serve_until_stopped(serve)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
