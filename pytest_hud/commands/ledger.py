"""``python -m pytest_hud ledger merge a.jsonl b.jsonl -o c.jsonl``: episode ledgers merged
without duplicate episodes (:mod:`pytest_hud.evaluation.ledger_file`), and their results JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_hud.evaluation.ledger_file import LedgerError, merge, read, results, write_ledger

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_hud ledger")
    sub = ap.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="merge ledgers without duplicate episodes")
    m.add_argument("ledgers", nargs="+", type=Path)
    m.add_argument("-o", "--output", type=Path, required=True, help="merged ledger (JSONL)")
    m.add_argument("--results", type=Path, help="also write a results JSON (--hud-results shape)")
    m.add_argument(
        "--prefer",
        choices=("last", "first"),
        default="last",
        help="which of two records of one episode to keep (default: the later)",
    )
    args = ap.parse_args(argv)
    parts = []
    for path in args.ledgers:
        try:
            contents = read(path)
        except (OSError, LedgerError) as exc:
            print(f"ledger merge: {exc}", file=sys.stderr)
            return 2
        if contents.torn is not None:
            print(
                f"ledger merge: {path}: dropped a torn last line (line {contents.torn.line}, "
                f"{contents.torn.size} bytes)",
                file=sys.stderr,
            )
        parts.append(contents)
    merged = merge(parts, prefer=args.prefer)
    total = sum(len(p.episodes) for p in parts)
    write_ledger(args.output, merged)
    if args.results is not None:
        args.results.write_text(json.dumps(results(merged), indent=2, default=str))
    print(
        f"ledger merge: {len(merged.episodes)} episodes ({total - len(merged.episodes)} "
        f"duplicates dropped) from {len(parts)} ledgers -> {args.output}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
