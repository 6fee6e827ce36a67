"""Clean installs at full size: ``tests/project/test_extras.py`` with every LeRobot stack.

CI tries the lerobot extra's clean install on the current LeRobot only (Python 3.12); this
runs the same tests with ``PYTEST_HUD_FULL_SIZE=1``, which adds LeRobot 0.4 on Python 3.11,
and prints each item's outcome and its setup + call + teardown seconds (pip's download of
torch is most of a LeRobot item). ``-k`` narrows the items as pytest's does.

    PYTHONPATH=$PWD .venv/bin/python bench/extras.py [-k lerobot_extra]

Exit 0 when every item passed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "project" / "test_extras.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="pytest's -k expression over the items")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hud-extras-") as folder:
        report = Path(folder) / "report.jsonl"
        conftest = Path(folder) / "extras_times.py"
        conftest.write_text(
            "import json, os\n"
            "def pytest_runtest_logreport(report):\n"
            f"    with open({str(report)!r}, 'a') as f:\n"
            "        f.write(json.dumps([report.nodeid, report.when, report.outcome,"
            " report.duration]) + '\\n')\n"
        )
        env = {
            **os.environ,
            "PYTEST_HUD_FULL_SIZE": "1",
            "PYTHONPATH": os.pathsep.join([folder, os.environ.get("PYTHONPATH", "")]),
        }
        argv = [sys.executable, "-m", "pytest", str(TESTS), "-q", "-p", "extras_times"]
        argv += ["-p", "no:cacheprovider", *(["-k", args.k] if args.k else [])]
        code = subprocess.run(argv, cwd=ROOT, env=env, check=False).returncode
        seconds: dict[str, float] = defaultdict(float)
        outcome: dict[str, str] = {}
        if report.exists():
            for line in report.read_text().splitlines():
                nodeid, when, result, took = json.loads(line)
                seconds[nodeid] += took
                if when == "call" or result != "passed":
                    outcome[nodeid] = result
    print(f"\n{'item':<100} {'outcome':>8} {'seconds':>8}")
    for nodeid, took in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"{nodeid.split('::', 1)[1]:<100} {outcome.get(nodeid, '?'):>8} {took:8.0f}")
    print(f"{'total':<100} {'':>8} {sum(seconds.values()):8.0f}")
    return code


if __name__ == "__main__":
    sys.exit(main())
