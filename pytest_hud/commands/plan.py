"""``python -m pytest_hud plan``: the episodes, pairs and rows an evaluation needs
(:mod:`pytest_hud.evaluation.planning`), from a rate and an effect or a results JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import NoReturn

from pytest_hud.evaluation.planning import Mode, Setting, format_plan, plan
from pytest_hud.plumbing.cli import from_args

__all__ = ["main"]

_DESCRIPTION = "the episodes, pairs and rows an evaluation needs"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage block
        self.exit(2, f"plan: {message}; fix: see python -m pytest_hud plan --help\n")


def _from_results(path: str) -> tuple[float | None, float | None, str | None]:
    """The results file's overall success rate and, with a ``paired`` block, the last
    candidate's observed discordance (a_only + b_only) / n_pairs over every task."""
    from pytest_hud.evaluation.results import read_results

    try:
        doc = read_results(path)
    except ValueError as exc:
        raise ValueError(f"{exc}; fix: a file written by --hud-results, or --rate P") from None
    overall = doc.get("overall")
    rate = overall.get("success_rate") if overall else None
    if rate is not None and not isinstance(rate, int | float):
        raise ValueError(f"{path}: overall.success_rate: expected a number, got {rate!r}")
    paired = doc.get("paired")
    comparisons = (paired.get("comparisons") if paired else None) or []
    if not comparisons:
        return rate, None, None
    last = comparisons[-1] if isinstance(comparisons, list) else None
    if not isinstance(last, dict):
        last = {}
    counts = last.get("overall")
    try:
        disagree = int(counts["a_only"]) + int(counts["b_only"])  # type: ignore[index]
        n_pairs = int(counts["n_pairs"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        raise ValueError(
            f"{path}: paired.comparisons[-1].overall: expected a_only, b_only and n_pairs "
            "counts, got none; fix: a results JSON written by --hud-results"
        ) from None
    if n_pairs <= 0 or disagree <= 0:
        return rate, None, None
    where = f"{path} ({last.get('candidate')} vs {last.get('reference')}, {n_pairs} pairs)"
    return rate, disagree / n_pairs, where


def main(argv: Sequence[str] | None = None) -> int:
    ap = _Parser(prog="python -m pytest_hud plan", description=_DESCRIPTION)
    default = {f.name: f.default for f in dataclasses.fields(Setting)}  # said once, there
    ap.add_argument("--rate", type=float, help="the baseline success rate, e.g. 0.9")
    ap.add_argument("--results", metavar="FILE", help="a --hud-results JSON to take it from")
    ap.add_argument("--effect", type=float, required=True, help="in rate points, e.g. 0.05")
    ap.add_argument(
        "--alpha", type=float, default=default["alpha"], help="the family's level (%(default)s)"
    )
    ap.add_argument("--power", type=float, default=default["power"], help="%(default)s")
    ap.add_argument(
        "--tasks", type=int, default=default["tasks"], help="tests in the family: alpha/K each"
    )
    ap.add_argument(
        "--repeats", type=int, default=default["repeats"], help="episodes per row (%(default)s)"
    )
    ap.add_argument(
        "--icc", type=float, default=default["icc"], help="intra-row correlation (%(default)s)"
    )
    ap.add_argument("--discordance", type=float, help="P(paired arms disagree on a row)")
    side = ap.add_mutually_exclusive_group()
    side.add_argument("--one-sided", action="store_true", help="a drop, one-sided at alpha")
    side.add_argument(
        "--non-inferiority",
        action="store_true",
        help="show the candidate has not dropped by more than the effect, one-sided at alpha",
    )
    ap.add_argument(
        "--sessions", type=int, default=default["sessions"], help="simulated sessions (%(default)s)"
    )
    ap.add_argument(
        "--seed", type=int, default=default["seed"], help="of the simulations (%(default)s)"
    )
    ap.add_argument("--horizon", type=int, help="a sequential session's most pairs/episodes")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    try:
        rate, discordance, found = None, None, None
        if args.results is not None:
            rate, discordance, found = _from_results(args.results)
        if args.rate is not None:
            rate = args.rate
        elif rate is None:
            raise ValueError(
                "rate: expected --rate P or a --results file with an overall success rate, "
                "got neither; fix: e.g. --rate 0.9"
            )
        if args.discordance is not None:
            discordance, found = args.discordance, "--discordance"
        mode: Mode = (
            "non-inferiority"
            if args.non_inferiority
            else "one-sided"
            if args.one_sided
            else "two-sided"
        )
        setting = from_args(
            Setting,
            args,
            rate=float(rate),
            discordance=discordance,
            mode=mode,
            rate_from="--rate" if args.rate is not None else str(args.results),
            discordance_from=found,
        )
        result = plan(setting)
    except ImportError as exc:
        print(
            f"plan: expected scipy, got {exc}; fix: pip install 'pytest-hud[stats]'",
            file=sys.stderr,
        )
        return 2
    except ValueError as exc:
        print(f"plan: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("\n".join(format_plan(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
