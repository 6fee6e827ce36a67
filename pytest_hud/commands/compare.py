"""``python -m pytest_hud compare base.json new.json [more.json]``: checkpoints compared per task
(:mod:`pytest_hud.evaluation.comparison`), a table, a plot, a JSON, and ``--fail-on-drop``
as a CI gate.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_hud.evaluation.comparison import compare, drops, format_table, load_run, write_plot
from pytest_hud.plumbing.printable import printable

__all__ = ["USAGE_ERROR", "main"]


def _labels(paths: Sequence[Path]) -> list[str]:
    stems = [p.stem for p in paths]
    return [s if stems.count(s) == 1 else f"{s}#{i}" for i, s in enumerate(stems)]


#: The exit code of a results file compare cannot read, as pytest's for a usage error; never
#: 1, which --fail-on-drop gives a drop (a CI gate must not read a broken file as a drop).
USAGE_ERROR = 4


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pytest_hud compare",
        description="compare results JSONs of checkpoints per task",
    )
    ap.add_argument("results", nargs="+", type=Path, help="base.json new.json [more.json ...]")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument(
        "--fail-on-drop",
        type=float,
        metavar="PP",
        help="exit 1 when a task drops significantly by at least PP points",
    )
    ap.add_argument("--plot", type=Path, help="write the comparison PNG here")
    ap.add_argument("--json", type=Path, help="write the comparisons as JSON here")
    args = ap.parse_args(argv)
    try:
        runs = [
            load_run(p, lab) for p, lab in zip(args.results, _labels(args.results), strict=True)
        ]
    except ValueError as exc:  # a file that is not a valid results JSON: a usage error
        print(f"compare: {printable(exc)}", file=sys.stderr)
        return USAGE_ERROR
    try:
        comparisons = compare(runs, args.alpha)
    except ValueError as exc:  # the arguments (one run, a bad alpha): as argparse's
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    for line in format_table(comparisons):
        print(line)
    if args.json is not None:
        args.json.write_text(json.dumps([c.__dict__ for c in comparisons], indent=2))
    if args.plot is not None:
        write_plot(runs, args.plot)
        print(f"compare plot: {args.plot}")
    if args.fail_on_drop is not None:
        bad = drops(comparisons, args.fail_on_drop)
        for c in bad:
            print(
                printable(f"FAILED {c.task}: {c.base} -> {c.new}")
                + f" dropped {-(c.diff or 0):.1%} "
                f"(p={c.p_value:.3g}, >= {args.fail_on_drop:g} points)",
                file=sys.stderr,
            )
        if bad:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
