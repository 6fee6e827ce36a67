"""Cases: one pytest item's rollout (a task row, a repeat index, a derived seed).

Ids are ``env/slug`` (plus ``[rep]`` when a row repeats), the same in every
worker. Seeds derive from ``--hud-seed``, the row and the repeat, so a rerun
(``--lf``) replays the same episode.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_hud.runtime.errors import TaskError
from pytest_hud.runtime.task import Task, Taskset

__all__ = ["HudCase", "derive_seed", "expand", "task_rows"]


def derive_seed(base: int, task: Task, rep: int) -> int:
    digest = hashlib.sha256(f"{base}:{task.key}:{rep}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class HudCase:
    """What one item evaluates: ``task`` is the row as sent (seed applied)."""

    row: Task
    rep: int
    task: Task
    group: int

    @property
    def id(self) -> str:
        base = f"{self.row.env}/{self.row.slug}"
        return f"{base}[{self.rep}]" if self.group > 1 else base

    @property
    def seed(self) -> Any:
        return self.task.args.get("seed")


def task_rows(source: Any, base: Path | None = None) -> list[Task]:
    """Rows from Task objects, a Taskset, a module, or a JSON/JSONL/.py path."""
    if isinstance(source, Task):
        return [source]
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.is_absolute() and base is not None:
            path = base / path
        return list(Taskset.load(path))
    if isinstance(source, Iterable):
        rows: list[Task] = []
        for item in source:
            rows.extend(
                task_rows(item, base) if not isinstance(item, dict) else [Task.from_row(item)]
            )
        return rows
    if hasattr(source, "__file__"):
        return list(Taskset.from_module(source))
    raise TaskError(
        f"hud tasks must be Task rows, a Taskset, or a .json/.jsonl/.py path; got {source!r}"
    )


def expand(rows: Iterable[Task], group: int, seed: int | None) -> list[HudCase]:
    """Every row ``group`` times; repeats beyond the first (or all, with a seed) get
    a derived ``seed`` arg."""
    cases = []
    for row in rows:
        for rep in range(group):
            task = row
            if seed is not None or rep > 0:
                task = row.with_args(seed=derive_seed(seed or 0, row, rep))
            cases.append(HudCase(row, rep, task, group))
    return cases
