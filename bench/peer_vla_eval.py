"""pytest-hud against vla-eval (allenai's vla-evaluation-harness 0.8.0) on the same work.

One vla-eval StepBenchmark (CartPole, state only,
tests/helpers/vla_eval_peer/cartpole_bench.py), one model server process (the scripted
controller behind vla-eval's own PredictModelServer,
batching on: ``max_batch_size`` 4), the same tasks x episodes, run by:

    vla-eval 1|2       vla-eval's own Orchestrator (what ``vla-eval run`` runs, no Docker),
                       1 shard, then 2 shard processes at once
    hud vla-eval 1|2   pytest over env.vla_eval(CartPoleBenchmark) rows with
                       --hud-agent=vla-eval:ws://... (one process, then -n 2), one
                       substrate per process kept across episodes (--hud-shared=1)
    hud vla-eval c4    the same with 4 rollouts in flight per process (--hud-concurrency=4
                       over one 4-slot substrate, --hud-shared=4): the server batches them
    hud native 1|2     pytest with its own agent (the same controller in-process) and its
                       own sim (env.gym("CartPole-v1"), the same seeds)

It checks the per-episode reward totals are equal across all six, and prints each one's
process wall time (start-up included), episodes/s, the server's batch widths and the
ratio of wall to vla-eval's at the same parallelism. Variants run interleaved over
``--reps`` rounds, order rotated, and the best wall of each is reported.

    PYTHONPATH=$PWD .venv/bin/python bench/peer_vla_eval.py [--episodes 10] [--max-steps 200]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "tests" / "helpers" / "vla_eval_peer"
sys.path.insert(0, str(HELPERS))

GOALS = (50.0, 1e9)  # goal0 succeeds, goal1 fails: mixed outcomes to compare

NATIVE_ENV = """
from pytest_hud import Environment
env = Environment("vla-cartpole")
sim = env.gym("CartPole-v1")

@env.template()
async def episode(task: dict):
    seed = 1000 * int(task["name"].removeprefix("goal")) + int(task["episode_idx"])
    ep = await sim.reset(seed=seed)
    yield {"prompt": "balance the pole", "robot": {"token": ep["token"]}}
    grade = await sim.result(token=ep["token"])
    grade["success"] = grade["total_reward"] >= task["goal"]
    yield grade
"""

TESTS = """
import os, pytest
from pytest_hud.interop.vla_eval.bridge import benchmark_rows
from cartpole_bench import CartPoleBenchmark
from {module} import episode

ROWS = [episode.task(**r) for r in benchmark_rows(
    CartPoleBenchmark, episodes=int(os.environ["VLA_EPISODES"]), goals={goals!r})]

@pytest.mark.hud(tasks=ROWS)
def test_cartpole(hud_result):
    pass
"""


def shard_main(url: str, shard: int, shards: int, episodes: int, max_steps: int) -> None:
    """One vla-eval shard process: its Orchestrator, results as JSON on stdout's last line."""
    import logging

    import anyio
    from vla_eval.orchestrator import Orchestrator

    logging.disable(logging.WARNING)
    cfg = {
        "server": {"url": url},
        "output_dir": tempfile.mkdtemp(prefix="vla-eval-bench-"),
        "benchmarks": [
            {
                "benchmark": "cartpole_bench:CartPoleBenchmark",
                "episodes_per_task": episodes,
                "max_steps": max_steps,
                "params": {"goals": list(GOALS), "max_steps": max_steps},
            }
        ],
    }
    sharding = {"shard_id": shard, "num_shards": shards} if shards > 1 else {}
    results = anyio.run(Orchestrator(cfg, no_save=True, **sharding).run)
    out = {}
    for task in results[0]["tasks"]:
        for ep in task["episodes"]:
            key = f"{task['task']}/{ep['episode_id']}"
            out[key] = [ep["metrics"].get("total_reward"), ep.get("elapsed_sec")]
    print(json.dumps(out))


Run = tuple[float, dict[str, Any], list[float]]  # wall, rewards, seconds per episode


def run_vla_eval(url: str, shards: int, args: argparse.Namespace) -> Run:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HELPERS), str(ROOT)])}
    cmd = [sys.executable, __file__, "--url", url, "--episodes", str(args.episodes)]
    cmd += ["--max-steps", str(args.max_steps)]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [*cmd, "--shard", f"{i}/{shards}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        for i in range(shards)
    ]
    outs = [p.communicate(timeout=1800)[0] for p in procs]
    wall = time.perf_counter() - t0
    rewards: dict[str, Any] = {}
    seconds: list[float] = []
    for p, out in zip(procs, outs, strict=True):
        if p.returncode != 0:
            raise SystemExit(f"a vla-eval shard failed (exit {p.returncode}):\n{out[-2000:]}")
        for key, (reward, elapsed) in json.loads(out.strip().splitlines()[-1]).items():
            rewards[key] = reward
            seconds.append(float(elapsed))
    return wall, rewards, seconds


