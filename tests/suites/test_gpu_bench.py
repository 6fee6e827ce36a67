"""bench/gpu.py at its smallest size (issue 54): the headline command's bench, written for a GPU,
runs correctly on this CPU-only machine and says so. A tiny random ACT made offline, ``-n 2``
with the model shared and with a copy per worker, 2 episodes of 3 steps each way, on the
bench's LIBERO stand-in (LIBERO's cameras, state and action without its scene: a LIBERO
scene costs 30-80 s a container here, and LIBERO in its image is tests/suites/
test_suite_libero.py's; ``bench/gpu.py --smallest`` runs it at this size, by hand).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from needs import require_lerobot
from paths import ROOT

pytestmark = [pytest.mark.lerobot]


@pytest.mark.timeout(1200)
def test_the_gpu_bench_runs_at_its_smallest_size_and_says_there_is_no_gpu(tmp_path: Path) -> None:
    require_lerobot()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    figures = tmp_path / "figures.json"
    argv = [sys.executable, str(ROOT / "bench" / "gpu.py"), "--smallest", "--env", "stand-in"]
    done = subprocess.run(
        [*argv, f"--json={figures}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1100,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr[-3000:]}"
    assert "no GPU found: running on the CPU; the figures are this CPU's" in out
    assert "policy: tiny, " in out and "pytest -n 2 --hud-concurrency=1" in out
    assert "placement  wall s  episodes/min" in out  # the table, printed
    shared, worker = json.loads(figures.read_text())
    assert (shared["placement"], worker["placement"]) == ("shared", "worker")
    for run in (shared, worker):  # every episode ran to its end; no GPU figure invented
        assert run["episodes"] == 2 and run["errors"] == 0 and run["gpus"] == []
        assert run["gpu_mem_peak_mb"] is None
    assert shared["mean_width"] >= 1 and shared["server_rss_mb"] > 0
    assert worker["mean_width"] is None and worker["server_rss_mb"] == 0
    # the workers hold no model when it is shared: less than the two copies
    assert shared["workers_rss_mb"] < worker["workers_rss_mb"]
