"""What CI runs small, at full size (``PYTEST_HUD_FULL_SIZE=1``), with each item's outcome and
its setup + call + teardown seconds. Two parts:

- ``extras``: ``tests/project/test_extras.py``, where CI tries the lerobot extra's clean
  install on the current LeRobot only (Python 3.12) and full size adds LeRobot 0.4 on
  Python 3.11 (pip's download of torch is most of a LeRobot item);
- ``second-stack``: the train/eval loop (``tests/e2e/test_train_eval.py``) on the second
  LeRobot stack (``.ci/venvs/lerobot-current``), where CI runs it on the main stack only.

    PYTHONPATH=$PWD .venv/bin/python bench/full_size.py [--part extras] [-k lerobot_extra]

Exit 0 when every item of every part run passed.
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
#: part -> (its interpreter, pytest's arguments)
PARTS: dict[str, tuple[Path, list[str]]] = {
    "extras": (Path(sys.executable), ["tests/project/test_extras.py"]),
    "second-stack": (
        ROOT / ".ci" / "venvs" / "lerobot-current" / "bin" / "python",
        ["-m", "lerobot_version", "tests/e2e/test_train_eval.py"],
    ),
}


def run_part(python: Path, args: list[str], k: str) -> tuple[int, dict[str, float], dict[str, str]]:
    """One pytest run at full size: its exit code, each item's seconds and outcome."""
    with tempfile.TemporaryDirectory(prefix="hud-full-size-") as folder:
        report = Path(folder) / "report.jsonl"
        (Path(folder) / "full_size_times.py").write_text(
            "import json\n"
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
        argv = [str(python), "-m", "pytest", *args, "-q", "-p", "full_size_times"]
        argv += ["-p", "no:cacheprovider", *(["-k", k] if k else [])]
        code = subprocess.run(argv, cwd=ROOT, env=env, check=False).returncode
        seconds: dict[str, float] = defaultdict(float)
        outcome: dict[str, str] = {}
        if report.exists():
            for line in report.read_text().splitlines():
                nodeid, when, result, took = json.loads(line)
                seconds[nodeid] += took
                if when == "call" or result != "passed":
                    outcome[nodeid] = result
    return code, seconds, outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=sorted(PARTS), action="append",
                        help="run only this part (repeatable; default: all)")  # fmt: skip
    parser.add_argument("-k", default="", help="pytest's -k expression over the items")
    args = parser.parse_args()
    worst = 0
    for name in args.part or list(PARTS):
        python, pytest_args = PARTS[name]
        if not python.exists():
            print(f"{name}: {python} is missing; fix: scripts/setup --all", file=sys.stderr)
            worst = worst or 1
            continue
        code, seconds, outcome = run_part(python, pytest_args, args.k)
        worst = worst or code
        print(f"\n{name:<100} {'outcome':>8} {'seconds':>8}")
        for nodeid, took in sorted(seconds.items(), key=lambda kv: -kv[1]):
            print(f"{nodeid.split('::', 1)[1]:<100} {outcome.get(nodeid, '?'):>8} {took:8.0f}")
        print(f"{'total':<100} {'':>8} {sum(seconds.values()):8.0f}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
