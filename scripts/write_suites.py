"""Rewrite the shipped suites' ``tasks.jsonl`` files from their rows functions (each suite's
``SUITE_FILES`` table, pytest_hud/suites/files.py), after a suite's rows change. With
``--into DIR`` it writes them under DIR instead, at the same relative paths. Prints the paths
written; tests/suites/test_suite_files.py fails while a shipped file differs from its rows.

    python scripts/write_suites.py [--into DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout this script sits in, not an installed copy

from pytest_hud.suites.files import write_suites  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--into", type=Path, help="write under this folder, not over the shipped")
    args = parser.parse_args()
    for path in write_suites(args.into):
        print(path)


if __name__ == "__main__":
    main()
