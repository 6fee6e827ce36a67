"""The headline command on a GPU machine, measured: LIBERO in its docker image, a random-init
LeRobot policy of realistic compute built here (no hub), ``pytest -n W`` with the model shared
by every worker (one model server per device, ``--hud-model-placement=shared``, the default)
against a copy per worker (``worker``), side by side in one run.

Printed per placement: the wall, episodes per minute, success, the mean batch width of the
model's forwards (shared: across every worker; per worker: at most ``--concurrency``), the
resident memory summed over the workers (and the model server), and, on a GPU, its peak
memory and mean utilisation (``nvidia-smi``, sampled every half second; torch's count when
nvidia-smi is absent). Without a GPU it says so and runs on the CPU: the figures are then
those of this machine, not a GPU's.

The policy (``--policy``): ``diffusion`` (LeRobot's Diffusion Policy at its default size,
~260M parameters, ``--denoise`` steps per inference: the compute of a real one), ``act``
(LeRobot's ACT at its default size, ~50M), or ``tiny`` (a small ACT: CI's size). Both take
LIBERO's two cameras, its 8-d state and 7-d action, under pi0.5-LIBERO's input names.

The env (``--env``): ``libero`` (the suite in its docker image, ``--hud-runtime=docker``)
or ``stand-in``: LIBERO's observation and action (two cameras of ``--size`` px, an 8-d
state, a 7-d action) drawn from a seeded generator in each worker, no scene and no
container, so the model's side (its placement, memory, batches) is measured alone; building
a LIBERO scene on this CPU takes 30-80 s a container, which a CI test cannot pay.

    full size, one GPU, under 8 minutes:
    PYTHONPATH=$PWD .venv/bin/python bench/gpu.py --workers 8 --concurrency 4 --episodes 64 \
        --max-steps 150 --size 224 --policy diffusion [--report]
    the smallest, LIBERO in docker on the CPU: ... bench/gpu.py --smallest
    the smallest without a scene (CI): ... bench/gpu.py --smallest --env stand-in
    the model's memory at -n 4, a copy per worker against one shared (CPU or GPU):
    ... bench/gpu.py --env stand-in --workers 4 --concurrency 2 --episodes 8 \
        --max-steps 20 --policy act
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KEYS = ["observation.images.image", "observation.images.image2"]  # pi0.5-LIBERO's names
STATE, ACTION = 8, 7

TESTS = """
import os
import pytest
from pytest_hud.suites.libero import rows

ROWS = rows(os.environ["GPU_BENCH_SUITE"], 5)[: int(os.environ["GPU_BENCH_EPISODES"])]


@pytest.mark.hud(tasks=ROWS)
def test_libero(hud_result):
    pass
"""


#: ``--env stand-in``: LIBERO's observation and action without its scene
STAND_IN = """
import os

import gymnasium as gym
import numpy as np

from pytest_hud import Environment

SIZE = int(os.environ["PYTEST_HUD_LIBERO_SIZE"])
CAMERAS = ("observation/images/image", "observation/images/image2")


class LiberoShaped(gym.Env):  # LIBERO's two cameras, state and action, from the seed

    def __init__(self):
        spaces = {k: gym.spaces.Box(0, 255, (SIZE, SIZE, 3), np.uint8) for k in CAMERAS}
        spaces["observation/state"] = gym.spaces.Box(-np.inf, np.inf, (8,), np.float32)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (7,), np.float32)
        self.rng = np.random.default_rng(0)

    def _obs(self):
        obs = {k: self.rng.integers(0, 256, (SIZE, SIZE, 3), np.uint8) for k in CAMERAS}
        obs["observation/state"] = self.rng.standard_normal(8).astype(np.float32)
        return obs

    def reset(self, *, seed=None, options=None):
        self.rng = np.random.default_rng(seed)
        return self._obs(), {"success": False}

    def step(self, action):
        return self._obs(), 0.0, False, False, {"success": False}


env = Environment("libero-shaped")
sim = env.gym(LiberoShaped, fps=20.0)


