"""pytest-hud against vla-eval (allenai's vla-evaluation-harness 0.8.0) on the same work,
at equal parallelism.

Equal parallelism is read two ways, and the bench prints both. vla-eval's Orchestrator
runs a shard's episodes one after another (``Orchestrator._run_benchmark_inner`` awaits
``runner.run_episode`` per work item), so vla-eval has N episodes in flight only with N
shard processes. pytest-hud has N in flight with ``-n N`` (one per worker), with
``--hud-concurrency=N`` over one N-slot substrate (``--hud-shared=N``) in one process, or
both. The first table and its summary pair equal episodes in flight; the last pairs
equal processes (vla-eval's P shards against the fastest pytest-hud variant in at most P
processes: the issue's "1 and 2 shards against -n 1 and -n 2"). For each N in
``--parallel`` the bench runs:

    vla-eval N         N shard processes of vla-eval's own Orchestrator (what
                       ``vla-eval run`` runs, without Docker)
    hud -n N           N pytest-xdist workers, one rollout in flight each (N=1: one
                       process, no xdist), one substrate per process kept across
                       episodes (--hud-shared=1): the like-for-like row
    hud cN             one pytest process, --hud-concurrency=N over one N-slot substrate
    hud -n 2 cN/2      two workers with N/2 in flight each (N >= 4)
                       (these rows are the default placement: the benchmark served in
                       the env server's process, here the pytest process, as vla-eval's
                       shard holds its benchmark, reached without a socket)
    hud sim process ...  each of the three above with the benchmark in a sim process of
                       its own (``env.vla_eval(..., inline=False)``, ``--hud-sim-process``:
                       the default before, kept for isolation)
    hud native         (N=1) pytest-hud's own agent (the same controller in-process) and
                       its own sim (env.gym("CartPole-v1"), the same seeds)
    bare 1 process, bare cN, bare N processes
                       the floor (not with --camera): pytest-hud's VlaEvalSession and the
                       benchmark in a plain loop, nothing else, one loop per process or N
                       in one; the bench prints what each says about the rows it bounds,
                       and the floor under -n N (xdist's own start, then the bare
                       processes' work) against hud cN

Everything else is equal: one vla-eval StepBenchmark (CartPole, state only,
tests/helpers/vla_eval_peer/cartpole_bench.py), one model server process (the scripted
controller behind vla-eval's own PredictModelServer with batching, on 127.0.0.1), the same
tasks x episodes. pytest-hud serves the benchmark with ``env.vla_eval`` and drives the
server with ``--hud-agent=vla-eval:ws://...``. Per-episode outcomes (reward total, success,
steps) must be equal across every variant, or the bench fails.

The server's ``max_batch_size`` is ``--batch`` (default 4, as the issue set it), or with
``--batch inflight`` the variant's episodes in flight, set through the server's own
``GET /config`` before each variant: a batch then fills (and is dispatched at once) when
every episode in flight has sent its observation, so the server's partial-batch window
(``--wait``) does not hide what the harnesses cost.

``--camera N`` puts an N x N camera frame (a textured scene) in every observation and
makes the server's policy read it (its spec names the image, not the state): vla-eval's
client PNG-encodes every image (its default in 0.8.0; its run config has no switch) and its
server decodes it, pytest-hud sends raw arrays. The extra rows ``vla-eval N raw`` set
vla-eval's codec to raw (``set_image_format("raw")`` in each shard) for the comparison at
equal encoding.

Every child runs with Python's bytecode cache on (in the bench's temp folder, warmed by a
first run), as an installed package does: an environment with ``PYTHONDONTWRITEBYTECODE``
would otherwise recompile an editable checkout on every start while site-packages load
from bytecode.

Variants run interleaved over ``--reps`` rounds, order rotated; the best wall of each is
kept. Start-up is measured apart: each harness running 2 episodes of 1 step, 200 episodes of
1 step (what an episode costs beyond its steps), and pytest on a file of two empty tests
with and without the plugin, in one process and with ``-n 2`` (xdist's own start: the
floor under any ``-n`` row).

    PYTHONPATH=$PWD .venv/bin/python bench/peer_vla_eval.py [--episodes 10] [--max-steps 300]
        [--parallel 1,2,4] [--batch 4|inflight] [--camera 224] [--reps 3] [--report]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "tests" / "helpers" / "vla_eval_peer"
sys.path.insert(0, str(HELPERS))
sys.path.insert(0, str(ROOT / "bench"))

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


def shard_main(url: str, shard: int, shards: int, work: Work) -> None:
    """One vla-eval shard process: its Orchestrator, results as JSON on stdout's last line."""
    import logging

    import anyio
    from vla_eval.orchestrator import Orchestrator
    from vla_eval.protocol.numpy_codec import set_image_format

    logging.disable(logging.WARNING)
    if work.raw:  # not vla-eval's default (PNG); its config has no option for it
        set_image_format("raw")
    params: dict[str, Any] = {"goals": list(GOALS), "max_steps": work.max_steps}
    if work.camera:
        params["camera"] = work.camera
    cfg = {
        "server": {"url": url},
        "output_dir": tempfile.mkdtemp(prefix="vla-eval-bench-"),
        "benchmarks": [
            {
                "benchmark": "cartpole_bench:CartPoleBenchmark",
                "episodes_per_task": work.episodes,
                "max_steps": work.max_steps,
                "params": params,
            }
        ],
    }
    sharding = {"shard_id": shard, "num_shards": shards} if shards > 1 else {}
    results = anyio.run(Orchestrator(cfg, no_save=True, **sharding).run)
    out = {}
    for task in results[0]["tasks"]:
        for ep in task["episodes"]:
            key = f"{task['task']}/{ep['episode_id']}"
            m = ep["metrics"]
            out[key] = [
                m.get("total_reward"),
                bool(m.get("success")),
                ep.get("steps"),
                ep.get("elapsed_sec"),
            ]
    print(json.dumps(out))


