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

Part 2, rendered: one reach-v3 episode with the ``corner2`` camera at S x S (default
224), cut at M steps (default 20), through the real wire; steps/s of the episode
(boot excluded) for each headless backend.

    python bench/suites.py [--variations V] [--workers 1 2] [--runtimes local]
        [--no-shared] [--render-steps M] [--render-size S] [--only state|render]
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


def state_run(runtime: str, workers: int, shared: bool, variations: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.json"
        if variations == 5:
            target = ["--pyargs", "pytest_hud.suites.metaworld.mt10"]
        else:  # a generated file with more (or fewer) goals per task
            from pytest_hud.suites.metaworld.tasks import MODULE, mt10

            rows = Path(tmp) / "mt10.jsonl"
            lines = [json.dumps({**t.to_row(), "module": MODULE}) for t in mt10(variations)]
            rows.write_text("\n".join(lines) + "\n")
            target = [str(rows)]
        argv = [sys.executable, "-m", "pytest", *target, f"--hud-agent={AGENT}"]
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


def render_run(backend: str, steps: int, size: int) -> dict[str, Any]:
    from pytest_hud import LocalRuntime, run
    from pytest_hud.robot import RobotAgent
    from pytest_hud.suites.metaworld import MetaWorldExpert, mt1

    env = {
        "PYTEST_HUD_METAWORLD_CAMERAS": "corner2",
        "PYTEST_HUD_METAWORLD_SIZE": str(size),
        "MUJOCO_GL": backend,
        "PYOPENGL_PLATFORM": backend,
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        agent = RobotAgent(MetaWorldExpert(), max_steps=steps)
        start = time.monotonic()
        (result,) = asyncio.run(
            run(mt1("reach-v3", 1), agent, LocalRuntime("pytest_hud.suites.metaworld"))
        )
        wall = time.monotonic() - start
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if result.error:
        return {"backend": backend, "error": result.error}
    info = result.agent_info
    return {
        "backend": backend,
        "size": size,
        "steps": info["steps"],
        "episode_s": info["wall_s"],
        "boot_s": wall - info["wall_s"],
        "steps_per_s": info["steps"] / info["wall_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variations", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runtimes", nargs="+", default=["local", "docker"])
    parser.add_argument("--no-shared", action="store_true")
    parser.add_argument("--render-steps", type=int, default=20)
    parser.add_argument("--render-size", type=int, default=224)
    parser.add_argument("--only", choices=["state", "render"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out: dict[str, Any] = {"state": [], "render": []}
    if args.only != "render":
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
    if args.only != "state":
        print(
            f"\nrendered: reach-v3, corner2 {args.render_size}x{args.render_size}, "
            f"{args.render_steps} steps"
        )
        for backend in ("egl", "osmesa"):
            r = render_run(backend, args.render_steps, args.render_size)
            out["render"].append(r)
            if "error" in r:
                print(f"  {backend:<7} error: {r['error']}")
            else:
                print(
                    f"  {backend:<7} {r['steps_per_s']:.1f} steps/s "
                    f"(episode {r['episode_s']:.1f} s, boot {r['boot_s']:.1f} s)",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
