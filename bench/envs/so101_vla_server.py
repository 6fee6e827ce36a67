"""The planned SO-101 reach (so101_policies.py) behind vla-eval's own PredictModelServer, in a
process of its own: ``python so101_vla_server.py [--infer-ms 50] [--horizon 10]
[--chunk-size N] [--scale S] [--stats PATH]``. Binds 127.0.0.1 on a free port and prints
``PORT <n>``.
``--chunk-size N``: vla-eval's server-side chunking (a forward's chunk is buffered and one
action sent per observation); 0: each reply is the whole ``[horizon, 4]`` chunk.
``--stats PATH``: after each forward and episode start, what the server saw so far as JSON:
``forwards``, ``episodes`` (episode_start messages) and ``sessions`` (distinct connections
that asked for a forward).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from so101_policies import chunk
from vla_eval.model_servers.base import SessionContext
from vla_eval.model_servers.predict import PredictModelServer
from vla_eval.model_servers.serve import serve_async


class ReachServer(PredictModelServer):
    def __init__(
        self, infer_s: float, horizon: int, scale: float, stats: str = "", **kw: Any
    ) -> None:
        super().__init__(**kw)
        self.infer_s, self.horizon, self.scale = infer_s, horizon, scale
        self.stats = stats
        self.forwards = self.episodes = 0
        self.sessions: set[str] = set()

    def _dump(self) -> None:
        if self.stats:
            seen = {"forwards": self.forwards, "episodes": self.episodes}
            Path(self.stats).write_text(json.dumps({**seen, "sessions": len(self.sessions)}))

    async def on_episode_start(self, config: dict[str, Any], ctx: SessionContext) -> None:
        await super().on_episode_start(config, ctx)
        self.episodes += 1
        self._dump()

    def predict(self, obs: dict[str, Any], ctx: SessionContext) -> dict[str, Any]:
        t0 = time.monotonic()
        self.forwards += 1
        self.sessions.add(ctx.session_id)
        out = chunk(np.asarray(obs["states"], np.float64), "plan", self.horizon, self.scale)
        left = self.infer_s - (time.monotonic() - t0)
        if left > 0:
            time.sleep(left)
        self._dump()
        return {"actions": out}


async def main(args: argparse.Namespace) -> None:
    server = ReachServer(
        args.infer_ms / 1000,
        args.horizon,
        args.scale,
        stats=args.stats,
        chunk_size=args.chunk_size or None,
    )
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_async, server, "127.0.0.1", 0)
        print(f"PORT {port}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--infer-ms", type=float, default=50.0)
    parser.add_argument("--horizon", type=int, default=10)
    parser.add_argument("--chunk-size", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--stats", default="")
    anyio.run(main, parser.parse_args())