def bare_main(url: str, shard: int, shards: int, work: Work, inflight: int = 1) -> None:
    """One bare client process: the benchmark stepped in a plain loop that asks the server
    through pytest-hud's VlaEvalSession, nothing else (no pytest, no agent, no bridge), with
    ``inflight`` such loops at once: the floor of any harness on this server. Its share of
    the work items is every ``shards``-th one; results as JSON on stdout's last line, as a
    shard's."""
    import asyncio

    from cartpole_bench import CartPoleBenchmark
    from peer_vla_eval_steps import bare_episode

    from pytest_hud.interop.vla_eval.connection import VlaEvalSession

    out: dict[str, list[Any]] = {}

    async def loop(items: list[dict[str, Any]]) -> None:
        bench = CartPoleBenchmark(goals=GOALS, max_steps=work.max_steps)
        session = VlaEvalSession(url)
        await session.open()
        for task in items:
            t0 = time.perf_counter()
            steps, total = await bare_episode(session, bench, task, work.max_steps)
            key = f"{task['name']}/{task['episode_idx']}"
            out[key] = [total, total >= task["goal"], steps, time.perf_counter() - t0]
        await session.close()

    async def run() -> None:
        tasks = CartPoleBenchmark(goals=GOALS).get_tasks()
        items = [{**t, "episode_idx": ep} for t in tasks for ep in range(work.episodes)]
        mine = items[shard::shards]
        await asyncio.gather(*(loop(mine[k::inflight]) for k in range(inflight)))

    asyncio.run(run())
    print(json.dumps(out))


@dataclass(frozen=True)
class Work:
    """What every variant runs: episodes per task, steps, the camera's size (0: none), for
    vla-eval whether its shards send raw images instead of its default PNG, and for
    pytest-hud whether the benchmark gets a sim process of its own (``inline=False``;
    by default it is served in the env server's process)."""

    episodes: int
    max_steps: int
    camera: int = 0
    raw: bool = False
    sim_process: bool = False

    def argv(self) -> list[str]:
        out = ["--episodes", str(self.episodes), "--max-steps", str(self.max_steps)]
        out += ["--camera", str(self.camera)] + (["--raw-images"] if self.raw else [])
        return out