@env.template()
async def episode(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": "put the bowl on the plate", "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
"""

STAND_IN_TESTS = """
import os
import pytest
from libero_shaped import episode

ROWS = [episode.task(seed=s) for s in range(int(os.environ["GPU_BENCH_EPISODES"]))]


@pytest.mark.hud(tasks=ROWS)
def test_libero(hud_result):
    pass
"""


# -- the GPU, if there is one --------------------------------------------------------------
def gpus() -> list[str]:
    """The GPUs ``nvidia-smi -L`` lists (else torch's count; none: the CPU)."""
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return [line for line in done.stdout.splitlines() if line.startswith("GPU")]
    try:
        import torch

        return [f"GPU {i} (torch)" for i in range(torch.cuda.device_count())]
    except ImportError:
        return []


@dataclass
class Sampled:
    """What the sampler saw over a run: per process, its peak resident memory and role;
    the GPUs' memory and utilisation."""

    rss: dict[int, tuple[str, int]] = field(default_factory=dict)  # pid -> (role, peak kB)
    gpu_mem_mb: list[float] = field(default_factory=list)
    gpu_util: list[float] = field(default_factory=list)

    def role_total_mb(self, role: str) -> float:
        return sum(kb for r, kb in self.rss.values() if r == role) / 1024


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _role(pid: int) -> str | None:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    if "model_server" in cmd:
        return "server"
    if "exec(eval(sys.stdin.readline()))" in cmd:  # an xdist worker (execnet's popen)
        return "worker"
    return None


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def sample(root: int, into: Sampled, stop: threading.Event, gpu: bool) -> None:
    """Every half second until ``stop``: the workers' and servers' resident memory under
    ``root``, and the GPUs' memory and utilisation."""
    while not stop.wait(0.5):
        for pid in _descendants(root):
            role = _role(pid)
            if role is not None:
                peak = max(into.rss.get(pid, (role, 0))[1], _rss_kb(pid))
                into.rss[pid] = (role, peak)
        if gpu and shutil.which("nvidia-smi"):
            query = "--query-gpu=memory.used,utilization.gpu"
            done = subprocess.run(
                ["nvidia-smi", query, "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                check=False,
            )
            rows = [line.split(",") for line in done.stdout.splitlines() if "," in line]
            if rows:
                into.gpu_mem_mb.append(sum(float(r[0]) for r in rows))
                into.gpu_util.append(sum(float(r[1]) for r in rows) / len(rows))


# -- the policy, made here -----------------------------------------------------------------
def make_policy(kind: str, folder: Path, size: int, denoise: int) -> Path:
    """A random-init LeRobot policy for LIBERO saved with its processors (no hub)."""
    import numpy as np
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.factory import make_pre_post_processors

    inputs = {k: PolicyFeature(type=FeatureType.VISUAL, shape=(3, size, size)) for k in KEYS}
    inputs["observation.state"] = PolicyFeature(type=FeatureType.STATE, shape=(STATE,))
    outputs = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(ACTION,))}
    common: dict[str, Any] = {"input_features": inputs, "output_features": outputs}
    torch.manual_seed(0)
    if kind == "diffusion":
        from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
        from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy

        crop = (int(size * 0.9),) * 2
        config: Any = DiffusionConfig(
            **common, num_inference_steps=denoise, crop_shape=crop, pretrained_backbone_weights=None
        )
        policy: Any = DiffusionPolicy(config)
    else:
        from lerobot.policies.act.configuration_act import ACTConfig
        from lerobot.policies.act.modeling_act import ACTPolicy

        small = {"dim_model": 64, "n_heads": 2, "dim_feedforward": 128, "n_encoder_layers": 1}
        extra = small if kind == "tiny" else {}
        config = ACTConfig(**common, **extra, use_vae=False, pretrained_backbone_weights=None)
        policy = ACTPolicy(config)
    image = {
        "mean": np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1),
        "std": np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1),
        "min": np.zeros((3, 1, 1), np.float32),
        "max": np.ones((3, 1, 1), np.float32),
    }
    stats: dict[str, Any] = {k: dict(image) for k in KEYS}
    for key, dim in (("observation.state", STATE), ("action", ACTION)):
        stats[key] = {
            "mean": np.zeros(dim, np.float32),
            "std": np.ones(dim, np.float32),
            "min": -np.ones(dim, np.float32),
            "max": np.ones(dim, np.float32),
        }
    pre, post = make_pre_post_processors(policy.config, dataset_stats=stats)
    folder.mkdir(parents=True, exist_ok=True)
    for part in (policy, pre, post):
        part.save_pretrained(folder)
    params = sum(p.numel() for p in policy.parameters())
    print(f"policy: {kind}, {params / 1e6:.1f}M parameters, saved to {folder}", flush=True)
    return folder


# -- one run -------------------------------------------------------------------------------
@dataclass
class Run:
    placement: str
    wall: float
    episodes: int
    success: float
    errors: int
    width: float | None
    sampled: Sampled


