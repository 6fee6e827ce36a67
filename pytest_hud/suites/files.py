"""The shipped ``tasks.jsonl`` files. Each suite holds its table of them, ``SUITE_FILES``
(name -> (path, rows function)) beside its ``MODULE``, in its ``tasks`` module (or, without
one, its package); this module finds every suite's table, says what a file's text is for its
rows (the module column at the top level, as users write it), and writes them (the
repository's maintainers rewrite the shipped files with it; a test checks they are what their
rows say).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from pytest_hud import Task

__all__ = ["ROOT", "SuiteFiles", "rows_text", "suite_tables", "write_suites"]

#: The folder the suites live in (the files' paths are shown and mirrored relative to it).
ROOT = Path(__file__).parent
#: A row as a rows function gives it: a Task, or a JSONL row already (with its module).
Row = Task | Mapping[str, object]
#: One suite's table: a file's name -> (its path, the function giving its rows).
SuiteFiles = Mapping[str, tuple[Path, Callable[[], Sequence[Row]]]]


def rows_text(module: str, rows: Iterable[Row]) -> str:
    """A ``tasks.jsonl`` file's text: one row a line, ``module`` as its own column (a row
    given as a mapping is written as it is)."""
    lines = []
    for task in rows:
        if isinstance(task, Task):
            row: dict[str, object] = dict(task.to_row())
            row.pop("metadata", None)
            row["module"] = module
        else:
            row = dict(task)
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n"


def suite_tables() -> dict[str, tuple[str, SuiteFiles]]:
    """Every suite package's ``(MODULE, SUITE_FILES)``, by package name: from its ``tasks``
    module (pure data, no simulator imported), else from the package itself."""
    out: dict[str, tuple[str, SuiteFiles]] = {}
    for info in sorted(pkgutil.iter_modules([str(ROOT)]), key=lambda m: m.name):
        if not info.ispkg:
            continue
        has_tasks = (ROOT / info.name / "tasks.py").exists()
        name = f"{__package__}.{info.name}" + (".tasks" if has_tasks else "")
        module = importlib.import_module(name)
        table = getattr(module, "SUITE_FILES", None)
        if table is not None:
            out[info.name] = (module.MODULE, table)
    return out


def write_suites(into: Path | None = None) -> list[Path]:
    """Write every suite's files from their rows: over the shipped ones, or under ``into``
    at the same paths relative to :data:`ROOT`. Returns the paths written."""
    written = []
    for module, table in suite_tables().values():
        for path, rows in table.values():
            target = path if into is None else into / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(rows_text(module, rows()))
            written.append(target)
    return written
