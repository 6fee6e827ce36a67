"""Which ``module`` columns a task row may name: a dotted name or a path under the rootdir or the
rows' folder, since serving imports it (``--hud-allow-modules`` lifts this).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from pytest_hud.errors import ModuleColumnError
from pytest_hud.plumbing.loader import names_a_file
from pytest_hud.runtime.task import Task

__all__ = ["check_module_columns"]

_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def check_module_columns(
    rows: Sequence[Task],
    where: str,
    roots: Iterable[Path],
    allow: bool = False,
    opt_in: str = "pass --hud-allow-modules",
) -> None:
    """Raise :class:`ModuleColumnError` for the first row whose ``module`` is neither a
    dotted name nor a path under one of ``roots`` (unless ``allow``; ``opt_in`` says how
    to allow it in the message)."""
    if allow:
        return
    folders = list(dict.fromkeys(Path(r).resolve() for r in roots))  # once each
    for n, row in enumerate(rows, 1):
        module = row.metadata.get("module")
        if not module:
            continue
        text = str(module)
        if not names_a_file(text):
            if _DOTTED.fullmatch(text):
                continue
            problem = "is neither a dotted module name nor a .py path"
        else:
            path = Path(text).resolve()
            if any(path.is_relative_to(f) for f in folders):
                continue
            problem = f"resolves to {path}, outside " + " and ".join(map(str, folders))
        raise ModuleColumnError(
            f"{where}: row {n} ({row.key}) has module {text!r}, which {problem}; expected a "
            "dotted module name or a path under the rootdir or the task file's folder; fix: "
            f"move the env module into the project, name it by its dotted module name, or "
            f"{opt_in} to import it anyway"
        )
