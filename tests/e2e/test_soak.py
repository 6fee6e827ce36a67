"""The soak (issue 26 #5) at CI size: bench/soak.py under the docker runtime, -n 2, a CPU
and disk hog beside it, then the same rows locally. Every item is reported, nothing of the
session is left (process, container, listening port) and the outcomes equal the local
runtime's. The full size (2,000 rows, the RSS curve) runs from bench/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from needs import require

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_a_small_soak_reports_everything_and_leaves_nothing(tmp_path: Path) -> None:
    try:
        import docker

        docker.from_env().ping()
        engine = True
    except Exception:
        engine = False
    require(engine, "a Docker engine", "start one with .ci/docker-up (or scripts/setup --docker)")
    out = tmp_path / "soak.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "soak.py"),
            "--rows",
            "12",
            "--hogs",
            "1",
            "--every",
            "1",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert out.exists(), done.stdout + done.stderr
    checks = json.loads(out.read_text())["checks"]
    assert all(checks.values()), (checks, done.stdout[-3000:], done.stderr[-3000:])
    assert done.returncode == 0
