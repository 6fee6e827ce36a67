"""Benchmark what authentication costs and what a stranger's flood costs the owner.

Measured side by side in one run, every connection on 127.0.0.1:

- the control channel: connect + (prove the secret) + one ``ping``, per connection, with
  auth on and ``--no-auth``;
- the owner's ``ping`` round trip, quiet and while a stranger holds 300 silent
  connections and 32 peers stream unfinished lines, and how many bytes and fds the
  server holds then;
- a frame claiming 20,000 huge dims: the product of its shape (what decoding cost before
  the dims cap) against the codec's refusal now;
- the robot bridge: 300 keyless WebSocket connects (each answered 403) and the owner's
  connect with the key;
- issue 52's floods, each with the owner's latency quiet and under the flood, and how long
  the owner waited for its first answer once the flood was in place (bounded by
  ``--bound``; "never" is a lockout): the web console's 48 strangers keeping requests open
  (a byte every 2 s), 64 idle connections to a policy server without a token, 256
  ``--no-auth`` peers that sent one request each (``idle_s`` 2 s here), and a frame naming
  a 1 MiB structured dtype (numpy's parse of it, what decoding did before, against the
  codec's refusal now).

Run it against the code before a change with ``PYTHONPATH=<that checkout>`` to see the
floods' "before" in the same script.

    python bench/security.py [--connections 200] [--bound 30] [--report]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgpack

ROOT = Path(__file__).resolve().parent.parent
# this checkout's package unless PYTHONPATH names another (the code before a change)
sys.path[:0] = [*filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)), str(ROOT)]
sys.path.insert(1, str(ROOT / "tests" / "helpers"))

from pytest_hud.plumbing.auth import session_secret  # noqa: E402
from pytest_hud.plumbing.rpc import Connection, Limits, RpcClient, serve_rpc  # noqa: E402
from pytest_hud.robot.wire.codec import WireError, unpack  # noqa: E402


async def _echo(conn: Connection, method: str, params: dict[str, Any]) -> Any:
    return {"ok": True}


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _ms(values: list[float]) -> str:
    values = sorted(values)
    p50 = statistics.median(values) * 1e3
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))] * 1e3
    return f"{p50:.3f} / {p99:.3f}"


async def connect_ping(secret: str | None, n: int) -> list[float]:
    server = await serve_rpc(_echo, "127.0.0.1", 0, secret=secret, limits=Limits())
    port = next(iter(server.sockets)).getsockname()[1]
    times = []
    try:
        for _ in range(n):
            start = time.perf_counter()
            client = await RpcClient.connect("127.0.0.1", port, secret=secret)
            await client.call("ping")
            times.append(time.perf_counter() - start)
            await client.close()
    finally:
        server.close()
        await server.wait_closed()
    return times


async def owner_under_flood(n: int) -> dict[str, Any]:
    secret = session_secret()
    server = await serve_rpc(_echo, "127.0.0.1", 0, secret=secret, limits=Limits())
    port = next(iter(server.sockets)).getsockname()[1]
    owner = await RpcClient.connect("127.0.0.1", port, secret=secret)
    out: dict[str, Any] = {}
    strangers: list[Any] = []
    try:
        quiet = []
        for _ in range(n):
            start = time.perf_counter()
            await owner.call("ping")
            quiet.append(time.perf_counter() - start)
        base_fds = _fds()
        strangers = [await asyncio.open_connection("127.0.0.1", port) for _ in range(300)]
        for _, writer in strangers[:32]:
            writer.write(b"x" * (1 << 20))  # unfinished lines
        flooded = []
        for _ in range(n):
            start = time.perf_counter()
            await owner.call("ping")
            flooded.append(time.perf_counter() - start)
        await asyncio.sleep(1.0)
        out = {
            "quiet": quiet,
            "flooded": flooded,
            # each connection is two fds in this process: the strangers' ends and the server's
            "server_fds": _fds() - base_fds - len(strangers),
        }
    finally:
        for _, writer in strangers:
            writer.close()
        await owner.close()
        server.close()
        await server.wait_closed()
    return out


def shape_bomb() -> tuple[float, float]:
    shape = [2**62] * 20_000
    start = time.perf_counter()
    math.prod(shape)  # what decoding this frame did before the dims cap
    before = time.perf_counter() - start
    frame = msgpack.packb({b"__ndarray__": True, b"data": b"", b"dtype": "<f4", b"shape": shape})
    start = time.perf_counter()
    with contextlib.suppress(WireError):
        unpack(frame)
    return before, time.perf_counter() - start


async def bridge_flood() -> tuple[float, float, set[int]]:
    import websockets
    from sims import CounterSim

    from pytest_hud.robot import RobotEndpoint

    endpoint = RobotEndpoint(CounterSim)
    await endpoint.start()
    codes: set[int] = set()
    try:
        bare = endpoint.url.split("/?", 1)[0]

        async def stranger() -> None:
            try:
                async with websockets.connect(bare, open_timeout=60):
                    codes.add(101)
            except websockets.InvalidStatus as exc:
                codes.add(exc.response.status_code)

        start = time.perf_counter()
        await asyncio.gather(*(stranger() for _ in range(300)))
        flood = time.perf_counter() - start
        start = time.perf_counter()
        async with websockets.connect(endpoint.url, open_timeout=30, max_size=None) as ws:
            await ws.recv()
        owner = time.perf_counter() - start
    finally:
        await endpoint.stop()
    return flood, owner, codes


# -- issue 52's floods --------------------------------------------------------------------------
def _first(serve: Any, bound: float) -> float | None:
    """Seconds until ``serve()`` first returns True, polling every 0.2 s (None: never
    within ``bound``)."""
    start = time.perf_counter()
    while time.perf_counter() - start < bound:
        if serve():
            return time.perf_counter() - start
        time.sleep(0.2)
    return None


async def _afirst(serve: Any, bound: float) -> float | None:
    start = time.perf_counter()
    while time.perf_counter() - start < bound:
        if await serve():
            return time.perf_counter() - start
        await asyncio.sleep(0.2)
    return None


def _timed(serve: Any, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        if not serve():
            raise RuntimeError("the owner was refused after it had been served")
        times.append(time.perf_counter() - start)
    return times


async def _atimed(serve: Any, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        if not await serve():
            raise RuntimeError("the owner was refused after it had been served")
        times.append(time.perf_counter() - start)
    return times


def console_flood(n: int, bound: float) -> dict[str, Any]:
    """The web console's /state for its operator, quiet and while 48 strangers keep
    requests open (one byte every 2 s: the console waits 10 s for each read)."""
    import socket
    import threading
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    from pytest_hud.features.robots.web import MAX_CONNECTIONS, WebOperator

    console = WebOperator()
    base, token = console.url.split("?")

    def owner() -> bool:
        try:
            with urllib.request.urlopen(f"{base.rstrip('/')}/state?{token}", timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    parts = urlsplit(console.url)
    done = threading.Event()
    strangers: list[socket.socket] = []
    try:
        quiet = _timed(owner, n)
        strangers = [
            socket.create_connection((parts.hostname, parts.port))
            for _ in range(3 * MAX_CONNECTIONS)
        ]

        def dribble() -> None:
            while True:
                for s in strangers:
                    with contextlib.suppress(OSError):  # let go by the console
                        s.sendall(b"G")
                if done.wait(2.0):
                    return

        threading.Thread(target=dribble, daemon=True).start()
        time.sleep(0.5)  # every stranger has sent its first byte
        first = _first(owner, bound)
        flooded = _timed(owner, n) if first is not None else []
    finally:
        done.set()
        for s in strangers:
            s.close()
        console.close()
    return {"quiet": quiet, "flooded": flooded, "first": first, "strangers": 3 * MAX_CONNECTIONS}


async def policy_flood(n: int, bound: float) -> dict[str, Any]:
    """A policy server without a token: a client's connect + one request, quiet and once
    64 connections (the per-peer cap) sit idle beside it."""
    import numpy as np
    import websockets
    from sims import COUNTER_CONTRACT

    from pytest_hud.robot.agent.model import ZeroModel
    from pytest_hud.robot.agent.policy_server import PolicyServer
    from pytest_hud.robot.wire.codec import pack, ws_options

    server = PolicyServer(ZeroModel(), contract=COUNTER_CONTRACT)
    await server.start()
    obs = pack({"state": np.zeros(3, np.float32)})

    async def owner() -> bool:
        try:
            async with websockets.connect(server.url, open_timeout=5, **ws_options()) as ws:
                await ws.recv()
                await ws.send(obs)
                await ws.recv()
                return True
        except (websockets.InvalidStatus, OSError, TimeoutError):
            return False

    idle: list[Any] = []
    try:
        quiet = await _atimed(owner, n)
        idle = [
            await websockets.connect(server.url, open_timeout=30, **ws_options())
            for _ in range(server.max_per_peer)
        ]
        first = await _afirst(owner, bound)
        flooded = await _atimed(owner, n) if first is not None else []
    finally:
        for ws in idle:
            with contextlib.suppress(Exception):
                await ws.close()
        await server.stop()
    return {"quiet": quiet, "flooded": flooded, "first": first, "strangers": len(idle)}


async def no_auth_flood(n: int, bound: float) -> dict[str, Any]:
    """A ``--no-auth`` control server (idle_s 2 s): the owner's connect + ping, quiet and
    once 256 peers (the connection cap) each sent one ping and went idle."""
    import json

    limits = Limits(idle_s=2.0)
    server = await serve_rpc(_echo, "127.0.0.1", 0, secret=None, limits=limits)
    port = next(iter(server.sockets)).getsockname()[1]

    async def owner() -> bool:
        try:
            client = await RpcClient.connect("127.0.0.1", port, timeout=5)
        except (OSError, TimeoutError):
            return False
        try:
            await client.call("ping", timeout=5)
            return True
        except Exception:
            return False
        finally:
            await client.close()

    peers: list[Any] = []
    try:
        quiet = await _atimed(owner, n)
        for i in range(limits.max_connections):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(json.dumps({"id": i, "method": "ping", "params": {}}).encode() + b"\n")
            peers.append((reader, writer))
        for reader, _ in peers:
            await reader.readline()  # the greeting
            await reader.readline()  # the answer to its one request
        first = await _afirst(owner, bound)
        flooded = await _atimed(owner, n) if first is not None else []
    finally:
        for _, writer in peers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for _, w in peers), return_exceptions=True)
        await asyncio.sleep(0.5)  # the server's handlers read the ends before the loop stops
        server.close()
        await server.wait_closed()
    return {"quiet": quiet, "flooded": flooded, "first": first, "strangers": len(peers)}


def dtype_bomb() -> tuple[float, float]:
    """numpy's parse of a 1 MiB structured dtype (what decoding did before) / the codec's
    refusal of a frame naming it now."""
    import numpy as np

    bomb = "f4," * ((1 << 20) // 3)
    start = time.perf_counter()
    np.dtype(bomb)
    before = time.perf_counter() - start
    frame = msgpack.packb({b"__ndarray__": True, b"data": b"", b"dtype": bomb, b"shape": [0]})
    start = time.perf_counter()
    with contextlib.suppress(WireError):
        unpack(frame)
    return before, time.perf_counter() - start


def _flood_rows(name: str, out: dict[str, Any], bound: float) -> list[list[Any]]:
    first = out["first"]
    waited = f"first answer after {first:.1f} s" if first is not None else f"never in {bound:g} s"
    return [
        [f"{name}: owner, quiet (ms, p50 / p99)", _ms(out["quiet"]), ""],
        [
            f"{name}: owner, {out['strangers']} strangers (ms, p50 / p99)",
            _ms(out["flooded"]) if out["flooded"] else "refused",
            waited,
        ],
    ]


async def main(args: argparse.Namespace) -> None:
    session_secret()
    rows: list[list[Any]] = []
    auth = await connect_ping(session_secret(), args.connections)
    open_ = await connect_ping(None, args.connections)
    rows.append(["connect + ping, auth on (ms, p50 / p99)", _ms(auth), f"n={len(auth)}"])
    rows.append(["connect + ping, --no-auth (ms, p50 / p99)", _ms(open_), f"n={len(open_)}"])
    flood = await owner_under_flood(args.connections)
    rows.append(["owner ping, quiet (ms, p50 / p99)", _ms(flood["quiet"]), ""])
    rows.append([
        "owner ping, 300 strangers + 32 x 1 MiB half-lines (ms, p50 / p99)",
        _ms(flood["flooded"]),
        f"server fds held for strangers after 1 s: {flood['server_fds']}",
    ])  # fmt: skip
    before, after = shape_bomb()
    rows.append([
        "a 20,000-dim shape: product (before) / refusal (now)",
        f"{before * 1e3:.1f} ms / {after * 1e6:.1f} us",
        f"{before / after:,.0f}x",
    ])  # fmt: skip
    flood_s, owner_s, codes = await bridge_flood()
    rows.append([
        "bridge: 300 keyless connects / owner's connect with the key",
        f"{flood_s * 1e3:.0f} ms / {owner_s * 1e3:.1f} ms",
        f"answers: {sorted(codes)}",
    ])  # fmt: skip
    few = max(10, args.connections // 10)
    console = await asyncio.to_thread(console_flood, few, args.bound)
    rows += _flood_rows("web console /state", console, args.bound)
    rows += _flood_rows("policy server, no token", await policy_flood(few, args.bound), args.bound)
    rows += _flood_rows("--no-auth env server", await no_auth_flood(few, args.bound), args.bound)
    before, after = dtype_bomb()
    rows.append([
        "a 1 MiB structured dtype: numpy's parse (before) / refusal (now)",
        f"{before * 1e3:.0f} ms / {after * 1e3:.1f} ms",
        f"{before / after:,.0f}x",
    ])  # fmt: skip
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>22}  {note}")
    if args.report:
        sys.path.insert(0, str(Path(__file__).parent))
        from _report import write_table

        write_table(
            "security",
            "Authentication's cost and a stranger's flood (bench/security.py)",
            ["what", "figure", "note"],
            rows,
            note="All on 127.0.0.1, one process (the servers on its loop).",
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument(
        "--bound", type=float, default=30.0, help="longest wait for the owner under a flood (s)"
    )
    parser.add_argument("--report", action="store_true", help="write docs/performance.md")
    asyncio.run(main(parser.parse_args()))
