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
  connect with the key.

    python bench/security.py [--connections 200] [--report]
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
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "helpers")]

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
    parser.add_argument("--report", action="store_true", help="write docs/performance.md")
    asyncio.run(main(parser.parse_args()))
