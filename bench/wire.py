"""Benchmark the openpi/0 robot wire against bare websockets ping-pong.

One round trip = the agent sends one action and receives one observation.
Payloads: state only (8 float32), one 224x224x3 uint8 camera + state, two cameras
+ state. For each payload:

* ours, 1 client: a RobotClient against a one-slot RobotBridge (spawned by RobotEndpoint),
  on its default WebSocket client (``--client frames``) or on websockets' (``--client
  websockets``);
* ours, 8 clients: 8 RobotClients against a ``num_envs=8`` bridge, all in one
  asyncio process (``gather``) and split over 2 client processes x 4 (``2x4``);
* bare: a plain ``websockets`` server (own process, compression off) that answers
  every message with a pre-packed observation of the same bytes, 1 and 8 clients.

The bridge's sim does nothing (``step`` is a no-op, ``get_observation`` returns
preallocated ``[N, ...]`` arrays), so the figures are the wire's own cost.
Servers and clients always run in different processes. Each config warms up,
then measures a fixed number of steps per client (bounded by a time cap); the
figures are medians over repetitions.

    python bench/wire.py [--quick] [--json PATH] [--steps N] [--reps R] [--report]

``--report`` writes the table into docs/performance.md (bench/_report.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from typing import Any

import numpy as np
import websockets
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.server import serve as ws_serve

from pytest_hud.robot import RobotBridge, RobotClient, RobotEndpoint
from pytest_hud.robot.wire.codec import pack

ACTION_SIZE = 8
STATE_SIZE = 8
IMAGE_SHAPE = (224, 224, 3)
CAMERA_KEYS = ("observation/image", "observation/wrist_image")
PAYLOADS = {"state": 0, "1cam": 1, "2cam": 2}
PAYLOAD_LABELS = {
    "state": "state (8 f32)",
    "1cam": "1 cam 224x224x3 + state",
    "2cam": "2 cams + state",
}
N_CLIENTS = 8


def bench_contract(cams: int) -> dict[str, Any]:
    features: dict[str, Any] = {
        "observation/state": {"role": "observation", "dtype": "float32", "shape": [STATE_SIZE]},
        "action": {"role": "action", "dtype": "float32", "shape": [ACTION_SIZE]},
    }
    for key in CAMERA_KEYS[:cams]:
        features[key] = {"role": "observation", "type": "rgb", "shape": list(IMAGE_SHAPE)}
    return {"control_rate": 50, "robot_type": "bench", "features": features}


def observation_rows(n: int, cams: int) -> dict[str, np.ndarray]:
    """Preallocated ``[n, ...]`` observation arrays (non-zero so nothing is special-cased)."""
    rng = np.random.default_rng(0)
    data = {"observation/state": rng.standard_normal((n, STATE_SIZE)).astype(np.float32)}
    for key in CAMERA_KEYS[:cams]:
        data[key] = rng.integers(0, 256, (n, *IMAGE_SHAPE), dtype=np.uint8)
    return data


class NullSim(RobotBridge):
    """A sim that costs nothing: step is a no-op, observations are preallocated."""

    def __init__(self, num_envs: int = 1, cams: int = 0) -> None:
        self.num_envs = num_envs
        self.contract = bench_contract(cams)
        self._data = observation_rows(num_envs, cams)
        self._terminated = np.zeros(num_envs, bool)

    def reset(self, **_: Any) -> str:
        return "bench"

    def step(self, actions: np.ndarray) -> None:
        pass

    def get_observation(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self._data, self._terminated


# -- bare websockets ---------------------------------------------------------------
def bare_reply(cams: int) -> bytes:
    """The same bytes our bridge sends for one slot's observation."""
    msg: dict[str, Any] = {k: v[0] for k, v in observation_rows(1, cams).items()}
    msg["terminated"] = False
    return pack(msg)


def bare_server_main(cams: int, conn: Any) -> None:
    """Process target: echo a pre-packed observation for every message received."""
    reply = bare_reply(cams)

    async def handler(ws: Any) -> None:
        try:
            async for _ in ws:
                await ws.send(reply)
        except websockets.ConnectionClosed:
            pass

    async def main() -> None:
        async with ws_serve(
            handler, "127.0.0.1", 0, compression=None, max_size=None, ping_interval=None
        ) as server:
            conn.send(next(iter(server.sockets)).getsockname()[1])
            conn.close()
            await asyncio.Event().wait()

    asyncio.run(main())


