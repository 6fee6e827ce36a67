"""Benchmark a whole evaluation: lerobot-eval against this plugin, side by side in one run.

Part 1, PushT: N episodes (default 20, each up to 300 steps) of one small random-init
LeRobot policy, saved once into a temp folder and loaded by both sides, seeds 0..N-1:

* lerobot: ``lerobot-eval --policy.path=DIR --env.type=pusht --eval.n_episodes=N
  --eval.batch_size=W --policy.device=cpu --seed=0`` (a SyncVectorEnv of width W and the
  policy in one process; it renders 10 episodes to mp4 and has no flag to stop that);
* lerobot, no video: the same command with ``eval_policy_all`` patched to render nothing;
* plugin: a generated pytest suite (an env module declaring ``env.gym(PushT, num_envs=W)``,
  a conftest importing it, ``@pytest.mark.hud(tasks=[push_t.task(seed=s) ...])``) run as
  ``python -m pytest --hud-agent=lerobot:DIR --hud-concurrency=W --hud-shared=W``;
* plugin -n 2: two xdist workers, each with its own ``num_envs=W/2`` sim and
  ``--hud-concurrency=W/2 --hud-shared=W/2`` (W even only);
* plugin, K sims of W/K (``--sims K``, default 2): one process, the env declaring
  ``num_envs=W/K`` and ``--hud-shared=W`` booting K sims that step on separate cores while
  one forward serves all W rows;
* with ``--ways``, the plugin with each way pinned: lockstep (``step_slots_alone=False``,
  every slot waits for the others, the default before the split was measured),
  ``--hud-split=halves`` (one half steps while the other's forward runs) and
  ``--hud-split=whole`` (one forward for every row); the default ``auto`` runs the halves
  and keeps one batch where it measures that 5% faster. "policy busy" is the share of the
  wall the forward ran.

Wall time is the whole process (start-up, torch import, policy load included) for both.
Env steps counted are N x the episode length (random policy: every episode runs to the
limit; the plugin's per-episode steps are checked from its results JSON).

MetaWorld, state-only (next to PushT; bench/suite_metaworld.py): MT10 x V goals with
metaworld's scripted experts through the shipped suite, against a plain loop over the
same envs with the same policy (lerobot-eval's metaworld env renders pixels only).

Part 2, the plugin's own overhead: 1,000 task items of a template that yields at once
(no robot capability) and an agent that returns at once, ``--hud-shared`` so there is one
substrate: ``--collect-only`` time, full run time, per-item overhead (wall, and CPU
seconds of the process tree, which a loaded machine disturbs less), and with
``--hud-results`` and ``--html``; a plain parametrized test of 1,000 items is the
pytest baseline.

On a shared machine, other processes' load swings these figures a lot (each row shows
the cores others used during it): ``--pusht-reps R`` keeps the fastest of R interleaved
runs, ``--quiet-wait S`` waits for other load to settle before each run, and
``--threads 1`` (OMP_NUM_THREADS for both sides) makes torch far less sensitive to it.

    python bench/suite.py [--episodes N] [--max-steps M] [--widths 4 1 10]
        [--policy diffusion|tiny-diffusion|tiny-act] [--threads T] [--pusht-reps R]
        [--quiet-wait S] [--no-xdist] [--no-novideo] [--sims K] [--ways] [--baseline-tree DIR]
        [--only pusht|metaworld|overhead] [--mw-variations V] [--mw-no-fresh]
        [--items 1000] [--reps 3] [--keep DIR] [--json PATH] [--report]

``--report`` writes the PushT and overhead tables into docs/performance.md
(bench/_report.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PY = sys.executable
ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "PYTHONUNBUFFERED": "1",
}
ENV.pop("PYTEST_ADDOPTS", None)
PUSHT_LIMIT = 300


# -- the policy ------------------------------------------------------------------------------
def make_policy(kind: str, folder: Path) -> tuple[Path, str]:
    """Save a random-init policy with its processors; returns (folder, description)."""
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    import lerobot_fixtures as lf

    if kind == "tiny-act":
        lf.make_tiny_act(folder)
    elif kind == "tiny-diffusion":
        lf.make_tiny_diffusion(folder)
    else:  # the notes' model: 28.5M params, 10 denoising steps, 96x96 images
        import torch
        from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
        from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy

        keys = ["observation.image"]
        inputs, outputs = lf._features(keys, (3, 96, 96), 2, 2)
        config = DiffusionConfig(
            input_features=inputs,
            output_features=outputs,
            device="cpu",
            down_dims=(128, 256, 512),
            num_inference_steps=10,
            crop_shape=(84, 84),
            pretrained_backbone_weights=None,
            use_group_norm=True,
        )
        torch.manual_seed(0)
        lf._save(folder, DiffusionPolicy(config), lf._stats(keys, 2, 2))
    cfg = json.loads((folder / "config.json").read_text())
    import math

    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        params = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())  # noqa: SIM118
    steps = cfg.get("num_inference_steps")
    desc = (
        f"{cfg['type']} {params / 1e6:.1f}M params, n_action_steps={cfg.get('n_action_steps')}"
        + (f", {steps} denoising steps" if steps else "")
    )
    return folder, desc


# -- running things ------------------------------------------------------------------------
def timed(
    cmd: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None
) -> tuple[float, int]:
    start = time.perf_counter()
    cpu0, own0 = _cpu_busy(), _children_cpu()
    with log.open("w") as out:
        out.write(" ".join(cmd) + "\n")
        out.flush()
        rc = subprocess.run(
            cmd, cwd=cwd, env=env or ENV, stdout=out, stderr=subprocess.STDOUT
        ).returncode
    wall = time.perf_counter() - start
    busy, own = _cpu_busy() - cpu0, _children_cpu() - own0
    with log.open("a") as out:
        out.write(f"\nbench: wall {wall:.1f}s, cpu {own:.1f}s, machine busy {busy:.1f}s, rc {rc}\n")
    LOAD[str(log)] = (own / wall, max(busy - own, 0.0) / wall)
    return wall, rc


#: (cores this run used, cores others used) on average over each run, by log path.
LOAD: dict[str, tuple[float, float]] = {}


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_busy() -> float:
    """Busy CPU seconds of the whole machine so far (other users' load shows here)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(x) for x in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


NOVIDEO = (
    "import sys\n"
    "import lerobot.scripts.lerobot_eval as m\n"
    "orig = m.eval_policy_all\n"
    "def patched(*a, **k):\n"
    "    k['max_episodes_rendered'] = 0\n"
    "    k['videos_dir'] = None\n"
    "    return orig(*a, **k)\n"
    "m.eval_policy_all = patched\n"
    "sys.argv = ['lerobot-eval', *sys.argv[1:]]\n"
    "m.main()\n"
)


def run_lerobot(
    work: Path,
    policy: Path,
    n: int,
    width: int,
    max_steps: int | None,
    video: bool,
    use_async: bool = False,
) -> dict[str, Any]:
    out = (
        work / f"lerobot-w{width}-{'video' if video else 'novideo'}{'-async' if use_async else ''}"
    )
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)  # eval_main writes eval_info.json there; only videos create it
    args = [
        f"--policy.path={policy}",
        "--env.type=pusht",
        f"--eval.n_episodes={n}",
        f"--eval.batch_size={width}",
        "--policy.device=cpu",
        "--seed=0",
        f"--output_dir={out}",
        # explicit: 0.4's default is a SyncVectorEnv, 0.5+'s an AsyncVectorEnv
        f"--eval.use_async_envs={'true' if use_async else 'false'}",
    ]
    if max_steps is not None:
        args.append(f"--env.episode_length={max_steps}")
    cmd = [str(BIN / "lerobot-eval"), *args] if video else [PY, "-c", NOVIDEO, *args]
    wall, rc = timed(cmd, work, work / f"{out.name}.log")
    row: dict[str, Any] = {"wall": wall, "rc": rc, "log": str(work / f"{out.name}.log")}
    info_path = out / "eval_info.json"
    row["failed"] = rc != 0 or not info_path.exists()  # lerobot-eval exits 0 on any outcome
    if rc == 0 and info_path.exists():
        overall = json.loads(info_path.read_text())["overall"]
        row.update(
            eval_s=overall["eval_s"],
            episodes=overall["n_episodes"],
            success=round(overall["pc_success"] * overall["n_episodes"] / 100),
            steps=n * (max_steps or PUSHT_LIMIT),
            videos=len(overall.get("video_paths") or []),
        )
    return row


