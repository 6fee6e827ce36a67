#!/usr/bin/env python
"""Drive an openpi policy server with openpi-client's real ``WebsocketClientPolicy``
(run with the openpi venv's python).

    openpi_client_drive.py --url ws://HOST:PORT [--clients N] [--requests K] [--seed S]
                           [--state-size D] [--boom-at K] [--api-key KEY]

Each of ``N`` client threads opens its own ``WebsocketClientPolicy`` (one connection,
as openpi does per robot), reads ``get_server_metadata()``, then sends ``K``
observations ``{"observation/state": float32[D], "observation/image": uint8[8, 8, 3],
"prompt": str}`` drawn from ``numpy.random.default_rng([seed, client, request])``.
Threads meet at a barrier before every request, so requests arrive together.
``--boom-at K`` makes client 0's K-th prompt ``"boom"`` (a test model raises on it).

Prints one JSON object on stdout: ``{"metadata": ..., "clients": [[{"obs": ...,
"reply": ...} | {"obs": ..., "error": "Type: message"}, ...], ...]}``, numpy values
spelled out as ``{"__ndarray__": {"dtype", "shape", "values"}}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
from typing import Any

import numpy as np
from frames_json import describe
from openpi_client.websocket_client_policy import WebsocketClientPolicy


def observation(seed: int, client: int, request: int, size: int, boom: bool) -> dict[str, Any]:
    rng = np.random.default_rng([seed, client, request])
    return {
        "observation/state": rng.standard_normal(size).astype(np.float32),
        "observation/image": rng.integers(0, 256, (8, 8, 3), dtype=np.uint8),
        "prompt": "boom" if boom else f"client {client} request {request}",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--state-size", type=int, default=4)
    parser.add_argument("--boom-at", type=int, default=None)
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args()

    barrier = threading.Barrier(args.clients)
    metadata: list[Any] = [None] * args.clients
    records: list[list[dict[str, Any]]] = [[] for _ in range(args.clients)]

    def client(c: int) -> None:
        try:
            policy = WebsocketClientPolicy(host=args.url, api_key=args.api_key)
        except Exception as exc:
            records[c].append({"error": f"{type(exc).__name__}: {exc}"})
            barrier.abort()
            return
        metadata[c] = describe(policy.get_server_metadata())
        for k in range(args.requests):
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(30)
            boom = c == 0 and args.boom_at == k
            obs = observation(args.seed, c, k, args.state_size, boom)
            try:
                reply = policy.infer(obs)
            except Exception as exc:
                records[c].append({"obs": describe(obs), "error": f"{type(exc).__name__}: {exc}"})
                barrier.abort()
                continue
            records[c].append({"obs": describe(obs), "reply": describe(reply)})

    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"metadata": metadata[0], "all_metadata": metadata, "clients": records}))


if __name__ == "__main__":
    main()