def run(work: Path, ckpt: Path, placement: str, args: argparse.Namespace, gpu: bool) -> Run:
    results = work / f"results-{placement}.json"
    results.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(work)])}
    env.update(
        GPU_BENCH_SUITE=args.suite,
        GPU_BENCH_EPISODES=str(args.episodes),
        PYTEST_HUD_LIBERO_SIZE=str(args.size),
        MUJOCO_GL="egl" if gpu else "osmesa",
        PYOPENGL_PLATFORM="egl" if gpu else "osmesa",
    )
    cmd = [sys.executable, "-m", "pytest", "test_libero.py", "-q", "-p", "no:cacheprovider"]
    cmd += ["-n", str(args.workers), f"--hud-agent=lerobot:{ckpt}"]
    cmd += [f"--hud-model-placement={placement}", f"--hud-concurrency={args.concurrency}"]
    cmd += [f"--hud-max-steps={args.max_steps}", f"--hud-results={results}"]
    if args.env == "libero":
        cmd += ["--hud-runtime=docker"] + (["--hud-docker-gpus=all"] if gpu else [])
    else:  # one substrate per worker, as wide as its rollouts in flight
        cmd += [f"--hud-shared={args.concurrency}"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, text=True)
    sampled, stop = Sampled(), threading.Event()
    sampler = threading.Thread(target=sample, args=(proc.pid, sampled, stop, gpu), daemon=True)
    sampler.start()
    out, _ = proc.communicate(timeout=args.timeout)
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join(10)
    if not results.exists():
        raise SystemExit(f"placement {placement}: no results (exit {proc.returncode}):\n{out}")
    doc = json.loads(results.read_text())
    rows = doc["rollouts"]
    servers = doc.get("devices", {}).get("servers") or []
    forwards = sum(int(s.get("forwards") or 0) for s in servers)
    requests = sum(int(s.get("requests") or 0) for s in servers)
    return Run(
        placement,
        wall,
        len(rows),
        sum(1 for r in rows if r["success"]) / max(len(rows), 1),
        sum(1 for r in rows if r["error"]),
        requests / forwards if forwards else None,
        sampled,
    )


def show(runs: list[Run], args: argparse.Namespace, gpu: list[str], policy: str) -> None:
    where = ", ".join(gpu) if gpu else "no GPU found: on the CPU (not a GPU's figures)"
    what = f"LIBERO {args.suite} in docker" if args.env == "libero" else "a LIBERO stand-in"
    print(
        f"{what}, {args.episodes} episodes x {args.max_steps} steps, {args.size} px cameras; "
        f"{policy}; pytest -n {args.workers} --hud-concurrency={args.concurrency}; {where}"
    )
    head = ["placement", "wall s", "episodes/min", "success", "errors", "mean batch"]
    head += ["workers RSS MB", "server RSS MB", "GPU mem peak MB", "GPU util mean"]
    rows = []
    for r in runs:
        s = r.sampled
        rows.append(
            [
                r.placement,
                f"{r.wall:.1f}",
                f"{60 * r.episodes / r.wall:.2f}",
                f"{100 * r.success:.0f}%",
                str(r.errors),
                f"{r.width:.2f}" if r.width else f"<= {args.concurrency} (per worker)",
                f"{s.role_total_mb('worker'):.0f}",
                f"{s.role_total_mb('server'):.0f}" if r.placement == "shared" else "-",
                f"{max(s.gpu_mem_mb):.0f}" if s.gpu_mem_mb else "-",
                f"{sum(s.gpu_util) / len(s.gpu_util):.0f}%" if s.gpu_util else "-",
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    if args.json:
        figures = [
            {
                "placement": r.placement,
                "wall_s": r.wall,
                "episodes": r.episodes,
                "errors": r.errors,
                "success": r.success,
                "mean_width": r.width,
                "workers_rss_mb": r.sampled.role_total_mb("worker"),
                "server_rss_mb": r.sampled.role_total_mb("server"),
                "gpu_mem_peak_mb": max(r.sampled.gpu_mem_mb, default=None),
                "gpus": gpu,
            }
            for r in runs
        ]
        Path(args.json).write_text(json.dumps(figures, indent=1))
    if args.report:
        sys.path.insert(0, str(ROOT / "bench"))
        from _report import write_table

        write_table("gpu", f"The headline command on {where} (bench/gpu.py)", head, rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4, help="rollouts in flight per worker")
    parser.add_argument("--suite", default="libero_10")
    parser.add_argument(
        "--env", choices=("libero", "stand-in"), default="libero", help="see the docstring"
    )
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--max-steps", type=int, default=150)
    parser.add_argument("--size", type=int, default=224, help="camera pixels")
    parser.add_argument("--policy", choices=("diffusion", "act", "tiny"), default="diffusion")
    parser.add_argument("--denoise", type=int, default=100, help="diffusion steps per inference")
    parser.add_argument("--placements", default="shared,worker")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--smallest", action="store_true", help="CI's size: -n 2, tiny, 2 x 3")
    parser.add_argument("--report", action="store_true", help="write docs/performance.md")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    if args.smallest:
        args.workers, args.concurrency, args.episodes, args.max_steps = 2, 1, 2, 3
        args.size, args.policy = 64, "tiny"
    found = gpus()
    if not found:
        print("no GPU found: running on the CPU; the figures are this CPU's", flush=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-bench-"))
    try:
        if args.env == "libero":
            (work / "test_libero.py").write_text(TESTS)
        else:
            (work / "libero_shaped.py").write_text(STAND_IN)
            (work / "test_libero.py").write_text(STAND_IN_TESTS)
        (work / "conftest.py").write_text("")
        ckpt = make_policy(args.policy, work / "policy", args.size, args.denoise)
        runs = []
        for placement in args.placements.split(","):
            runs.append(run(work, ckpt, placement, args, bool(found)))
            print(f"  {placement}: {runs[-1].wall:.1f} s", file=sys.stderr, flush=True)
        show(runs, args, found, args.policy)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
