"""``python -m pytest_hud COMMAND ...``: the package's command line.

    serve ENVS.py [--port N]                 serve an env module's environments (pytest_hud.serve)
    compare base.json new.json [more.json]   checkpoint comparison (pytest_hud.commands.compare)
    ledger merge a.jsonl b.jsonl -o c.jsonl  episode ledgers (pytest_hud.commands.ledger)
    doctor                                   which MuJoCo GL backends render here, and the fix
    image build|ls|rm                        the env images --hud-runtime=docker builds
    check --agent SPEC ROWS_OR_MODULE        the compatibility preflight: policy vs env
    watch RUN_DIR [pytest args...]           evaluate a training run's checkpoints as they appear
    policy-server --agent SPEC [--port N]    serve an agent's model on the openpi protocol, batched
    plan --rate P --effect D [--json]        episodes, pairs and rows an evaluation needs

Each command's module is imported only when asked for, so ``--help`` stays fast.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

#: command -> (module with a ``main(argv) -> int``, one-line help)
COMMANDS = {
    "serve": ("pytest_hud.serve", "serve an env module's environments on the control channel"),
    "compare": ("pytest_hud.commands.compare", "compare results JSONs of checkpoints per task"),
    "ledger": ("pytest_hud.commands.ledger", "episode ledgers: merge shards"),
    "doctor": ("pytest_hud.doctor", "which MuJoCo GL backends render here, and the fix"),
    "image": ("pytest_hud.runtime.docker.cli", "build, list, remove the env images of docker runs"),
    "check": ("pytest_hud.check", "an agent's policy against the envs of task rows, before a run"),
    "watch": ("pytest_hud.watch", "evaluate a training run's checkpoints as they appear"),
    "policy-server": (
        "pytest_hud.robot.agent.policy_cli",
        "serve an agent's model on the openpi protocol, batching all connections",
    ),
    "plan": ("pytest_hud.commands.plan", "episodes, pairs and rows an evaluation needs"),
}


def _usage() -> str:
    lines = ["usage: python -m pytest_hud COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<14} {what}" for name, (_, what) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"python -m pytest_hud: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
