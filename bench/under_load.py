"""Run a test selection again and again beside CPU and disk hogs: a flake hunt.

Starts ``--hogs`` processes that keep a core busy and every so often write and fsync
4 MB (``bench/soak.py``'s HOG), then runs ``pytest ARGS`` ``--runs`` times in a row (a
fresh process each time, ``-p no:cacheprovider``), and prints each run's outcome counts
and the machine's load. Exits 1 at the first failed run (its output tail printed), 0 when
every run passed.

    PYTHONPATH=$PWD .venv/bin/python bench/under_load.py [--runs 20] [--hogs 2] \\
        -- tests/plugin/test_interrupts.py -n 2
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak import HOG, stop_hogs  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--hogs", type=int, default=2, help="busy processes beside the runs")
    parser.add_argument("pytest_args", nargs="+", help="after --: what pytest runs")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG, "86400"]) for _ in range(args.hogs)]
    print(f"under load: {args.hogs} hogs (a busy core and 4 MB fsync'd writes each)")
    try:
        for run in range(1, args.runs + 1):
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args.pytest_args],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            tail = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
            counts = re.sub(r"=+", "", tail[0]).strip()
            load = os.getloadavg()[0]
            print(f"run {run:2d}/{args.runs}: exit {done.returncode}, {counts} (load {load:.1f})")
            if done.returncode != 0:
                print(done.stdout[-6000:], done.stderr[-2000:], sep="\n")
                return 1
    finally:
        stop_hogs(hogs)
    print(f"all {args.runs} runs passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
