"""The watcher's index (``watch.jsonl``): one fsync'd line per evaluated checkpoint, appended
whole; a restart skips the steps it holds and ignores a torn last line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["append", "entry", "read"]


def read(path: Path) -> dict[int, dict[str, object]]:
    """The index's entries by step (the latest line of a step wins; a torn line is ignored)."""
    out: dict[int, dict[str, object]] = {}
    if not path.is_file():
        return out
    for raw in path.read_bytes().split(b"\n"):
        try:
            rec = json.loads(raw)
        except ValueError:
            continue  # the empty tail, or a line torn by a kill mid-write
        if isinstance(rec, dict) and isinstance(rec.get("step"), int):
            out[rec["step"]] = rec
    return out


def append(path: Path, record: dict[str, object]) -> None:
    """Append one line, durable when this returns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size:  # start on a line of its own after a torn tail
            with path.open("rb") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _counts(st: dict[str, object]) -> dict[str, object]:
    keys = ("episodes", "successes", "success_rate", "wilson_95", "errors", "mean_score")
    return {k: st.get(k) for k in keys}


def entry(
    step: int,
    checkpoint: Path,
    results: Path,
    exit_code: int,
    log: Path,
    started: float,
    finished: float,
    document: dict[str, Any],
) -> dict[str, Any]:
    """The index line of one evaluated checkpoint, from its results document."""
    return {
        "step": step,
        "checkpoint": str(checkpoint),
        "results": str(results),
        "exit_code": exit_code,
        "log": str(log),
        "started": round(started, 3),
        "finished": round(finished, 3),
        "overall": _counts(document.get("overall") or {}),
        "per_task": {t: _counts(st) for t, st in (document.get("per_task") or {}).items()},
        "gates": {str(g.get("name")): bool(g.get("passed")) for g in document.get("gates") or []},
    }