# -- clients -------------------------------------------------------------------------
async def _drive(step: Any, close: Any, warm: int, n: int, cap: float, sync: Any) -> Any:
    """Warm up, wait for the others, then time ``n`` round trips (or until ``cap`` s)."""
    for _ in range(warm):
        await step()
    await sync()
    lat = np.empty(n, np.int64)
    clock = time.perf_counter_ns
    t0 = clock()
    deadline = t0 + int(cap * 1e9)
    done = 0
    for i in range(n):
        s = clock()
        await step()
        e = clock()
        lat[i] = e - s
        done = i + 1
        if e > deadline:
            break
    t1 = clock()
    await close()  # at once: a lockstep peer may be waiting for this slot to leave
    return t0, t1, lat[:done]


async def run_clients(
    kind: str,
    url: str,
    tokens: list[str | None],
    warm: int,
    n: int,
    cap: float,
    barrier: Any = None,
) -> list[tuple[int, int, np.ndarray]]:
    """Connect len(tokens) clients, run them concurrently in this process."""
    drivers = []
    if kind == "ours":
        impl = os.environ.get("PYTEST_HUD_WEBSOCKET")  # --client, passed to client processes
        clients = [await RobotClient.connect(url, token=t, websocket=impl) for t in tokens]
        action = np.zeros(ACTION_SIZE, np.float32)
        for c in clients:
            await c.get_observation()  # the first observation, delivered at connect
            drivers.append((lambda c=c: c.step(action), c.close))
    else:
        payload = pack({"actions": np.zeros(ACTION_SIZE, np.float32)})
        for _ in tokens:
            ws = await ws_connect(url, compression=None, max_size=None, ping_interval=None)

            async def step(ws: Any = ws) -> None:
                await ws.send(payload)
                await ws.recv()

            drivers.append((step, ws.close))

    gate = asyncio.Event()
    waiting = [len(drivers)]

    async def sync() -> None:
        # every client of this process has warmed up; then line up with other processes
        waiting[0] -= 1
        if waiting[0] == 0:
            if barrier is not None:
                await asyncio.to_thread(barrier.wait)
            gate.set()
        await gate.wait()

    return list(await asyncio.gather(*(_drive(s, c, warm, n, cap, sync) for s, c in drivers)))


def client_proc_main(
    kind: str,
    url: str,
    tokens: list[str | None],
    warm: int,
    n: int,
    cap: float,
    barrier: Any,
    out: Any,
) -> None:
    """Process target: run a group of clients, send their timings back."""
    try:
        res = asyncio.run(run_clients(kind, url, tokens, warm, n, cap, barrier))
        out.put(("ok", res))
    except BaseException as exc:  # report rather than hang the parent
        barrier.abort()
        out.put(("error", repr(exc)))


def summarize(results: list[tuple[int, int, np.ndarray]]) -> dict[str, float]:
    t0 = min(r[0] for r in results)
    t1 = max(r[1] for r in results)
    steps = sum(len(r[2]) for r in results)
    lat = np.concatenate([r[2] for r in results]) / 1e6
    return {
        "steps_per_s": steps / ((t1 - t0) / 1e9),
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "steps": steps,
    }


async def run_mode(
    kind: str, url: str, tokens: list[str | None], procs: int, warm: int, n: int, cap: float
) -> dict[str, float]:
    if procs == 1:
        return summarize(await run_clients(kind, url, tokens, warm, n, cap))
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs)
    out = ctx.Queue()
    per = len(tokens) // procs
    ps = [
        ctx.Process(
            target=client_proc_main,
            args=(kind, url, tokens[i * per : (i + 1) * per], warm, n, cap, barrier, out),
        )
        for i in range(procs)
    ]
    for p in ps:
        p.start()
    results: list[Any] = []
    errors = []
    for _ in ps:
        status, res = await asyncio.to_thread(out.get, True, 120 + cap)
        if status == "ok":
            results.extend(res)
        else:
            errors.append(res)
    for p in ps:
        await asyncio.to_thread(p.join, 10)
    if errors:
        raise RuntimeError(f"client process failed: {errors}")
    return summarize(results)


def median_of(reps: list[dict[str, float]]) -> dict[str, float]:
    return {k: float(statistics.median(r[k] for r in reps)) for k in reps[0]}


# -- configs -----------------------------------------------------------------------------
MODES = [("1 client", 1, 1), ("8 clients gather", N_CLIENTS, 1), ("8 clients 2x4", N_CLIENTS, 2)]