ENV_MODULE = '''"""PushT as one vectorized sim of {num_envs} copies (made by bench/suite.py)."""

from pytest_hud import Environment

env = Environment("pusht")
sim = env.gym(
    "gym_pusht:gym_pusht/PushT-v0",
    num_envs={num_envs},{alone}{vector}
    prompt="Push the T-shaped block onto the T-shaped target.",
    make_kwargs={{"obs_type": "pixels_agent_pos", "render_mode": "rgb_array"}},
)


@env.template()
async def push_t(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {{"prompt": ep["prompt"], "robot": {{"token": ep["token"]}}}}
    yield await sim.result(token=ep["token"])
'''


def write_pusht_suite(
    folder: Path, n: int, num_envs: int, lockstep: bool = False, vector: str = "sync"
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    flag = "\n    step_slots_alone=False," if lockstep else ""
    mode = f'\n    vectorization_mode="{vector}",' if vector != "sync" else ""
    (folder / "pusht_bench_env.py").write_text(
        ENV_MODULE.format(num_envs=num_envs, alone=flag, vector=mode)
    )
    (folder / "conftest.py").write_text(
        "import sys\nfrom pathlib import Path\n\n"
        "sys.path.insert(0, str(Path(__file__).parent))\n\n"
        "import pusht_bench_env  # noqa: E402,F401  (declares the pusht env)\n"
    )
    (folder / "test_pusht.py").write_text(
        "import pytest\nfrom pusht_bench_env import push_t\n\n\n"
        f"@pytest.mark.hud(tasks=[push_t.task(seed=s) for s in range({n})])\n"
        "def test_push_t(hud_result):\n"
        "    assert hud_result.steps > 0, hud_result.summary()\n"
    )
    return folder


def run_plugin(
    work: Path,
    policy: Path,
    n: int,
    width: int,
    max_steps: int | None,
    workers: int,
    tree: Path | None = None,
    lockstep: bool = False,
    vector: str = "sync",
    sims: int = 1,
    split: str | None = None,
) -> dict[str, Any]:
    """The plugin's run; ``tree``: another checkout of pytest_hud (a baseline) to run;
    ``lockstep``: the sim's slots step together (``step_slots_alone=False``, the barrier);
    ``split``: ``--hud-split`` (halves or whole; default auto);
    ``vector="async"``: each sim copy steps in its own process (AsyncVectorEnv);
    ``sims``: a worker's copies split over that many sims (``--hud-shared`` boots them)."""
    per = width // workers
    name = f"plugin-w{width}" + (f"-n{workers}" if workers > 1 else "") + ("-base" if tree else "")
    name += ("-lockstep" if lockstep else "") + ("-async" if vector == "async" else "")
    name += f"-{split}" if split else ""
    name += f"-sims{sims}" if sims > 1 else ""
    folder = work / name
    shutil.rmtree(folder, ignore_errors=True)
    write_pusht_suite(folder, n, per // sims, lockstep, vector)
    results = folder / "results.json"
    cmd = [
        PY,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--hud-agent=lerobot:{policy}",
        f"--hud-concurrency={per}",
        f"--hud-shared={per}",
        f"--hud-results={results}",
    ]
    if workers > 1:
        cmd += ["-n", str(workers)]
    if split:
        cmd.append(f"--hud-split={split}")
    if max_steps is not None:
        cmd.append(f"--hud-max-steps={max_steps}")
    env = {**ENV, "PYTHONPATH": str(tree)} if tree else None
    wall, rc = timed(cmd, folder, work / f"{name}.log", env)
    row: dict[str, Any] = {"wall": wall, "rc": rc, "log": str(work / f"{name}.log")}
    if results.exists():
        doc = json.loads(results.read_text())
        rows = doc.get("rollouts") or doc.get("rows") or []
        steps = [r.get("steps") or 0 for r in rows]
        row.update(
            episodes=len(rows),
            success=sum(bool(r.get("success")) for r in rows),
            steps=sum(steps),
            lengths=sorted(set(steps)),
            errors=sum(r.get("error") is not None for r in rows),
            infer_s=sum(r.get("infer_s") or 0.0 for r in rows),
            env_s=sum(r.get("env_s") or 0.0 for r in rows),
            busy=policy_busy(rows),
        )
    return row


def policy_busy(rows: list[dict[str, Any]]) -> float | None:
    """The fraction of the rollouts' wall time the policy's forward ran, per process.

    Each row carries its process's running totals at the episode's end (BatchedAgent's
    ``policy_busy``); a process's last row holds its totals. With several workers the
    fraction is their busy seconds over their spans, summed.
    """
    last: dict[int, dict[str, float]] = {}
    for r in rows:
        b = r.get("policy_busy")
        if b and (b["pid"] not in last or b["span_s"] > last[b["pid"]]["span_s"]):
            last[b["pid"]] = b
    span = sum(b["span_s"] for b in last.values())
    return sum(b["busy_s"] for b in last.values()) / span if span > 0 else None


def wait_quiet(max_wait: float, threshold: float = 0.3) -> None:
    """Wait (up to ``max_wait`` s) until other processes use under ``threshold`` cores."""
    deadline = time.monotonic() + max_wait
    while True:
        before = _cpu_busy()
        time.sleep(3.0)
        busy = (_cpu_busy() - before) / 3.0
        if busy < threshold or time.monotonic() >= deadline:
            return
        time.sleep(7.0)


def pusht(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    policy, desc = make_policy(args.policy, work / "policy")
    limit = args.max_steps or PUSHT_LIMIT
    n = args.episodes
    print(f"policy: {desc}; {n} episodes x {limit} steps, seeds 0..{n - 1}")
    print(f"policy folder: {policy}", flush=True)
    table: dict[str, Any] = {"policy": desc, "widths": {}}
    for width in args.widths:
        if n % width:
            print(f"W={width}: skipped, {n} episodes is not a multiple of W")
            continue
        variants: dict[str, Any] = {
            "lerobot-eval": lambda w: run_lerobot(work, policy, n, w, args.max_steps, True),
        }
        if tuple(int(x) for x in lerobot_stack().split(".")[:2]) >= (0, 5):  # its default
            variants["lerobot-eval, async envs"] = lambda w: run_lerobot(
                work, policy, n, w, args.max_steps, True, use_async=True
            )
        if not args.no_novideo:
            variants["lerobot-eval, no video"] = lambda w: run_lerobot(
                work, policy, n, w, args.max_steps, False
            )
        variants["plugin"] = lambda w: run_plugin(work, policy, n, w, args.max_steps, 1)
        if not args.no_xdist and width % 2 == 0:
            variants["plugin -n 2"] = lambda w: run_plugin(work, policy, n, w, args.max_steps, 2)
        if args.ways:  # each way pinned: the barrier, halves only, one batch only
            variants["plugin, lockstep"] = lambda w: run_plugin(
                work, policy, n, w, args.max_steps, 1, lockstep=True
            )
            for way in ("halves", "whole"):
                variants[f"plugin, {way}"] = lambda w, way=way: run_plugin(
                    work, policy, n, w, args.max_steps, 1, split=way
                )
        if args.async_sims:  # each sim copy in its own process (lerobot-eval's
            # --eval.use_async_envs=true fails on PushT in lerobot 0.4: its env check reads
            # env.envs[0], which an AsyncVectorEnv does not have)
            variants["plugin, async sims"] = lambda w: run_plugin(
                work, policy, n, w, args.max_steps, 1, vector="async"
            )
            if not args.no_xdist and width % 2 == 0:
                variants["plugin -n 2, async sims"] = lambda w: run_plugin(
                    work, policy, n, w, args.max_steps, 2, vector="async"
                )
        if args.sims > 1 and width % args.sims == 0:  # copies in K sims, on K cores
            k = args.sims
            variants[f"plugin, {k} sims of {width // k}"] = lambda w, k=k: run_plugin(
                work, policy, n, w, args.max_steps, 1, sims=k
            )
        if args.baseline_tree:  # the same runs on another checkout, interleaved
            base = Path(args.baseline_tree).resolve()
            variants["plugin, baseline"] = lambda w, base=base: run_plugin(
                work, policy, n, w, args.max_steps, 1, base
            )
            if not args.no_xdist and width % 2 == 0:
                variants["plugin -n 2, baseline"] = lambda w, base=base: run_plugin(
                    work, policy, n, w, args.max_steps, 2, base
                )
        reps: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
        order = list(variants)
        for rep in range(args.pusht_reps):  # interleaved: each rep runs every variant once
            # rotated each rep, and dirty pages flushed before each run: the run right
            # after lerobot-eval (which writes 10 mp4s) was 4-8 s slower whatever it was
            for name in order[rep % len(order) :] + order[: rep % len(order)]:
                os.sync()
                wait_quiet(args.quiet_wait)
                row = variants[name](width)
                row["load"] = LOAD.get(row["log"], (0.0, 0.0))
                reps[name].append(row)
        runs = {}
        for name, rows in reps.items():
            best = dict(min(rows, key=lambda r: r["wall"]))
            best["walls"] = [round(r["wall"], 1) for r in rows]
            runs[name] = best
        table["widths"][width] = runs
        print_width(width, runs, n, limit)
    return table


def print_width(width: int, runs: dict[str, dict[str, Any]], n: int, limit: int) -> None:
    base = runs["lerobot-eval"]["wall"]
    print(f"\nW={width}")
    print(
        f"  {'run':<24} {'wall s':>7} {'eval s':>7} {'ep/s':>6} {'steps/s':>8} "
        f"{'time/lerobot':>12} {'policy busy':>11}  notes"
    )
    for name, r in runs.items():
        steps = r.get("steps") or n * limit
        notes = [f"rc={r['rc']}"] if r["rc"] not in (0, 1) else []
        if r.get("failed"):
            notes.insert(0, f"FAILED (exit {r['rc']}), see {r['log']}")
        own, other = r["load"]
        notes.append(f"cores used {own:.1f}, others {other:.1f}")
        if len(r["walls"]) > 1:
            notes.append(f"walls {r['walls']}")
        if "videos" in r:
            notes.append(f"{r['videos']} videos")
        if "lengths" in r:
            notes.append(f"{r['episodes']} eps, lengths {r['lengths']}")
            notes.append(f"infer {r['infer_s']:.0f}s/env {r['env_s']:.0f}s summed over eps")
            if r.get("errors"):
                notes.append(f"{r['errors']} errors")
        if "success" in r:
            notes.append(f"{r['success']} successes")
        eval_s = f"{r['eval_s']:7.1f}" if "eval_s" in r else f"{'':>7}"
        busy = f"{r['busy']:11.0%}" if r.get("busy") is not None else f"{'':>11}"
        print(
            f"  {name:<24} {r['wall']:7.1f} {eval_s} {n / r['wall']:6.2f} "
            f"{steps / r['wall']:8.0f} {r['wall'] / base:12.2f} {busy}  {'; '.join(notes)}"
        )
    sys.stdout.flush()


# -- the plugin's own overhead ------------------------------------------------------------
NOOP_ENV = """from pytest_hud import Environment

env = Environment("noop")


@env.template()
async def noop(i: int = 0):
    yield {"prompt": f"noop {i}"}
    yield {"score": 1, "success": True}
"""

ZERO_AGENT = """def make():
    async def agent(run):
        return {}

    return agent
"""


def write_overhead_suite(folder: Path, items: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "noop_env.py").write_text(NOOP_ENV)
    (folder / "zero_agent.py").write_text(ZERO_AGENT)
    (folder / "conftest.py").write_text(
        "import sys\nfrom pathlib import Path\n\n"
        "sys.path.insert(0, str(Path(__file__).parent))\n\n"
        "import noop_env  # noqa: E402,F401\n"
    )
    (folder / "test_noop.py").write_text(
        "import pytest\nfrom noop_env import noop\n\n\n"
        f"@pytest.mark.hud(tasks=[noop.task(i=i) for i in range({items})])\n"
        "def test_noop(hud_result):\n"
        "    assert hud_result.success\n"
    )
    plain = folder.parent / f"{folder.name}-plain"
    plain.mkdir(exist_ok=True)
    (plain / "pytest.ini").write_text("[pytest]\n")
    (plain / "test_plain.py").write_text(
        f"import pytest\n\n\n@pytest.mark.parametrize('i', range({items}))\n"
        "def test_plain(i):\n    assert i >= 0\n"
    )


def overhead(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    folder = work / "overhead"
    shutil.rmtree(folder, ignore_errors=True)
    write_overhead_suite(folder, args.items)
    agent = f"--hud-agent={folder / 'zero_agent.py'}:make"
    base = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    report = ["--hud-results=results.json", "--html=report.html", "--self-contained-html"]
    cases: list[tuple[str, Path, list[str]]] = [
        ("plain pytest, collect", folder.parent / "overhead-plain", ["--collect-only"]),
        ("plain pytest, run", folder.parent / "overhead-plain", []),
        ("hud, collect", folder, ["--collect-only", agent]),
        ("hud, run (shared 1)", folder, [agent, "--hud-shared=1"]),
        ("hud, run + results + html", folder, [agent, "--hud-shared=1", *report]),
        ("hud, run, concurrency 8", folder, [agent, "--hud-shared=8", "--hud-concurrency=8"]),
    ]
    envs: dict[str, dict[str, str] | None] = {}
    if args.baseline_tree:  # the same run on another checkout
        cases.append(("hud, run (shared 1), baseline", folder, [agent, "--hud-shared=1"]))
        envs[cases[-1][0]] = {**ENV, "PYTHONPATH": str(Path(args.baseline_tree).resolve())}
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for rep in range(args.reps):  # interleaved, so load swings hit every case alike
        for name, cwd, flags in cases:
            log = work / f"overhead-{name.replace(' ', '_')}-{rep}.log"
            wall, rc = timed([*base, *flags], cwd, log, envs.get(name))
            if rc != 0:
                print(f"  {name}: exit {rc}, see {log}")
            walls.setdefault(name, []).append(wall)
            cpus.setdefault(name, []).append(LOAD[str(log)][0] * wall)  # its own CPU s
    out: dict[str, Any] = {name: statistics.median(w) for name, w in walls.items()}
    cpu = {name: statistics.median(c) for name, c in cpus.items()}
    n = args.items
    collect, plain_run = out["hud, collect"], out["plain pytest, run"]
    plain_cpu = cpu["plain pytest, run"]
    print(f"\nplugin overhead: {n} items, zero-cost template and agent, median of {args.reps}")
    print(
        f"  {'run':<32} {'wall s':>7} {'ms/item':>8} {'ms/item over plain run':>23} "
        f"{'CPU ms/item over plain':>22}"
    )
    for name, wall in out.items():
        over = "hud, run" in name
        extra = f"{(wall - plain_run) * 1000 / n:23.2f}" if over else f"{'':>23}"
        more = f"{(cpu[name] - plain_cpu) * 1000 / n:22.2f}" if over else f"{'':>22}"
        print(f"  {name:<32} {wall:7.2f} {wall * 1000 / n:8.2f} {extra} {more}")
    run = out["hud, run (shared 1)"]
    print(
        f"  collection {collect:.2f}s; run minus collect-only: "
        f"{(run - collect) * 1000 / n:.2f} ms/item (plain pytest: "
        f"{(plain_run - out['plain pytest, collect']) * 1000 / n:.2f} ms/item)"
    )
    return out


def lerobot_stack() -> str:
    """The installed LeRobot's version: each stack's PushT table is a block of its own."""
    from importlib.metadata import version

    return version("lerobot")


def report_tables(figures: dict[str, Any], args: argparse.Namespace) -> None:
    """The PushT widths and the overhead run as tables in docs/performance.md."""
    from _report import write_table

    pusht_ = figures.get("pusht") or {}
    stack = lerobot_stack()
    for width, runs in pusht_.get("widths", {}).items():
        base = runs["lerobot-eval"]["wall"]
        rows = [
            [
                name,
                f"failed (exit {r['rc']})" if r.get("failed") else f"{r['wall']:.1f} s",
                "-" if r.get("failed") else f"{r['wall'] / base:.2f}",
                "-" if r.get("busy") is None else f"{r['busy']:.0%}",
                f"{r['load'][1]:.1f}",
            ]
            for name, r in runs.items()
        ]
        write_table(
            f"suite-pusht-w{width}-lerobot{stack.replace('.', '-')}",
            f"PushT at W={width}, LeRobot {stack}: its lerobot-eval against "
            "the plugin (bench/suite.py)",
            ["run", "wall", "x lerobot-eval", "policy busy", "others' load (cores)"],
            rows,
            note=f"{pusht_.get('policy')}; {args.episodes} episodes, fastest of "
            f"{args.pusht_reps} interleaved reps.",
        )
    over = figures.get("overhead")
    if over:
        plain = over["plain pytest, run"]
        rows = [
            [name, f"{wall:.2f} s", f"{(wall - plain) * 1000 / args.items:.2f}"]
            for name, wall in over.items()
        ]
        write_table(
            "suite-overhead",
            "The plugin's own cost per item (bench/suite.py --only overhead)",
            ["run", "wall", "ms/item over a plain pytest run"],
            rows,
            note=f"{args.items} items, median of {args.reps}.",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--max-steps", type=int, help="shorten episodes (default: PushT's 300)")
    parser.add_argument("--widths", type=int, nargs="+", default=[4, 1, 10])
    parser.add_argument(
        "--policy", choices=["diffusion", "tiny-diffusion", "tiny-act"], default="diffusion"
    )
    parser.add_argument("--pusht-reps", type=int, default=1, help="PushT: reps (min wall)")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=0.0,
        help="before each PushT run, wait up to S s for other processes to go idle",
    )
    parser.add_argument(
        "--threads", type=int, help="OMP_NUM_THREADS for every run (default: torch's, 1 a core)"
    )
    parser.add_argument("--no-xdist", action="store_true", help="skip the -n 2 plugin runs")
    parser.add_argument(
        "--ways",
        action="store_true",
        help="also run the plugin with each way pinned: lockstep (step_slots_alone=False), "
        "--hud-split=halves and --hud-split=whole (the default, auto, checks by measuring)",
    )
    parser.add_argument(
        "--async-sims",
        action="store_true",
        help='also run the plugin with env.gym(..., vectorization_mode="async") (a sim '
        "process per copy)",
    )
    parser.add_argument(
        "--sims",
        type=int,
        default=2,
        help="also run the plugin with the W copies in this many sims (1: no such row)",
    )
    parser.add_argument(
        "--baseline-tree",
        metavar="DIR",
        help="also run the plugin rows from another checkout (e.g. `git archive` of main)",
    )
    parser.add_argument("--no-novideo", action="store_true", help="skip lerobot without video")
    parser.add_argument("--only", choices=["pusht", "metaworld", "overhead"])
    parser.add_argument("--mw-variations", type=int, default=5, help="MetaWorld: goals per task")
    parser.add_argument(
        "--mw-no-fresh", action="store_true", help="MetaWorld: skip the fresh-per-item row"
    )
    parser.add_argument("--items", type=int, default=1000, help="overhead: task items")
    parser.add_argument("--reps", type=int, default=3, help="overhead: repetitions (median)")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (logs, results)")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--report", action="store_true", help="write docs/performance.md")
    args = parser.parse_args()

    if args.threads:
        ENV["OMP_NUM_THREADS"] = str(args.threads)
    work = Path(args.keep or tempfile.mkdtemp(prefix="hud-suite-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    threads = ENV.get("OMP_NUM_THREADS", "default")
    print(f"work dir: {work}; {os.cpu_count()} cores; torch threads {threads}", flush=True)
    figures: dict[str, Any] = {}
    try:
        if args.only in (None, "pusht"):
            figures["pusht"] = pusht(args, work)
        if args.only in (None, "metaworld"):
            from suite_metaworld import metaworld

            figures["metaworld"] = metaworld(
                args.mw_variations, work, timed, LOAD, fresh=not args.mw_no_fresh
            )
        if args.only in (None, "overhead"):
            figures["overhead"] = overhead(args, work)
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2, default=str))
        if args.report:
            report_tables(figures, args)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
