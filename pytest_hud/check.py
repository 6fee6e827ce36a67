"""``python -m pytest_hud check``: the preflight as a command (docs/guides/why.md). Exit 0 when
the policy can run everywhere, 1 on a mismatch, 2 when loading fails.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_hud.errors import HudError
from pytest_hud.plumbing.cli import command_parser
from pytest_hud.runtime.backends import DEFAULT

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "check",
        "Set an agent's policy against the envs of task rows: what it expects (cameras, "
        "state, action, stats, chunk) against each env's contract, then a few steps of a "
        "real episode.",
        agent=True,
    )
    parser.add_argument("rows", help="a task file (.jsonl, .tasks.json) or an env module (.py)")
    parser.add_argument("--runtime", default=DEFAULT, help=f"as --hud-runtime (default: {DEFAULT})")
    parser.add_argument("--max-steps", type=int, default=None, help="as --hud-max-steps")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per probe episode (default 300)"
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from pytest_hud.features.preflight.checks import PROBE_TIMEOUT, check_agent, subjects
    from pytest_hud.robot.agent.registry import load_agent
    from pytest_hud.runtime.placement import provider_for
    from pytest_hud.runtime.task import Taskset

    path = Path(args.rows)
    try:
        tasks = list(Taskset.load(path))
    except (HudError, OSError, ValueError, ImportError) as exc:
        print(f"check: cannot load rows from {path}: {exc}", file=sys.stderr)
        return 2
    try:
        agent = load_agent(args.agent)
    except Exception as exc:  # a factory that raises: its type and message
        print(
            f"check: cannot load agent {args.agent!r}: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return 2
    envs = subjects(tasks)
    tables = check_agent(
        agent,
        args.agent,
        envs,
        provider_for(args.runtime),
        max_steps=args.max_steps,
        timeout=args.timeout or PROBE_TIMEOUT,
    )
    if not tables:
        print(
            f"check: agent {args.agent!r} declares nothing to check (not a LeRobot checkpoint, "
            "an openpi or vla-eval server, nor a model with policy_spec())"
        )
        return 0
    for table in tables:
        print(table.render(), end="\n\n")
    hard = sum(len(t.hard) for t in tables)
    soft = sum(len(t.soft) for t in tables)
    print(f"check: {len(tables)} env(s), {hard} mismatch(es), {soft} warning(s)")
    return 1 if hard or (soft and args.strict) else 0


if __name__ == "__main__":
    raise SystemExit(main())
