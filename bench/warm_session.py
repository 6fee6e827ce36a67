"""Warm pool in a real pytest session: how much of the docker runtime's boot stays hidden
when the session also loads an agent.

``bench/warm.py`` measures the pool through ``run()`` with the agent already in memory.
A user runs ``pytest --hud-runtime=docker --hud-concurrency=4``: the session builds (or
finds) the image, loads the agent, then runs the items. Since the session primes the
first items' substrates before it loads the agent (``Evaluator.prime``), the first boots
can hide behind the load too. Three sessions side by side per repetition, each on the
same N CartPole rows (``bench/envs/cheap.py``) in the auto-built image:

- ``off``: ``--hud-warm=off``: each item boots its container when it starts;
- ``on``: the default (``auto``: one container booted ahead per concurrent slot, primed
  during the agent load, exited behind finished rollouts);
- ``up``: ``--hud-shared=C``: one container for every item, booted during the agent load:
  the floor, the same session with no boot on any item's path.

The agent's load is real work (torch imported and a 25 M-parameter MLP built, ~2-4 s
here); its forward is ``--latency`` seconds off the CPU per batch (``--hud-concurrency``
batches the rows in flight), a stand-in for a GPU policy, which this machine does not
have. The figure is the whole session's wall
(pytest start to exit), and ``hidden = (off - on) / (off - up)``.

    PYTHONPATH=$PWD .venv/bin/python bench/warm_session.py [--rows 32] [--concurrency 4]
        [--latency 0.3] [--reps 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = {"off": ["--hud-warm=off"], "on": [], "up": ["--hud-shared={c}"]}

AGENT = '''
import time

from pytest_hud.robot import RobotAgent, ZeroModel


class Latent(ZeroModel):
    """Zeros after a forward that waits off the CPU (the session batches the concurrent
    rows: one wait per batch, as a GPU forward of a few rows costs about one row's)."""

    def infer(self, batch):
        time.sleep({latency})
        return super().infer(batch)


def slow(arg=None):
    """A real load (torch and a 25 M-parameter MLP), a forward off the CPU."""
    import torch

    torch.set_num_threads(1)
    net = torch.nn.Sequential(*(torch.nn.Linear(2048, 2048) for _ in range(6)))
    assert sum(p.numel() for p in net.parameters()) > 25_000_000
    return RobotAgent(Latent(), name="slow-load")
'''

TEST = """
import pytest
from cheap import env  # noqa: F401  (declares the env the image serves)
from pytest_hud import Task

ROWS = [Task("cheap", "balance", {{"seed": s}}) for s in range({rows})]


@pytest.mark.hud(tasks=ROWS)
def test_balance(hud_result):
    assert hud_result.error is None
"""


def session(folder: Path, mode: str, c: int) -> float:
    """One pytest session's wall (s); it must pass."""
    argv = [sys.executable, "-m", "pytest", str(folder / "test_rows.py"), "-q",
            "-p", "no:cacheprovider", "-p", "no:xdist", "--hud-runtime=docker",
            f"--hud-concurrency={c}", f"--hud-agent={folder / 'agents.py'}:slow",
            *(a.format(c=c) for a in MODES[mode])]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "bench" / "envs"), str(ROOT)]))
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{mode}: exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "agents.py").write_text(AGENT.format(latency=args.latency))
        (folder / "test_rows.py").write_text(TEST.format(rows=args.rows))
        session(folder, "up", args.concurrency)  # builds the image: not timed
        walls: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(args.reps):
            for mode in MODES:  # side by side: every mode once per repetition
                walls[mode].append(session(folder, mode, args.concurrency))
    off, on, up = (statistics.median(walls[m]) for m in MODES)
    print(
        f"{args.rows} CartPole rows, --hud-runtime=docker --hud-concurrency={args.concurrency}, "
        f"agent load = torch + 25 M MLP, forward {args.latency * 1000:.0f} ms off the CPU; "
        f"session wall (s), median of {args.reps}"
    )
    for mode in MODES:
        print(f"  {mode:>4}: {statistics.median(walls[mode]):7.2f}  {walls[mode]}")
    hidden = (off - on) / (off - up) if off > up else float("nan")
    print(f"boot cost per row off {(off - up) / args.rows:.3f} s, on {(on - up) / args.rows:.3f} s")
    print(f"hidden: {hidden:.0%}")


if __name__ == "__main__":
    main()
