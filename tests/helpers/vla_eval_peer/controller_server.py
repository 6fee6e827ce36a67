"""The scripted CartPole controller behind vla-eval's own PredictModelServer, in a process
of its own: ``python controller_server.py [--port P] [--batch N] [--action-dims A] ...``.

Binds 127.0.0.1 (a free port unless ``--port``) and prints ``PORT <n>``. On SIGUSR1 (and
SIGTERM) it writes the widths of the batches it ran since the last dump to ``--stats``
(JSON). ``--action-dims`` declares a wrong action size (a mismatched server);
``--die-after K`` exits abruptly at the K-th observation (a server that dies mid-run);
``--push-format`` declares another action convention.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cartpole_bench import controller
from vla_eval.model_servers.base import SessionContext
from vla_eval.model_servers.predict import PredictModelServer
from vla_eval.model_servers.serve import serve_async
from vla_eval.specs import LANGUAGE, DimSpec


class BalanceServer(PredictModelServer):
    def __init__(
        self, action_dims: int = 1, die_after: int = 0, push: str = "binary_push_right", **kw: Any
    ) -> None:
        super().__init__(**kw)
        self.action_dims = action_dims
        self.push = push
        self.die_after = die_after
        self.seen = 0
        self.widths: Counter[int] = Counter()

    def _tick(self, n: int) -> None:
        self.seen += n
        self.widths[n] += 1
        if self.die_after and self.seen >= self.die_after:
            os._exit(3)

    def predict(self, obs: dict[str, Any], ctx: SessionContext) -> dict[str, Any]:
        self._tick(1)
        return {"actions": controller(np.asarray(obs["states"])[None])[0]}

    def predict_batch(
        self, obs_batch: list[dict[str, Any]], ctx_batch: list[SessionContext]
    ) -> list[dict[str, Any]]:
        self._tick(len(obs_batch))
        acts = controller(np.stack([np.asarray(o["states"]) for o in obs_batch]))
        return [{"actions": a} for a in acts]

    def get_action_spec(self) -> dict[str, DimSpec]:
        return {"push": DimSpec("push", self.action_dims, self.push, (0, 1))}

    def get_observation_spec(self) -> dict[str, DimSpec]:
        return {"state": DimSpec("state", 4, "cartpole_x_dx_theta_dtheta"), "language": LANGUAGE}


async def main(args: argparse.Namespace) -> None:
    server = BalanceServer(
        action_dims=args.action_dims,
        die_after=args.die_after,
        push=args.push_format,
        max_batch_size=args.batch,
        max_wait_time=args.wait,
    )

    def dump(*_: Any) -> None:
        if args.stats:
            Path(args.stats).write_text(json.dumps({str(k): v for k, v in server.widths.items()}))
        server.widths.clear()

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
    anyio.run(main, parser.parse_args())