class OursServer:
    """A NullSim bridge in its own process (spawned by RobotEndpoint)."""

    def __init__(self, cams: int, num_envs: int) -> None:
        self.num_envs = num_envs
        self.ep = RobotEndpoint(NullSim, kwargs={"num_envs": num_envs, "cams": cams})

    async def start(self) -> None:
        await self.ep.start()

    async def run(self, procs: int, args: Any) -> dict[str, float]:
        tokens: list[str | None] = [(await self.ep.reset())["token"] for _ in range(self.num_envs)]
        try:
            return await run_mode(
                "ours", self.ep.url, tokens, procs, args.warmup, args.steps, args.cap
            )
        finally:
            for t in tokens:
                await self.ep.result(t)

    async def stop(self) -> None:
        await self.ep.stop()


class BareServer:
    """A plain websockets echo-a-pre-packed-observation server in its own process."""

    def __init__(self, cams: int) -> None:
        self.cams = cams
        self.proc: Any = None
        self.url = ""

    async def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=bare_server_main, args=(self.cams, child), daemon=True)
        self.proc.start()
        if not await asyncio.to_thread(parent.poll, 60):
            raise RuntimeError("bare websockets server did not start")
        self.url = f"ws://127.0.0.1:{parent.recv()}"

    async def run(self, nclients: int, procs: int, args: Any) -> dict[str, float]:
        return await run_mode(
            "bare", self.url, [None] * nclients, procs, args.warmup, args.steps, args.cap
        )

    async def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            await asyncio.to_thread(self.proc.join, 5)


async def bench_payload(cams: int, args: Any) -> list[dict[str, Any]]:
    """Every mode of one payload; ours and bare repetitions alternate, so both see
    the same machine conditions."""
    one, many, bare = OursServer(cams, 1), OursServer(cams, N_CLIENTS), BareServer(cams)
    rows = []
    try:
        for server in (one, many, bare):
            await server.start()
        both = args.client == "both"
        for mode, nclients, procs in MODES:
            ours_reps, ws_reps, bare_reps = [], [], []
            server = one if nclients == 1 else many
            for _ in range(args.reps):
                # --client both: our client, then websockets', then bare, against the same
                # servers in the same repetition (client processes inherit the variable)
                os.environ["PYTEST_HUD_WEBSOCKET"] = "frames" if both else args.client
                ours_reps.append(await server.run(procs, args))
                if both:
                    os.environ["PYTEST_HUD_WEBSOCKET"] = "websockets"
                    ws_reps.append(await server.run(procs, args))
                bare_reps.append(await bare.run(nclients, procs, args))
            ours, bare_fig = median_of(ours_reps), median_of(bare_reps)
            rows.append(
                {
                    "mode": mode,
                    "clients": nclients,
                    "client_procs": procs,
                    "ours": ours,
                    "bare": bare_fig,
                    "ratio": ours["steps_per_s"] / bare_fig["steps_per_s"],
                    "ours_reps": ours_reps,
                    "bare_reps": bare_reps,
                    **(
                        {"websockets": median_of(ws_reps), "websockets_reps": ws_reps}
                        if both
                        else {}
                    ),
                }
            )
    finally:
        for server in (one, many, bare):
            await server.stop()
    return rows


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'payload':<24} {'clients':<17} {'ours/s':>8} {'p50 ms':>7} {'p99 ms':>7}"
        f" {'bare/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'ours/bare':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        o, b = r["ours"], r["bare"]
        print(
            f"{PAYLOAD_LABELS[r['payload']]:<24} {r['mode']:<17}"
            f" {fmt_rate(o['steps_per_s']):>8} {o['p50_ms']:>7.3f} {o['p99_ms']:>7.3f}"
            f" {fmt_rate(b['steps_per_s']):>8} {b['p50_ms']:>7.3f} {b['p99_ms']:>7.3f}"
            f" {r['ratio']:>8.0%}"
        )


def print_clients(rows: list[dict[str, Any]]) -> None:
    """Our RobotClient on our own WebSocket client vs on websockets', same servers, same run."""
    print("\nour client (frames) vs websockets' client under the same RobotClient and server")
    head = f"{'payload':<24} {'clients':<17} {'frames/s':>9} {'websockets/s':>13} {'ratio':>6}"
    print(head)
    print("-" * len(head))
    for r in rows:
        f, w = r["ours"]["steps_per_s"], r["websockets"]["steps_per_s"]
        print(
            f"{PAYLOAD_LABELS[r['payload']]:<24} {r['mode']:<17} {fmt_rate(f):>9}"
            f" {fmt_rate(w):>13} {f / w:>5.2f}x"
        )


