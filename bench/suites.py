"""Benchmark the shipped MetaWorld suite: episodes/s state-only, and rendered steps/s.

Part 1, state-only: the MT10 rows (10 tasks x V train goals, default 5) with
``metaworld-expert``, as a user runs them::

    python -m pytest --pyargs pytest_hud.suites.metaworld.mt10 \\
        --hud-agent=pytest_hud.suites.metaworld:expert_agent --hud-runtime=R -n K

for each runtime R (default ``local`` and ``docker``) and worker count K (default 1
and 2), plus ``--hud-shared=1`` (one substrate per worker, kept across items).
``docker`` is ``--hud-runtime=docker`` with no image: the image is built (or found)
first with ``python -m pytest_hud image build``, timed apart, so the rows time
running, not building; each item then boots a container. Wall time is the
whole pytest process (start-up, collection and xdist workers included); success comes
from ``--hud-results``. Without ``--hud-shared`` every item boots a fresh env server
and sim process (python + metaworld import + the task's 50 goals, ~2 s here), which
dominates the ~0.1 s an expert episode takes (39-188 steps at ~650-860 steps/s).

Measured 2026-12-01 on a quiet machine (load 1.2-2.3), MT10 x 1 goal (10 episodes,
10/10 each, wall includes pytest's start-up), episodes/s::

    runtime   -n 1   -n 2   -n 1 shared   -n 2 shared
    local     0.34   0.45   0.52          0.69
    docker    0.25   0.43   0.53          0.79

(fresh substrates fork from a pre-imported zygote locally, and the warm pool boots the
next containers while episodes run; at the last stop, before both and at high load,
local -n 1 was 0.08 and docker -n 1 0.04).

Part 2, rendered: one episode cut at M steps (default 20) through the real wire, with
cameras at S x S (default 224), for each headless backend (egl, osmesa), local and
inside the suite's auto-built docker image (the backend reaches the container through
``MUJOCO_GL``/``PYOPENGL_PLATFORM``); steps/s of the episode (boot excluded), with the
load average next to it. MetaWorld: reach-v3 with the ``corner2`` camera and its
expert, local = this process's env server. LIBERO: a libero_10 task with agentview +
wrist and a random agent; its stack cannot live in this venv, so "local" is the LIBERO
venv (``scripts/setup --libero``, ``--libero-python``), skipped when absent.

Measured 2026-12-01, 128 px, 20 steps, 2 cores shared with other jobs (load 8-13, so
only the side-by-side ratios mean anything; the docker boot includes building the
image's small top layer after a source edit, and for MetaWorld egl a new deps layer)::

    MetaWorld reach-v3 corner2   local egl 1.03-1.22, osmesa 1.22-1.29 steps/s
                                 docker egl 0.74, osmesa 0.77-1.05 steps/s
    LIBERO agentview + wrist     venv egl 1.63, osmesa 1.27 steps/s (boot 45-56 s)
                                 docker egl 1.36, osmesa 0.75 steps/s (boot 128 s)

so a rendered step in a container runs at ~0.6-0.85x local here; on an idle machine the
same MetaWorld camera rendered 7-11 steps/s in an earlier measurement here.

    python bench/suites.py [--variations V] [--workers 1 2] [--runtimes local]
        [--no-shared] [--render-steps M] [--render-size S] [--only state|render]
        [--render-suites metaworld libero] [--render-runtimes local docker]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
AGENT = "pytest_hud.suites.metaworld:expert_agent"


#: The seeded suites (robosuite, gymnasium-robotics, gym-hil, Kinetix, ManiSkill): rows
#: package -> its agent (their own loops beside them: bench/suite_loops.py).
SEEDED = {
    "pytest_hud.suites.gymnasium_robotics.fetch": "fetch-expert",
    "pytest_hud.suites.gym_hil.pick_cube": "gym-hil-expert",
    "pytest_hud.suites.gymnasium_robotics.kitchen": "kitchen-expert",
    "pytest_hud.suites.robosuite.lift": "robosuite-expert",
    "pytest_hud.suites.robosuite.stack": "robosuite-expert",
    "pytest_hud.suites.robosuite.door": "robosuite-expert",
    "pytest_hud.suites.robosuite.two_arm_lift": "robosuite-expert",
    "pytest_hud.suites.kinetix.s": "kinetix-expert",
    # plans in $PYTEST_HUD_MANISKILL_PLANNER's python (.ci/venvs/maniskill)
    "pytest_hud.suites.maniskill.tabletop": "maniskill-expert",
}


def state_run(
    runtime: str, workers: int, shared: bool, variations: int, package: str | None = None
) -> dict[str, Any]:
    """One pytest run of MT10 (or of a seeded suite's ``package`` with its agent)."""
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.json"
        agent = SEEDED[package] if package else AGENT
        if package:
            target = ["--pyargs", package]
        elif variations == 5:
            target = ["--pyargs", "pytest_hud.suites.metaworld.mt10"]
        else:  # a generated file with more (or fewer) goals per task
            from pytest_hud.suites.metaworld.tasks import MODULE, mt10

            rows = Path(tmp) / "mt10.jsonl"
            lines = [json.dumps({**t.to_row(), "module": MODULE}) for t in mt10(variations)]
            rows.write_text("\n".join(lines) + "\n")
            target = [str(rows)]
        argv = [sys.executable, "-m", "pytest", *target, f"--hud-agent={agent}"]
        argv += [f"--hud-runtime={runtime}", f"--hud-results={results}", "-q"]
        argv += ["-p", "no:cacheprovider", "--rootdir", tmp]
        if workers > 1:
            argv += ["-n", str(workers)]
        if shared:
            argv += ["--hud-shared=1"]
        start = time.monotonic()
        proc = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, timeout=3600)
        wall = time.monotonic() - start
        if not results.exists():
            raise SystemExit(f"pytest wrote no results ({proc.returncode}):\n{proc.stdout[-3000:]}")
        overall = json.loads(results.read_text())["overall"]
    return {
        "runtime": runtime,
        "workers": workers,
        "shared": shared,
        "episodes": overall["episodes"],
        "success_rate": overall["success_rate"],
        "errors": overall["errors"],
        "mean_steps": overall["mean_steps"],
        "wall_s": wall,
        "episodes_per_s": overall["episodes"] / wall,
    }


