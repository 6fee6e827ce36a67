"""The scripted CartPole controller behind vla-eval's own PredictModelServer, in a process
of its own: ``python controller_server.py [--port P] [--batch N] [--action-dims A] ...``.

Binds 127.0.0.1 (a free port unless ``--port``) and prints ``PORT <n>``. On SIGUSR1 (and
SIGTERM) it writes to ``--stats`` (JSON) what it saw since the last dump: ``widths`` (batch
width -> batches), ``sessions`` (the most connections one batch served), ``connections``
(how many sent observations) and ``observations``. ``--action-dims`` declares a wrong
action size (a mismatched server);
``--die-after K`` exits abruptly at the K-th observation (a server that dies mid-run);
``--push-format`` declares another action convention. ``--camera NAME`` makes a
camera-only policy: its observation spec is one image named NAME (no state) and it
decides from that image alone; ``--chunk T`` returns ``[T, 1]`` chunks (the push held).
``--forward-ms F --row-ms R``: every forward first holds a GPU-shaped F + R x rows ms
(gpu_shaped.py: a sleep, one forward at a time); the stats then carry ``busy_s`` and
``span_s`` (the first forward's start to the latest's end).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cartpole_bench import controller, read_frame
from vla_eval.model_servers.base import SessionContext
from vla_eval.model_servers.predict import PredictModelServer
from vla_eval.model_servers.serve import serve_async
from vla_eval.specs import IMAGE_RGB, LANGUAGE, DimSpec


class BalanceServer(PredictModelServer):
    def __init__(
        self,
        action_dims: int = 1,
        die_after: int = 0,
        push: str = "binary_push_right",
        camera: str = "",
        chunk: int = 0,
        forward_ms: float = 0.0,
        row_ms: float = 0.0,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.forward_ms = forward_ms
        self.row_ms = row_ms
        self.busy_s = 0.0
        self.span: list[float] = []  # the first forward's start, the latest's end
        self.action_dims = action_dims
        self.push = push
        self.die_after = die_after
        self.camera = camera
        self.chunk = chunk
        self.seen = 0
        self.widths: Counter[int] = Counter()  # since the last dump, as is sessions
        self.sessions = 0
        self.connections: set[str] = set()  # every connection that sent an observation

    def _tick(self, ctxs: list[SessionContext]) -> None:
        self.seen += len(ctxs)
        self.widths[len(ctxs)] += 1
        self.sessions = max(self.sessions, len({c.session_id for c in ctxs}))
        self.connections.update(c.session_id for c in ctxs)  # one id per connection
        if self.die_after and self.seen >= self.die_after:
            os._exit(3)

    def _act(self, obs_batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.forward_ms or self.row_ms:
            from gpu_shaped import forward

            start = time.monotonic()
            self.busy_s += forward(len(obs_batch), self.forward_ms, self.row_ms)
            self.span[:] = [self.span[0] if self.span else start, time.monotonic()]
        if self.camera:  # the image under the name this server's spec gives it, or KeyError
            pushes = np.stack([read_frame(o["images"][self.camera]) for o in obs_batch])
        else:
            pushes = controller(np.stack([np.asarray(o["states"]) for o in obs_batch]))
        if self.chunk:
            return [{"actions": np.repeat(p[None], self.chunk, axis=0)} for p in pushes]
        return [{"actions": p} for p in pushes]

    def predict(self, obs: dict[str, Any], ctx: SessionContext) -> dict[str, Any]:
        self._tick([ctx])
        return self._act([obs])[0]

    def predict_batch(
        self, obs_batch: list[dict[str, Any]], ctx_batch: list[SessionContext]
    ) -> list[dict[str, Any]]:
        self._tick(ctx_batch)
        return self._act(obs_batch)

    def get_action_spec(self) -> dict[str, DimSpec]:
        return {"push": DimSpec("push", self.action_dims, self.push, (0, 1))}

    def get_observation_spec(self) -> dict[str, DimSpec]:
        if self.camera:
            return {self.camera: IMAGE_RGB, "language": LANGUAGE}
        return {"state": DimSpec("state", 4, "cartpole_x_dx_theta_dtheta"), "language": LANGUAGE}


async def main(args: argparse.Namespace) -> None:
    server = BalanceServer(
        action_dims=args.action_dims,
        die_after=args.die_after,
        push=args.push_format,
        camera=args.camera,
        chunk=args.chunk,
        forward_ms=args.forward_ms,
        row_ms=args.row_ms,
        max_batch_size=args.batch,
        max_wait_time=args.wait,
    )

    def dump(*_: Any) -> None:
        if args.stats:
            widths = {str(k): v for k, v in server.widths.items()}
            observations = sum(k * v for k, v in server.widths.items())
            stats = {
                "widths": widths,
                "sessions": server.sessions,
                "connections": len(server.connections),
                "observations": observations,
                "busy_s": server.busy_s,
                "span_s": server.span[1] - server.span[0] if server.span else 0.0,
            }
            Path(args.stats).write_text(json.dumps(stats))
        server.widths.clear()
        server.sessions = 0
        server.connections.clear()
        server.busy_s, server.span[:] = 0.0, []

    def stop(*_: Any) -> None:
        dump()
        os._exit(0)

    signal.signal(signal.SIGUSR1, dump)
    signal.signal(signal.SIGTERM, stop)
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_async, server, "127.0.0.1", args.port)
        print(f"PORT {port}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--wait", type=float, default=0.002)
    parser.add_argument("--action-dims", type=int, default=1)
    parser.add_argument("--die-after", type=int, default=0)
    parser.add_argument("--stats", default="")
    parser.add_argument("--push-format", default="binary_push_right")
    parser.add_argument("--camera", default="")
    parser.add_argument("--chunk", type=int, default=0)
    parser.add_argument("--forward-ms", type=float, default=0.0)
    parser.add_argument("--row-ms", type=float, default=0.0)
    anyio.run(main, parser.parse_args())