def report_table(rows: list[dict[str, Any]], args: Any) -> None:
    from _report import write_table

    both = args.client == "both"
    header = ["payload", "clients", "ours/s", "p50 ms", "bare/s", "ours/bare"]
    table = []
    for r in rows:
        o, b = r["ours"], r["bare"]
        line = [PAYLOAD_LABELS[r["payload"]], r["mode"], fmt_rate(o["steps_per_s"])]
        line += [f"{o['p50_ms']:.3f}", fmt_rate(b["steps_per_s"]), f"{r['ratio']:.0%}"]
        if both:
            w = r["websockets"]["steps_per_s"]
            line += [fmt_rate(w), f"{o['steps_per_s'] / w:.2f}x"]
        table.append(line)
    if both:
        header += ["websockets client/s", "ours/websockets"]
    write_table(
        "wire",
        "Wire round trips (bench/wire.py)",
        header,
        table,
        note=f"{args.steps} steps a client after {args.warmup} warm-up, median of {args.reps}.",
    )


def check_targets(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for r in rows:
        if r["mode"] == "1 client":
            ok = r["ratio"] >= 0.5
            lines.append(
                f"[{'PASS' if ok else 'MISS'}] {r['payload']}, 1 client: ours/bare "
                f"{r['ratio']:.0%} (target >= 50%)"
            )
    for r in rows:
        if r["payload"] == "1cam" and r["mode"].startswith("8 clients"):
            rate = r["ours"]["steps_per_s"]
            lines.append(
                f"[{'PASS' if rate >= 8000 else 'MISS'}] 1cam, {r['mode']}: "
                f"{fmt_rate(rate)} steps/s total (target >= 8,000)"
            )
    return lines


async def main(args: Any) -> dict[str, Any]:
    rows = []
    for payload, cams in PAYLOADS.items():
        if args.payload and payload not in args.payload:
            continue
        for row in await bench_payload(cams, args):
            row = {"payload": payload, **row}
            rows.append(row)
            o, b = row["ours"]["steps_per_s"], row["bare"]["steps_per_s"]
            print(
                f"  {payload:<5} {row['mode']:<17} ours {fmt_rate(o):>7}/s"
                f"  bare {fmt_rate(b):>7}/s  ({row['ratio']:.0%})",
                file=sys.stderr,
                flush=True,
            )
    return {"rows": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run: 300 steps, 1 rep")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--report", action="store_true", help="write docs/performance.md")
    parser.add_argument("--steps", type=int, help="measured steps per client (default 3000)")
    parser.add_argument("--warmup", type=int, help="warm-up steps per client (default 200)")
    parser.add_argument("--reps", type=int, help="repetitions, median reported (default 3)")
    parser.add_argument("--cap", type=float, default=15.0, help="time cap per measurement, s")
    parser.add_argument(
        "--client",
        choices=["frames", "websockets", "both"],
        default="frames",
        help="our RobotClient's WebSocket implementation (default: frames, its default); "
        "both: each repetition runs ours on frames, then on websockets, then bare",
    )
    parser.add_argument(
        "--payload",
        action="append",
        choices=list(PAYLOADS),
        help="only these payloads (repeatable)",
    )
    args = parser.parse_args()
    quick = args.quick
    args.steps = args.steps or (300 if quick else 3000)
    args.warmup = args.warmup if args.warmup is not None else (50 if quick else 200)
    args.reps = args.reps or (1 if quick else 3)
    if quick:
        args.cap = min(args.cap, 3.0)

    os.environ["PYTEST_HUD_WEBSOCKET"] = "frames" if args.client == "both" else args.client
    t = time.perf_counter()
    load0 = os.getloadavg()[0]
    out = asyncio.run(main(args))
    rows = out["rows"]
    print(
        f"\nrobot wire round trips (1 action + 1 observation), {os.cpu_count()} cores, "
        f"{args.steps} steps/client after {args.warmup} warm-up, median of {args.reps}, "
        f"our client on {args.client}, "
        f"load avg {load0:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    print_table(rows)
    if args.client == "both":
        print_clients(rows)
    print()
    for line in check_targets(rows):
        print(line)
    print(f"\n({time.perf_counter() - t:.0f} s)")
    if args.report:
        report_table(rows, args)
    if args.json:
        out.update(
            steps=args.steps,
            warmup=args.warmup,
            reps=args.reps,
            cap_s=args.cap,
            cpus=os.cpu_count(),
            websockets=websockets.__version__,
            client=args.client,
            python=sys.version.split()[0],
            loadavg=os.getloadavg(),
        )
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