def prebuild_image(env: dict[str, str] | None = None) -> dict[str, Any]:
    """Build (or find) the MetaWorld image the docker rows use; its tag and build time."""
    argv = [sys.executable, "-m", "pytest_hud", "image", "build"]
    argv += ["--pyargs", "pytest_hud.suites.metaworld.mt10"]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"image build failed:\n{proc.stderr[-3000:]}")
    hit = "is up to date" in proc.stderr  # the env image itself, not its deps layer
    return {"tag": proc.stdout.strip(), "cache_hit": hit, "seconds": time.monotonic() - start}


#: what a rendered episode runs per suite: rows, the camera variables, an agent
RENDER = {
    "metaworld": "reach-v3 corner2 camera, metaworld-expert",
    "libero": "libero_10 task 0, init state 0, agentview + wrist, random agent",
}


def _render_setup(suite: str, size: int) -> tuple[list[Any], dict[str, str], Any]:
    from pytest_hud.robot import RandomModel, RobotAgent

    if suite == "metaworld":
        from pytest_hud.suites.metaworld import MetaWorldExpert
        from pytest_hud.suites.metaworld.tasks import mt1

        env = {"PYTEST_HUD_METAWORLD_CAMERAS": "corner2", "PYTEST_HUD_METAWORLD_SIZE": str(size)}
        return mt1("reach-v3", 1), env, lambda n: RobotAgent(MetaWorldExpert(), max_steps=n)
    from pytest_hud.suites.libero import rows

    env = {"PYTEST_HUD_LIBERO_SIZE": str(size)}
    return rows("libero_10", 1)[:1], env, lambda n: RobotAgent(RandomModel(seed=0), max_steps=n)


def _render_provider(suite: str, runtime: str, libero_python: str | None) -> Any:
    """Where the sim runs: this process (MetaWorld), the LIBERO venv (LIBERO's "local":
    its stack cannot live in this venv), or the suite's auto-built docker image."""
    import importlib

    from pytest_hud import LocalRuntime, SubprocessRuntime

    module = f"pytest_hud.suites.{suite}"
    if runtime == "docker":
        from pytest_hud.runtime.docker.auto import AutoDockerRuntime

        path = importlib.import_module(module).__file__
        return AutoDockerRuntime([path], boot_timeout=900).serving(module)
    if suite == "libero":
        return SubprocessRuntime(module, python=libero_python, boot_timeout=900)
    return LocalRuntime(module)