@dataclass
class Run:
    wall: float
    #: episode key -> (reward total, success, steps)
    outcomes: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    #: per episode: its seconds over its steps, in ms
    step_ms: list[float] = field(default_factory=list)
    #: the model server's CPU time over the run, per episode step, in ms
    server_ms: float = 0.0


@dataclass
class Variant:
    name: str
    inflight: int
    go: Callable[[], Run]
    server: bool = True  # drives the vla-eval server (its batch widths are read)
    procs: int = 1  # harness processes (shards, or pytest processes), the server apart


def child_env(work: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    env["PYTHONPATH"] = os.pathsep.join([str(HELPERS), str(ROOT), str(work)])
    env.update(extra)
    return env


def run_vla_eval(url: str, shards: int, work: Path, w: Work, bare: int = 0) -> Run:
    """vla-eval's ``shards`` shard processes (``bare``: as many bare client processes, each
    with ``bare`` episodes in flight)."""
    cmd = [sys.executable, __file__, "--url", url, *w.argv()]
    cmd += ["--bare", str(bare)] if bare else []
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [*cmd, "--shard", f"{i}/{shards}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=child_env(work),
        )
        for i in range(shards)
    ]
    outs = [p.communicate(timeout=1800)[0] for p in procs]
    run = Run(time.perf_counter() - t0)
    for p, out in zip(procs, outs, strict=True):
        if p.returncode != 0:
            raise SystemExit(f"a client process failed (exit {p.returncode}):\n{out[-2000:]}")
        for key, (reward, success, steps, elapsed) in json.loads(
            out.strip().splitlines()[-1]
        ).items():
            run.outcomes[key] = (reward, success, steps)
            run.step_ms.append(1e3 * float(elapsed) / max(int(steps), 1))
    return run


#: pytest with what a user's install has: the plugins only this project's dev extra brings
#: (hypothesis imports itself at every run's end, about 0.1 s here) are not loaded.
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
PYTEST += ["-p", "no:hypothesispytest", "-p", "no:timeout"]


def run_hud(work: Path, module: str, agent: str, workers: int, width: int, w: Work) -> Run:
    results = work / f"results-{module}-{workers}-{width}.json"
    results.unlink(missing_ok=True)
    env = child_env(
        work,
        VLA_NUM_ENVS=str(width),
        VLA_EPISODES=str(w.episodes),
        VLA_MAX_STEPS=str(w.max_steps),
        VLA_CAMERA=str(w.camera or ""),
        VLA_INLINE="0" if w.sim_process else "",
    )
    cmd = [*PYTEST, f"test_{module}.py"]
    cmd += [f"--hud-agent={agent}", f"--hud-results={results}"]
    cmd += [f"--hud-max-steps={w.max_steps}"]
    if workers > 1:
        cmd += ["-n", str(workers)]
    # one substrate per process kept across episodes (as a shard keeps its benchmark), with
    # `width` slots for `width` rollouts in flight together
    cmd += [f"--hud-shared={width}"] + ([f"--hud-concurrency={width}"] if width > 1 else [])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    run = Run(time.perf_counter() - t0)
    if not results.exists():
        tail = proc.stdout[-3000:]
        raise SystemExit(f"pytest ({module}, -n {workers}) wrote no results:\n{tail}")
    for row in json.loads(results.read_text())["rollouts"]:
        if row["error"]:
            raise SystemExit(f"{module} -n {workers}: {row['key']} errored: {row['error']}")
        task = row["args"]["task"]
        key = f"{task['name']}/{task['episode_idx']}"
        run.outcomes[key] = (row["total_reward"], bool(row["success"]), row["steps"])
        run.step_ms.append(1e3 * float(row["duration"]) / max(int(row["steps"]), 1))
    return run


