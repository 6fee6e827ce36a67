"""Cases: one item's rollout (row, repeat, seed). Ids and derived seeds depend on the row alone,
so they match in every worker and ``--lf`` replays the same episode.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_hud._plugin.arms import Arm
from pytest_hud.errors import TaskError
from pytest_hud.plumbing.jsonvalue import JSONValue
from pytest_hud.runtime.task import Task, Taskset

__all__ = ["HudCase", "derive_seed", "expand", "readable_id", "task_rows", "with_arms"]

#: the arg a repeat varies: the one seed argument env templates declare
SEED_ARG = "seed"
#: an arg's value longer than this is shown only in the hidden args' hash; all the shown
#: args longer than this and a hash fall back to the slug
_READABLE_MAX = 48
_PLAIN = re.compile(r"^[A-Za-z0-9_.+-]*$")


def derive_seed(base: int, task: Task, rep: int) -> int:
    digest = hashlib.sha256(f"{base}:{task.key}:{rep}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class HudCase:
    """What one item evaluates: ``task`` is the row as sent (seed applied); ``arm`` the
    agent it runs under when several are given (its id then ends in ``@LETTER``)."""

    row: Task
    rep: int
    task: Task
    group: int
    arm: Arm | None = None

    @property
    def id(self) -> str:
        base = readable_id(self.row)
        base = f"{base}[{self.rep}]" if self.group > 1 else base
        return base if self.arm is None else f"{base}@{self.arm.letter}"

    @property
    def seed(self) -> JSONValue:
        return self.task.args.get("seed")


def task_rows(source: object, base: Path | None = None) -> list[Task]:
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


def _scalar(value: object) -> str | None:
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "null"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str) and _PLAIN.match(value) and value:
        return value
    return None


def readable_id(task: Task) -> str:
    """``env/id[name:value]...``: each short scalar arg in brackets of its own (sorted by
    name), the others (free text such as a robot row's set-up, lists, long values) as one
    ``[+<8 hex>]`` of their hash; ``env/slug`` when the shown args would be too long. A
    pytest id people can read, stable across runs, and one ``-k`` takes as written:
    pytest's ``-k`` grammar refuses ``=`` and ``,``, and ``-k "[seed:1]"`` picks seed 1, not
    seed 10. ``Task.slug`` (which baselines and expectations key on) is left as it is."""
    if not task.args:
        return f"{task.env}/{task.id}"
    shown, hidden = [], {}
    for name in sorted(task.args):
        text = _scalar(task.args[name])
        if text is None or not _PLAIN.match(name) or len(text) > _READABLE_MAX:
            hidden[name] = task.args[name]
        else:
            shown.append(f"[{name}:{text}]")
    if hidden:
        canonical = json.dumps(hidden, sort_keys=True, separators=(",", ":"))
        shown.append(f"[+{hashlib.sha256(canonical.encode()).hexdigest()[:8]}]")
    inner = "".join(shown)
    if len(inner) > _READABLE_MAX + 12:
        return task.key
    return f"{task.env}/{task.id}{inner}"


def expand(rows: Iterable[Task], group: int, seed: int | None) -> list[HudCase]:
    """Every row ``group`` times. Repeat 0 of a row with a ``seed`` arg runs that exact
    seed; the other repeats, and a seedless row under ``--hud-seed``, get a ``seed``
    derived from the base seed, the row and the repeat. No other arg changes."""
    cases = []
    for row in rows:
        own = SEED_ARG in row.args
        for rep in range(group):
            task = row
            if rep > 0 or (seed is not None and not own):
                task = row.with_args(**{SEED_ARG: derive_seed(seed or 0, row, rep)})
            cases.append(HudCase(row, rep, task, group))
    return cases


def with_arms(cases: list[HudCase], arms: list[Arm]) -> list[HudCase]:
    """Every case once per arm (same row, repeat and seed): the arms' pairs."""
    if not arms:
        return cases
    return [HudCase(c.row, c.rep, c.task, c.group, arm) for c in cases for arm in arms]