def render_run(
    backend: str,
    steps: int,
    size: int,
    suite: str = "metaworld",
    runtime: str = "local",
    libero_python: str | None = None,
) -> dict[str, Any]:
    """One rendered episode cut at ``steps``; steps/s of the episode (boot excluded).
    The render variables reach a container as they reach a local sim process."""
    from pytest_hud import run

    rows, env, make_agent = _render_setup(suite, size)
    env |= {"MUJOCO_GL": backend, "PYOPENGL_PLATFORM": backend}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    head = {"suite": suite, "runtime": runtime, "backend": backend, "size": size}
    try:
        provider = _render_provider(suite, runtime, libero_python)
        start = time.monotonic()
        (result,) = asyncio.run(run(rows, make_agent(steps), provider, rollout_timeout=3600))
        wall = time.monotonic() - start
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    load = os.getloadavg()[0]
    if result.error:
        return {**head, "error": result.error[-500:], "load": load}
    info = result.agent_info
    return {
        **head,
        "steps": info["steps"],
        "episode_s": info["wall_s"],
        "boot_s": wall - info["wall_s"],
        "steps_per_s": info["steps"] / info["wall_s"],
        "load": load,
    }


def _render_table(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    python = args.libero_python
    for suite in args.render_suites:
        print(
            f"\nrendered: {RENDER[suite]}, {args.render_size}x{args.render_size}, "
            f"{args.render_steps} steps"
        )
        for runtime in args.render_runtimes:
            if suite == "libero" and runtime == "local" and not (python and Path(python).exists()):
                print(f"  {'local':<7} skipped: no LIBERO venv (scripts/setup --libero)")
                continue
            for backend in ("egl", "osmesa"):
                r = render_run(backend, args.render_steps, args.render_size, suite, runtime, python)
                out.append(r)
                where = "venv" if suite == "libero" and runtime == "local" else runtime
                if "error" in r:
                    print(f"  {where:<7}{backend:<7} error: {r['error']}")
                else:
                    print(
                        f"  {where:<7}{backend:<7} {r['steps_per_s']:.2f} steps/s "
                        f"(episode {r['episode_s']:.1f} s, boot {r['boot_s']:.1f} s; "
                        f"load {r['load']:.1f})",
                        flush=True,
                    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variations", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runtimes", nargs="+", default=["local", "docker"])
    parser.add_argument("--no-shared", action="store_true")
    parser.add_argument("--render-steps", type=int, default=20)
    parser.add_argument("--render-size", type=int, default=224)
    parser.add_argument("--only", choices=["state", "render", "done"])
    parser.add_argument("--render-suites", nargs="+", default=["metaworld", "libero"])
    parser.add_argument("--render-runtimes", nargs="+", default=["local", "docker"])
    parser.add_argument("--libero-python", default=str(ROOT / ".ci/venvs/libero/bin/python"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--seeded", nargs="*", choices=list(SEEDED), help="seeded suites' rows")
    args = parser.parse_args()
    out: dict[str, Any] = {"state": [], "render": [], "seeded": []}
    for package in args.seeded or []:
        for runtime in args.runtimes:
            for workers in args.workers:
                r = state_run(runtime, workers, True, 0, package)
                out["seeded"].append({"package": package, **r})
                print(
                    f"{package:<44}{runtime:<11}-n {workers}  {r['episodes']:>4} episodes "
                    f"{r['success_rate']:>5.0%}  errors {r['errors']}  {r['wall_s']:>6.1f} s  "
                    f"{r['episodes_per_s']:.2f} eps/s",
                    flush=True,
                )
    if args.seeded is not None:
        args.only = "done"
    if args.only not in ("render", "done"):
        print(f"MetaWorld MT10 x {args.variations} goals, metaworld-expert, state only")
        print(
            f"{'runtime':<10}{'-n':>3}{'shared':>8}{'episodes':>9}{'success':>9}"
            f"{'errors':>7}{'steps':>7}{'wall s':>8}{'eps/s':>7}"
        )
        if "docker" in args.runtimes:
            built = prebuild_image()
            out["image"] = built
            how = "cache hit" if built["cache_hit"] else "built"
            print(f"docker image {built['tag']}: {how} in {built['seconds']:.1f} s")
        for runtime in args.runtimes:
            for shared in [False] if args.no_shared else [False, True]:
                for workers in args.workers:
                    r = state_run(runtime, workers, shared, args.variations)
                    out["state"].append(r)
                    print(
                        f"{runtime:<10}{workers:>3}{'yes' if shared else 'no':>8}"
                        f"{r['episodes']:>9}{r['success_rate']:>9.0%}{r['errors']:>7}"
                        f"{r['mean_steps']:>7.0f}{r['wall_s']:>8.1f}{r['episodes_per_s']:>7.2f}",
                        flush=True,
                    )
    if args.only not in ("state", "done"):
        out["render"] = _render_table(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