def collect_only(work: Path, agent: str) -> float:
    env = child_env(work, VLA_NUM_ENVS="1", VLA_EPISODES="1", VLA_MAX_STEPS="1")
    cmd = [*PYTEST, "--collect-only"]
    cmd += ["test_cartpole_env.py", f"--hud-agent={agent}"]
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=work, env=env, capture_output=True, check=True, timeout=600)
    return time.perf_counter() - t0


#: a test file with no rollout: what pytest, xdist and the plugin cost before any episode
TRIVIAL = """
import pytest

@pytest.mark.parametrize("i", range(2))
def test_nothing(i):
    pass
"""


def bare_pytest(work: Path, workers: int, plugin: bool) -> float:
    """pytest on a trivial test file (``workers`` > 1: with xdist), with or without the
    plugin: xdist's own start is the floor under any ``-n`` run, whatever the plugin does."""
    (work / "test_trivial.py").write_text(TRIVIAL)
    cmd = [*PYTEST, "test_trivial.py"] + ([] if plugin else ["-p", "no:hud"])
    cmd += ["-n", str(workers)] if workers > 1 else []
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=work, env=child_env(work), capture_output=True, check=True, timeout=600)
    return time.perf_counter() - t0


def python_alone(work: Path, code: str = "pass") -> float:
    """An interpreter that runs ``code`` and exits (``pass``: what each process pays before
    any import; ``import pytest``: that and all pytest imports; a shard's imports: its start
    without episodes)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=child_env(work), check=True, timeout=600)
    return time.perf_counter() - t0


def widths(stats: Path, proc: subprocess.Popen[str]) -> float:
    """The mean width of the batches the server ran since the last call."""
    from server_proc import server_stats

    seen = {int(k): v for k, v in server_stats(proc, stats)["widths"].items()}
    total = sum(seen.values()) or 1
    return sum(k * v for k, v in seen.items()) / total


def set_batch(port: int, size: int) -> None:
    """The server's max_batch_size, through vla-eval's own HTTP control plane."""
    url = f"http://127.0.0.1:{port}/config?max_batch_size={size}"
    with urllib.request.urlopen(url, timeout=10) as reply:
        applied = json.loads(reply.read())["config"]["max_batch_size"]
    if applied != size:
        raise SystemExit(f"the server kept max_batch_size={applied}, asked for {size}")


def variants(url: str, work: Path, args: argparse.Namespace) -> list[Variant]:
    w = Work(args.episodes, args.max_steps, args.camera)
    raw = Work(args.episodes, args.max_steps, args.camera, raw=True)
    agent = f"vla-eval:{url}"

    apart = Work(args.episodes, args.max_steps, args.camera, sim_process=True)

    def hud(workers: int, width: int, how: Work = w) -> Callable[[], Run]:
        return lambda: run_hud(work, "cartpole_env", agent, workers, width, how)

    out: list[Variant] = []
    for n in args.parallel:
        go = lambda n=n: run_vla_eval(url, n, work, w)  # noqa: E731
        out.append(Variant(f"vla-eval {n}", n, go, procs=n))
        if args.camera:  # the images raw, as pytest-hud sends them
            go = lambda n=n: run_vla_eval(url, n, work, raw)  # noqa: E731
            out.append(Variant(f"vla-eval {n} raw", n, go, procs=n))
        if not args.camera:  # the floor: a bare client in each of N processes, or N in one
            go = lambda n=n: run_vla_eval(url, n, work, w, bare=1)  # noqa: E731
            out.append(Variant(bare_name(n, n), n, go, procs=n))
            if n > 1:
                go = lambda n=n: run_vla_eval(url, 1, work, w, bare=n)  # noqa: E731
                out.append(Variant(bare_name(n, 1), n, go))
        for how, tag in ((w, "hud"), (apart, "hud sim process")):
            name = f"{tag} -n {n}" if n > 1 else f"{tag} 1 process"
            out.append(Variant(name, n, hud(n, 1, how), procs=n))
            if n > 1:
                out.append(Variant(f"{tag} c{n}", n, hud(1, n, how)))
            if n >= 4 and n % 2 == 0:
                out.append(Variant(f"{tag} -n 2 c{n // 2}", n, hud(2, n // 2, how), procs=2))
        if n == 1 and not args.camera:  # its sim (env.gym) has no camera
            native = "cartpole_agents:balance"
            go = lambda a=native: run_hud(work, "native_env", a, 1, 1, w)  # noqa: E731
            out.append(Variant("hud native", 1, go, server=False))
    if args.only:
        keep = ("vla-eval", "bare")
        out = [v for v in out if re.search(args.only, v.name) or v.name.startswith(keep)]
    return out


def startup(url: str, work: Path, reps: int) -> list[tuple[str, float]]:
    """Best-of-``reps`` walls of the start-up pieces (the first, cache-warming run dropped),
    state only: with ``--camera`` the bench skips them (``main``)."""
    agent = f"vla-eval:{url}"
    tiny, items = Work(1, 1), Work(ITEMS // 2, 1)
    pieces: dict[str, Callable[[], float]] = {
        PYTHON_ALONE: lambda: python_alone(work),
        PYTEST_IMPORT: lambda: python_alone(work, "import pytest"),
        "vla-eval: Python + vla-eval + benchmark imports": lambda: python_alone(
            work, "import anyio, vla_eval.orchestrator, cartpole_bench"
        ),
        "vla-eval: 1 shard, 2 episodes x 1 step": lambda: run_vla_eval(url, 1, work, tiny).wall,
        "pytest-hud: pytest + plugin + collection + preflight (--collect-only)": lambda: (
            collect_only(work, agent)
        ),
        "pytest-hud: 1 process, 2 episodes x 1 step": lambda: (
            run_hud(work, "cartpole_env", agent, 1, 1, tiny).wall
        ),
        # what -n 2 costs before any step: xdist's controller and two workers starting
        "pytest-hud: -n 2, 2 episodes x 1 step": lambda: (
            run_hud(work, "cartpole_env", agent, 2, 1, tiny).wall
        ),
        # the floor under -n: pytest and xdist alone, then with the plugin, on a file of two
        # empty tests (no rollout, no env module)
        "pytest alone: 1 process, 2 empty tests": lambda: bare_pytest(work, 1, False),
        XDIST_ALONE.format(2): lambda: bare_pytest(work, 2, False),
        "pytest + pytest-hud: 1 process, 2 empty tests": lambda: bare_pytest(work, 1, True),
        "pytest + pytest-hud: -n 2, 2 empty tests": lambda: bare_pytest(work, 2, True),
        # what each episode costs beyond its steps: a test item, against a shard's episode
        f"vla-eval: 1 shard, {ITEMS} episodes x 1 step": lambda: (
            run_vla_eval(url, 1, work, items).wall
        ),
        f"pytest-hud: 1 process, {ITEMS} episodes x 1 step": lambda: (
            run_hud(work, "cartpole_env", agent, 1, 1, items).wall
        ),
    }
    best: dict[str, float] = {}
    for rep in range(reps + 1):
        for name, go in pieces.items():
            wall = go()
            if rep:
                best[name] = min(best.get(name, float("inf")), wall)
    for who, unit in (("vla-eval", "1 shard"), ("pytest-hud", "1 process")):
        many = best[f"{who}: {unit}, {ITEMS} episodes x 1 step"]
        few = best[f"{who}: {unit}, 2 episodes x 1 step"]
        best[f"{who}: ms per one-step episode beyond 2 (not s)"] = 1e3 * (many - few) / (ITEMS - 2)
    return list(best.items())


#: one-step episodes in the start-up table's per-episode rows (two tasks)
ITEMS = 200
PYTHON_ALONE = "Python alone: python -c pass"
PYTEST_IMPORT = "Python and pytest's imports: python -c 'import pytest'"
XDIST_ALONE = "pytest alone: -n {}, 2 empty tests"


def bare_name(inflight: int, procs: int) -> str:
    if inflight == 1:
        return "bare 1 process"
    return f"bare {procs} processes" if procs > 1 else f"bare c{inflight}"


def floors(best: dict[str, Run], starts: list[tuple[str, float]], parallel: list[int]) -> list[str]:
    """What the bare clients in the same run say about the targets. At N in flight the
    default in one process is no faster than the bare client with N loops in one process
    (``bare cN``), nor ``-n N`` than N bare processes; ``-n N`` also pays xdist's own start
    (pytest and xdist with no plugin, two empty tests) before that work. What the two could
    share is counted once: each process's interpreter and, at most, every module pytest
    imports (so the floor is low, never high). If it is above ``hud cN``'s wall, no plugin
    change makes ``-n N`` as fast as one process at this concurrency here."""
    start = dict(starts)
    out = []
    for n in parallel:
        ref = best[f"vla-eval {n}"]
        for name in dict.fromkeys((bare_name(n, 1), bare_name(n, n))):
            if name in best:
                wall = best[name].wall
                out.append(
                    f"{name}: {wall:.2f} s against vla-eval {n}'s {ref.wall:.2f} "
                    f"({wall / ref.wall:.2f}x)"
                )
        procs, one = best.get(bare_name(n, n)), best.get(f"hud c{n}")
        xdist, shared = start.get(XDIST_ALONE.format(n)), start.get(PYTEST_IMPORT)
        if n > 1 and procs is not None and one is not None and xdist is not None and shared:
            floor = xdist + procs.wall - n * shared
            verdict = "above" if floor > one.wall else "not above"
            out.append(
                f"  -n {n} floor: xdist alone {xdist:.2f} + {bare_name(n, n)} {procs.wall:.2f} "
                f"- {n} x (Python and pytest's imports) {shared:.2f} = {floor:.2f} s, "
                f"{verdict} hud c{n}'s {one.wall:.2f} s"
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=10, help="episodes per task (2 tasks)")
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--parallel", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4]
    )
    parser.add_argument("--batch", default="4", help="server max_batch_size: N or inflight")
    parser.add_argument("--wait", type=float, default=0.002, help="server max_wait_time (s)")
    parser.add_argument(
        "--camera", type=int, default=0, help="an N x N camera frame in every observation"
    )
    parser.add_argument("--only", help="run only the hud variants matching this regex")
    parser.add_argument("--no-startup", action="store_true")
    parser.add_argument(
        "--pin", action="store_true", help="the server on CPU 0, every harness on the others"
    )
    parser.add_argument("--report", action="store_true", help="write docs/performance.md")
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--shard", help=argparse.SUPPRESS)
    parser.add_argument("--raw-images", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bare", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.shard:
        shard, shards = (int(x) for x in args.shard.split("/"))
        work = Work(args.episodes, args.max_steps, args.camera, args.raw_images)
        if args.bare:
            return bare_main(args.url, shard, shards, work, args.bare)
        return shard_main(args.url, shard, shards, work)

    from peer_vla_eval_steps import cpu_seconds
    from server_proc import controller_server, pin_apart

    work = Path(tempfile.mkdtemp(prefix="peer-vla-eval-"))
    (work / "native_env.py").write_text(NATIVE_ENV)
    for module in ("cartpole_env", "native_env"):
        (work / f"test_{module}.py").write_text(TESTS.format(module=module, goals=GOALS))
    (work / "conftest.py").write_text("")
    stats = work / "widths.json"
    fixed = None if args.batch == "inflight" else int(args.batch)
    n = 2 * args.episodes
    serve = ("--batch", str(fixed or 1), "--wait", str(args.wait), "--stats", str(stats))
    if args.camera:  # a policy that reads the camera (its spec names it), not the state
        serve += ("--camera", "top")
    with controller_server(*serve) as (port, proc):
        if args.pin:
            print(pin_apart(proc), file=sys.stderr, flush=True)
        url = f"ws://127.0.0.1:{port}"
        starts = [] if args.no_startup or args.camera else startup(url, work, args.reps)
        runs = variants(url, work, args)
        best: dict[str, Run] = {}
        batch: dict[str, float] = {}
        outcome: dict[str, dict[str, tuple[Any, ...]]] = {}
        for rep in range(args.reps):
            k = rep % len(runs)
            for v in runs[k:] + runs[:k]:
                set_batch(port, fixed or v.inflight)
                cpu0 = cpu_seconds(proc.pid)
                run = v.go()
                steps = sum(int(o[2]) for o in run.outcomes.values())
                run.server_ms = 1e3 * (cpu_seconds(proc.pid) - cpu0) / max(steps, 1)
                width = widths(stats, proc) if v.server else 0.0
                if v.name not in best or run.wall < best[v.name].wall:
                    best[v.name], batch[v.name] = run, width
                outcome[v.name] = run.outcomes
                print(
                    f"  rep {rep + 1} {v.name:<16} {run.wall:6.2f} s", file=sys.stderr, flush=True
                )
    ref = outcome[runs[0].name]
    for name, got in outcome.items():
        if got != ref:
            diff = {k: (ref.get(k), got.get(k)) for k in ref.keys() | got.keys()}
            diff = {k: v for k, v in diff.items() if v[0] != v[1]}
            raise SystemExit(f"outcomes differ: {name} vs {runs[0].name}: {diff}")
    show(runs, best, batch, starts, n, args)


def fastest_hud(
    runs: list[Variant], best: dict[str, Run], keep: Callable[[Variant], bool]
) -> Variant | None:
    """The pytest-hud variant with the best wall among those that drive the server and
    ``keep`` accepts (None if there is none)."""
    hud = [v for v in runs if v.name.startswith("hud") and v.server and keep(v)]
    return min(hud, key=lambda v: best[v.name].wall, default=None)


PROCS_HEADER = ["processes", "vla-eval", "wall s", "best pytest-hud", "wall s", "vs vla-eval"]


def equal_processes(runs: list[Variant], best: dict[str, Run]) -> list[list[str]]:
    """For each shard count P: vla-eval's P shards against the fastest pytest-hud variant
    that runs in at most P processes. vla-eval runs a shard's episodes one after another, so
    its episodes in flight are its shards; a pytest process keeps several in flight."""
    out = []
    for ref in (v for v in runs if re.fullmatch(r"vla-eval \d+", v.name)):
        top = fastest_hud(runs, best, lambda v, p=ref.procs: v.procs <= p)
        if top is None:
            continue
        a, b = best[ref.name].wall, best[top.name].wall
        out.append([str(ref.procs), ref.name, f"{a:.2f}", top.name, f"{b:.2f}", f"{b / a:.2f}x"])
    return out


def show(
    runs: list[Variant],
    best: dict[str, Run],
    batch: dict[str, float],
    starts: list[tuple[str, float]],
    n: int,
    args: argparse.Namespace,
) -> None:
    window = f"{args.wait * 1e3:g} ms window"
    server = (
        f"max_batch_size = episodes in flight, {window}"
        if args.batch == "inflight"
        else f"max_batch_size {args.batch}, {window}"
    )
    if args.camera:
        server += f"; a {args.camera}x{args.camera} camera, read by the server's policy"
    print(f"{n} episodes x {args.max_steps} steps, outcomes equal across all variants")
    print(f"server: PredictModelServer, {server}; best of {args.reps}, order rotated")
    header = ["in flight", "variant", "wall s", "eps/s", "ms/step", "server CPU ms/step"]
    header += ["batch", "wall vs vla-eval"]
    rows: list[list[str]] = []
    for v in runs:
        run, ref = best[v.name], best[f"vla-eval {v.inflight}"]
        step = sum(run.step_ms) / len(run.step_ms)
        rows.append(
            [
                str(v.inflight),
                v.name,
                f"{run.wall:.2f}",
                f"{n / run.wall:.2f}",
                f"{step:.2f}",
                f"{run.server_ms:.2f}" if v.server else "-",
                f"{batch[v.name]:.2f}" if v.server else "-",
                "1" if v.name == f"vla-eval {v.inflight}" else f"{run.wall / ref.wall:.2f}x",
            ]
        )
    summary = ["in flight", "vla-eval wall s", "default, 1 process", "vs vla-eval"]
    summary += ["default, -n N", "vs vla-eval", "best pytest-hud", "wall s", "vs vla-eval"]
    summary += ["vs vla-eval raw"] if args.camera else []
    sums: list[list[str]] = []
    for k in args.parallel:
        ref = best[f"vla-eval {k}"]
        top = fastest_hud(runs, best, lambda v, k=k: v.inflight == k)
        if top is None:
            continue
        row = [str(k), f"{ref.wall:.2f}"]
        # the default placement in one process (cN, or 1 process) and in N xdist workers
        for name in (f"hud c{k}" if k > 1 else "hud 1 process", f"hud -n {k}"):
            got = best.get(name)
            row += [f"{got.wall:.2f}", f"{got.wall / ref.wall:.2f}x"] if got else ["-", "-"]
        wall = best[top.name].wall
        sums.append([*row, top.name, f"{wall:.2f}", f"{wall / ref.wall:.2f}x"])
        if args.camera:
            sums[-1].append(f"{wall / best[f'vla-eval {k} raw'].wall:.2f}x")
    procs = equal_processes(runs, best)
    for head, body in ((header, rows), (summary, sums), (PROCS_HEADER, procs)):
        widths_ = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
        print()
        print("  ".join(h.ljust(w) for h, w in zip(head, widths_, strict=True)))
        for r in body:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths_, strict=True)))
    if starts:
        print("\nstart-up (best wall, s)")
        for name, wall in starts:
            print(f"  {wall:6.2f}  {name}")
    bounds = floors(best, starts, args.parallel)
    if bounds:
        print("\nthe floor (a bare client: VlaEvalSession and the benchmark, nothing else)")
        for line in bounds:
            print(f"  {line}")
    if args.report:
        from _report import write_table

        note = (
            f"{n} episodes x {args.max_steps} steps (CartPole StepBenchmark, scripted "
            f"controller); server: vla-eval's PredictModelServer, {server}. wall: the whole "
            "process (start-up included); ms/step: inside an episode; server CPU ms/step: the "
            "model server process's CPU time over the run per episode step, which both "
            "harnesses wait for. Best-of-N pytest-hud "
            "per in-flight count: "
            + "; ".join(f"{r[0]} in flight: {r[6]} {r[8]}" for r in sums)
            + ". The default placement in one process: "
            + "; ".join(f"{r[0]} in flight: {r[3]}" for r in sums)
            + ". At equal processes (vla-eval's P shards against pytest-hud in at most P "
            "processes, each harness keeping as many episodes in flight as it can): "
            + "; ".join(f"{r[0]}: {r[3]} {r[4]} s vs {r[1]} {r[2]} s, {r[5]}" for r in procs)
            + "."
        )
        if starts:
            note += " Start-up (best wall): " + "; ".join(
                f"{name} {wall:.2f}" + ("" if "(not s)" in name else " s") for name, wall in starts
            )
            note += "."
        if bounds:
            note += " The floor: " + "; ".join(line.strip() for line in bounds) + "."
        name = "peer-vla-eval" + ("-inflight" if args.batch == "inflight" else "")
        name += "-nowindow" if args.wait == 0 else ""
        name += f"-camera{args.camera}" if args.camera else ""
        if args.pin:
            name += "-pinned"
            note += (
                " Pinned (--pin): the server's threads on CPU 0, every harness process "
                "(vla-eval's shards, pytest and its workers) on the other."
            )
        write_table(
            name,
            f"pytest-hud vs vla-eval at equal parallelism (bench/peer_vla_eval.py, {server})",
            header,
            rows,
            note=note,
        )


if __name__ == "__main__":
    main()
