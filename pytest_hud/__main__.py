"""``python -m pytest_hud COMMAND [ARGS]``: one entry per subcommand, ``module:function``.

Each function takes the remaining argv and returns the exit code; a new command is one
line in ``COMMANDS``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

COMMANDS: dict[str, str] = {
    "doctor": "pytest_hud.doctor:main",
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        names = ", ".join(sorted(COMMANDS))
        got = repr(args[0]) if args else "nothing"
        print(f"usage: python -m pytest_hud COMMAND ...; expected one of: {names}; got {got}")
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    module, _, func = COMMANDS[args[0]].partition(":")
    return int(getattr(importlib.import_module(module), func)(args[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