def run_hud(
    work: Path, module: str, agent: str, workers: int, args: argparse.Namespace, width: int = 1
) -> Run:
    results = work / f"results-{module}-{workers}-{width}.json"
    env = {
        **os.environ,
        "VLA_NUM_ENVS": str(width),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(HELPERS), str(work)]),
        "VLA_EPISODES": str(args.episodes),
        "VLA_MAX_STEPS": str(args.max_steps),
    }
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"test_{module}.py"]
    cmd += [f"--hud-agent={agent}", f"--hud-results={results}"]
    cmd += [f"--hud-max-steps={args.max_steps}"]
    if workers > 1:
        cmd += ["-n", str(workers)]
    # one substrate per process kept across episodes (as a shard keeps its benchmark), with
    # `width` slots for `width` rollouts in flight together
    cmd += [f"--hud-shared={width}"] + ([f"--hud-concurrency={width}"] if width > 1 else [])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if not results.exists():
        tail = proc.stdout[-3000:]
        raise SystemExit(f"pytest ({module}, -n {workers}) wrote no results:\n{tail}")
    rewards = {}
    seconds: list[float] = []
    for row in json.loads(results.read_text())["rollouts"]:
        if row["error"]:
            raise SystemExit(f"{module} -n {workers}: {row['key']} errored: {row['error']}")
        task = row["args"]["task"]
        rewards[f"{task['name']}/{task['episode_idx']}"] = row["total_reward"]
        seconds.append(float(row["duration"]))
    return wall, rewards, seconds


def widths(stats: Path, pid: int) -> str:
    os.kill(pid, signal.SIGUSR1)
    for _ in range(100):
        if stats.exists():
            break
        time.sleep(0.05)
    time.sleep(0.1)
    seen = Counter({int(k): v for k, v in json.loads(stats.read_text()).items()})
    stats.unlink()
    total = sum(seen.values()) or 1
    mean = sum(k * v for k, v in seen.items()) / total
    return f"{mean:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=10, help="episodes per task (2 tasks)")
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--shard", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.shard:
        shard, shards = (int(x) for x in args.shard.split("/"))
        return shard_main(args.url, shard, shards, args.episodes, args.max_steps)

    from server_proc import controller_server

    work = Path(tempfile.mkdtemp(prefix="peer-vla-eval-"))
    (work / "native_env.py").write_text(NATIVE_ENV)
    for module in ("cartpole_env", "native_env"):
        (work / f"test_{module}.py").write_text(TESTS.format(module=module, goals=GOALS))
    (work / "conftest.py").write_text("")
    stats = work / "widths.json"
    n = 2 * args.episodes
    with controller_server("--batch", "4", "--stats", str(stats)) as (port, proc):
        url = f"ws://127.0.0.1:{port}"
        variants = {
            "vla-eval 1": lambda: run_vla_eval(url, 1, args),
            "vla-eval 2": lambda: run_vla_eval(url, 2, args),
            "hud vla-eval 1": lambda: run_hud(work, "cartpole_env", f"vla-eval:{url}", 1, args),
            "hud vla-eval 2": lambda: run_hud(work, "cartpole_env", f"vla-eval:{url}", 2, args),
            "hud vla-eval c4 1": lambda: run_hud(
                work, "cartpole_env", f"vla-eval:{url}", 1, args, width=4
            ),
            "hud vla-eval c4 2": lambda: run_hud(
                work, "cartpole_env", f"vla-eval:{url}", 2, args, width=4
            ),
            "hud native 1": lambda: run_hud(work, "native_env", "cartpole_agents:balance", 1, args),
            "hud native 2": lambda: run_hud(work, "native_env", "cartpole_agents:balance", 2, args),
        }
        best: dict[str, float] = {}
        per_ep: dict[str, float] = {}
        batch: dict[str, str] = {}
        outcome: dict[str, dict[str, Any]] = {}
        names = list(variants)
        for rep in range(args.reps):
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for name in order:
                wall, rewards, seconds = variants[name]()
                batch[name] = "-" if "native" in name else widths(stats, proc.pid)
                if wall < best.get(name, float("inf")):
                    best[name] = wall
                    per_ep[name] = sum(seconds) / len(seconds)
                outcome[name] = rewards
                print(f"  rep {rep + 1} {name:<15} {wall:6.2f} s", file=sys.stderr, flush=True)
    ref = outcome["vla-eval 1"]
    for name, rewards in outcome.items():
        if rewards != ref:
            diff = {k: (ref.get(k), rewards.get(k)) for k in ref.keys() | rewards.keys()}
            diff = {k: v for k, v in diff.items() if v[0] != v[1]}
            raise SystemExit(f"outcomes differ: {name} vs vla-eval 1: {diff}")
    print(f"{n} episodes x {args.max_steps} steps, outcomes equal across all variants")
    print("wall: the whole process (start-up included); s/ep: inside one episode")
    head = f"{'variant':<16} {'wall s':>7} {'eps/s':>7} {'s/ep':>6} {'batch':>6}"
    print(f"{head} {'wall vs vla-eval':>17} {'s/ep vs vla-eval':>17}")
    for name in names:
        ref_name = f"vla-eval {name[-1]}"
        ratio, ep_ratio = best[name] / best[ref_name], per_ep[name] / per_ep[ref_name]
        print(
            f"{name:<16} {best[name]:7.2f} {n / best[name]:7.2f} {per_ep[name]:6.3f} "
            f"{batch[name]:>6} {ratio:16.2f}x {ep_ratio:16.2f}x"
        )


if __name__ == "__main__":
    main()
