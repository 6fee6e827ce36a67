"""Benchmark batched inference: N concurrent rollouts sharing one torch policy on CPU.

The policy (``TorchPolicy``) is a small conv encoder over a 96x96x3 camera plus an
8-float state, then a weight-heavy MLP trunk (9 x 4096-wide, ~150M parameters) in
bfloat16, as VLA checkpoints run. At batch 1 the forward is bound by reading the
weights (matrix-vector products); with AMX / AVX512-bf16 a batch of 8 is one cheap
matrix product over the same weights, so it costs little more than a batch of 1:
the regime of real VLA serving, where batching pays. (With ``--dtype float32`` the
batch-8 product is compute-bound on a 2-core CPU, ~3x a batch of 1, and batching gains
less.) The env is a
no-op sim (``TinySim``: preallocated observations, ``step`` only counts ticks) served
by one vectorized bridge in its own process, so inference dominates every step.
Chunks are one action long: every control tick is one inference.

For N = 1, 2, 4, 8, 16 concurrent rollouts:

* unbatched: N ``RobotAgent(TorchPolicy)`` episodes in one process (``ainfer`` runs each
  row as its own forward in a worker thread);
* BatchedAgent: the same N episodes through one ``BatchedAgent`` (one forward per tick);
* PolicyServer: the policy served by ``PolicyServer`` in this process; N client
  processes each run one ``RobotAgent(RemoteModel(url))`` episode.

Reported: inferences/s over all rollouts (first connect to last episode end; median
of the repetitions, the modes interleaved), the speedup over unbatched at the same
N, the mean width of the forwards and the mean time of one batched forward.

    python bench/batching.py [--quick] [--json PATH] [--budget N] [--reps R]
                             [--threads T] [--dtype D] [--width W] [--depth D]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.robot import BatchedAgent, RobotAgent, RobotBridge, RobotEndpoint
from pytest_hud.robot.agent.model import Model
from pytest_hud.robot.agent.policy_server import PolicyServer
from pytest_hud.robot.agent.remote import RemoteModel

IMAGE_SHAPE = (96, 96, 3)
STATE_SIZE = 8
ACTION_SIZE = 8
WIDTH = 4096
DEPTH = 8
COUNTS = (1, 2, 4, 8, 16)
CONTRACT = {
    "control_rate": 50,
    "robot_type": "bench",
    "features": {
        "observation/image": {"role": "observation", "type": "rgb", "shape": list(IMAGE_SHAPE)},
        "observation/state": {"role": "observation", "dtype": "float32", "shape": [STATE_SIZE]},
        "action": {"role": "action", "dtype": "float32", "shape": [ACTION_SIZE]},
    },
}


# -- the env -----------------------------------------------------------------------------
class TinySim(RobotBridge):
    """A sim that costs nothing: each slot runs ``length`` ticks of preallocated frames."""

    contract = CONTRACT

    def __init__(self, num_envs: int = 1, length: int = 20) -> None:
        self.num_envs = num_envs
        self.length = length
        rng = np.random.default_rng(0)
        self.data = {
            "observation/image": rng.integers(0, 256, (num_envs, *IMAGE_SHAPE), dtype=np.uint8),
            "observation/state": rng.standard_normal((num_envs, STATE_SIZE)).astype(np.float32),
        }
        self.ticks = np.zeros(num_envs, np.int64)

    def reset(self, **_: Any) -> str:
        self.ticks[:] = 0
        return "bench"

    def reset_slot(self, index: int, **_: Any) -> str:
        self.ticks[index] = 0
        return "bench"

    def step(self, actions: np.ndarray) -> None:
        self.ticks += self.ticks < self.length

    def get_observation(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.data, self.ticks >= self.length


# -- the policy ------------------------------------------------------------------------------
class TorchPolicy(Model):
    """Conv encoder + weight-heavy MLP; ``[N, 1, ACTION_SIZE]`` out (torch imported lazily)."""

    def __init__(
        self,
        threads: int = 2,
        dtype: str = "bfloat16",
        width: int = WIDTH,
        depth: int = DEPTH,
        warm: bool = True,
    ) -> None:
        import torch
        from torch import nn

        torch.set_num_threads(threads)
        torch.manual_seed(0)
        self.torch = torch
        self.dtype = getattr(torch, dtype)
        trunk: list[nn.Module] = []
        for _ in range(depth):
            trunk += [nn.Linear(width, width), nn.ReLU()]
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 16, 8, 4), nn.ReLU(), nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.Flatten()
        )
        self.net = nn.Sequential(
            nn.Linear(32 * 10 * 10 + STATE_SIZE, width), nn.ReLU(), *trunk, nn.Linear(width, 8)
        )
        for module in (self.encoder, self.net):
            module.to(self.dtype).eval()
        if warm:
            for n in (1, 8, 1):
                self.infer(dummy_batch(n))

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        torch = self.torch
        with torch.inference_mode():
            image = torch.from_numpy(np.asarray(batch["observation/image"]))
            image = image.permute(0, 3, 1, 2).to(self.dtype).div_(255.0)
            state = torch.from_numpy(np.asarray(batch["observation/state"])).to(self.dtype)
            out = self.net(torch.cat([self.encoder(image), state], dim=1))
        return out.float().numpy()[:, None, :]


def dummy_batch(n: int) -> dict[str, Any]:
    return {
        "observation/image": np.zeros((n, *IMAGE_SHAPE), np.uint8),
        "observation/state": np.zeros((n, STATE_SIZE), np.float32),
        "prompt": ["bench"] * n,
    }


def bench_agent() -> RobotAgent:
    """For ``python -m pytest_hud policy-server --agent bench/batching.py:bench_agent``."""
    return RobotAgent(TorchPolicy(), name="bench")


def forward_costs(model: TorchPolicy, sizes: tuple[int, ...] = (1, 8, 16)) -> dict[int, float]:
    """Best-of-12 ms per forward at each batch size, sizes interleaved (the figure least
    disturbed by other load on the machine)."""
    batches = {n: dummy_batch(n) for n in sizes}
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(12):
        for n, batch in batches.items():
            t0 = time.perf_counter()
            model.infer(batch)
            times[n].append(time.perf_counter() - t0)
    return {n: min(ts) * 1000 for n, ts in times.items()}


# -- one configuration ------------------------------------------------------------------------
async def episodes(endpoint: RobotEndpoint, n: int) -> list[str]:
    return [(await endpoint.reset())["token"] for _ in range(n)]


async def run_in_process(agent: RobotAgent, endpoint: RobotEndpoint, n: int) -> dict[str, Any]:
    tokens = await episodes(endpoint, n)
    t0 = time.monotonic()
    reports = await asyncio.gather(*(agent.run_episode(endpoint.url, token=t) for t in tokens))
    wall = time.monotonic() - t0
    for t in tokens:
        await endpoint.result(t)
    return {"inferences": sum(r.inferences for r in reports), "wall": wall}


def client_main(policy_url: str, env_url: str, token: str, barrier: Any, out: Any) -> None:
    """Client process: one RobotAgent(RemoteModel) episode, after every client is ready."""
    try:
        agent = RobotAgent(RemoteModel(policy_url))

        async def main() -> Any:
            await agent.model.connect()  # type: ignore[attr-defined]
            await asyncio.to_thread(barrier.wait, 120)
            t0 = time.time()
            report = await agent.run_episode(env_url, token=token)
            return t0, time.time(), report.inferences

        out.put(("ok", asyncio.run(main())))
    except BaseException as exc:  # report rather than hang the parent
        barrier.abort()
        out.put(("error", repr(exc)))


async def run_through_server(url: str, endpoint: RobotEndpoint, n: int) -> dict[str, Any]:
    tokens = await episodes(endpoint, n)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(n)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=client_main, args=(url, endpoint.url, t, barrier, out)) for t in tokens
    ]
    for p in procs:
        p.start()
    results, errors = [], []
    for _ in procs:
        status, res = await asyncio.to_thread(out.get, True, 600)
        (results if status == "ok" else errors).append(res)
    for p in procs:
        await asyncio.to_thread(p.join, 30)
    for t in tokens:
        await endpoint.result(t)
    if errors:
        raise RuntimeError(f"client process failed: {errors}")
    wall = max(r[1] for r in results) - min(r[0] for r in results)
    return {"inferences": sum(r[2] for r in results), "wall": wall}


async def bench(args: Any) -> dict[str, Any]:
    model = TorchPolicy(threads=args.threads, dtype=args.dtype, width=args.width, depth=args.depth)
    costs = forward_costs(model)
    print(
        "forward ms at batch 1/8/16: "
        + " / ".join(f"{costs[n]:.1f}" for n in (1, 8, 16))
        + f"  (8 singles cost {8 * costs[1] / costs[8]:.1f}x one batch of 8)",
        file=sys.stderr,
        flush=True,
    )
    rows = []
    server = PolicyServer(model, max_wait_s=0.05)
    await server.start()
    try:
        for n in args.counts:
            length = max(4, args.budget // n)
            endpoint = RobotEndpoint(TinySim, kwargs={"num_envs": n, "length": length})
            await endpoint.start()
            try:
                row: dict[str, Any] = {"rollouts": n, "steps": length}
                reps: dict[str, list[float]] = {"unbatched": [], "batched": [], "server": []}
                widths: dict[str, list[int]] = {"batched": [], "server": []}
                fwd: dict[str, list[float]] = {"batched": [], "server": []}
                for _ in range(args.reps):  # modes interleaved: each sees the same machine
                    res = await run_in_process(RobotAgent(model), endpoint, n)
                    reps["unbatched"].append(res["inferences"] / res["wall"])
                    batched = BatchedAgent(RobotAgent(model))
                    res = await run_in_process(batched, endpoint, n)
                    reps["batched"].append(res["inferences"] / res["wall"])
                    widths["batched"] += batched.batched.batches
                    fwd["batched"].append(batched.batched.forward_s / len(batched.batched.batches))
                    before, before_s = len(server.batched.batches), server.batched.forward_s
                    res = await run_through_server(server.url, endpoint, n)
                    reps["server"].append(res["inferences"] / res["wall"])
                    widths["server"] += server.batched.batches[before:]
                    forwards = len(server.batched.batches) - before
                    fwd["server"].append((server.batched.forward_s - before_s) / forwards)
                for mode, rates in reps.items():
                    row[mode] = statistics.median(rates)
                    row[f"{mode}_reps"] = rates
                for mode, got in widths.items():
                    row[f"{mode}_width"] = float(np.mean(got))
                    row[f"{mode}_forward_ms"] = statistics.median(fwd[mode]) * 1000
            finally:
                await endpoint.stop()
            rows.append(row)
            print(
                f"  {n:>2} rollouts: unbatched {row['unbatched']:6.1f}/s  batched "
                f"{row['batched']:6.1f}/s  server {row['server']:6.1f}/s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        await server.stop()
    return {"forward_ms": costs, "rows": rows}


def print_table(result: dict[str, Any]) -> None:
    head = (
        f"{'rollouts':>8} {'steps':>5} {'unbatched/s':>11} | {'BatchedAgent/s':>14} {'x':>5}"
        f" {'width':>5} {'fwd ms':>6} | {'PolicyServer/s':>14} {'x':>5} {'width':>5} {'fwd ms':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in result["rows"]:
        print(
            f"{r['rollouts']:>8} {r['steps']:>5} {r['unbatched']:>11.1f} |"
            f" {r['batched']:>14.1f} {r['batched'] / r['unbatched']:>5.1f}"
            f" {r['batched_width']:>5.1f} {r['batched_forward_ms']:>6.1f} |"
            f" {r['server']:>14.1f} {r['server'] / r['unbatched']:>5.1f}"
            f" {r['server_width']:>5.1f} {r['server_forward_ms']:>6.1f}"
        )
    costs = result["forward_ms"]
    print(
        f"alone, best of 12: forward {costs[1]:.1f} ms at batch 1, {costs[8]:.1f} ms at 8, "
        f"{costs[16]:.1f} ms at 16. x: speedup over unbatched at the same N; width: mean "
        "rows per forward; fwd ms: mean time per batched forward"
    )
    for r in result["rows"]:
        if r["rollouts"] == 8:
            for mode in ("batched", "server"):
                speedup = r[mode] / r["unbatched"]
                print(
                    f"[{'PASS' if speedup >= 4 else 'MISS'}] {mode} at 8 rollouts: "
                    f"{speedup:.1f}x unbatched (target >= 4x)"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 1, 8 only; a smaller budget")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument(
        "--budget", type=int, help="inferences per configuration (steps = budget / N)"
    )
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument(
        "--dtype", default="bfloat16", choices=["bfloat16", "float32"], help="weights' dtype"
    )
    parser.add_argument("--width", type=int, default=WIDTH, help="MLP width (default %(default)s)")
    parser.add_argument("--depth", type=int, default=DEPTH, help="MLP depth (default %(default)s)")
    parser.add_argument("--reps", type=int, help="repetitions, median reported (default 3)")
    args = parser.parse_args()
    args.counts = (1, 8) if args.quick else COUNTS
    args.budget = args.budget or (48 if args.quick else 160)
    args.reps = args.reps or (1 if args.quick else 3)
    result = asyncio.run(bench(args))
    print_table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
