"""What an attended session shows of itself: the budget left, the operator's end-of-session
summary, and the html report's section (per row: who graded, notes, safety counts,
discards, instructions, faults, and why a row was not run)."""

from __future__ import annotations

import html
import time
from collections import Counter
from collections.abc import Mapping, Sequence

from pytest_hud.evaluation.results import Row

__all__ = ["budget_left", "html_section", "session_summary"]


def budget_left(
    seconds: float | None, episodes: int | None, clock: float | None, run: int
) -> str | None:
    """What the budget has left, in words (None: no budget). A duration's clock starts at
    the first episode's first frame: connecting the robot is not spent."""
    if episodes is not None:
        return f"{max(0, episodes - run)} of {episodes} episodes left"
    if seconds is None:
        return None
    if clock is None:
        return f"{_clock(seconds)} (the clock starts at the first frame)"
    left = max(0.0, seconds - (time.monotonic() - clock))
    return f"{_clock(left)} of {_clock(seconds)} left"


def _clock(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{rest:02d}" if hours else f"{minutes}:{rest:02d}"


def session_summary(
    rows: Sequence[Row], codes: Mapping[str, str], budget: str | None, halted: str | None
) -> list[str]:
    """The operator's end-of-session lines: counts, per arm code (never an agent's name),
    the rows left undecided and why."""
    graded = [r for r in rows if r.get("success") is not None and not r.get("error")]
    errors = [r for r in rows if r.get("error")]
    unrun = [r for r in rows if r.get("outcome") == "skipped"]
    out = [
        f"session ended: {len(graded)} graded, {len(errors)} errors, {len(unrun)} not run",
    ]
    if codes:
        for letter, code in sorted(codes.items(), key=lambda kv: kv[1]):
            mine = [r for r in graded if r.get("arm") == letter]
            wins = sum(1 for r in mine if r.get("success"))
            out.append(f"arm {code}: {wins} of {len(mine)} successes")
    else:
        wins = sum(1 for r in graded if r.get("success"))
        out.append(f"{wins} of {len(graded)} successes")
    discards = sum(len(r.get("discards") or []) for r in rows)
    if discards:
        out.append(f"{discards} episode(s) discarded and run again")
    why = Counter(str(r.get("unrun") or "skipped") for r in unrun)
    if why:
        out.append("not run: " + ", ".join(f"{n} {w}" for w, n in sorted(why.items())))
    if budget:
        out.append(f"budget: {budget}")
    if halted:
        out.append(f"ended on a robot fault: {halted}")
    return out


_COLUMNS = (
    "row", "arm", "outcome", "graded by", "score", "notes", "safety", "discards", "told the "
    "policy", "fault / not run",
)  # fmt: skip


def html_section(rows: Sequence[Row]) -> str | None:
    """The html report's attended section, or None for a session without attended rows
    (no grade source, safety, discards or unrun reason anywhere)."""
    mine = [r for r in rows if _attended(r)]
    if not mine:
        return None
    head = "".join(f"<th>{html.escape(c)}</th>" for c in _COLUMNS)
    body = "".join(_line(r) for r in mine)
    return (
        '<div class="hud-attended"><h3>Attended episodes</h3>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _attended(row: Row) -> bool:
    """A row an attended session (or a robot) had a hand in."""
    if any(row.get(k) for k in ("arm_code", "robot", "safety", "discards", "instructions")):
        return True
    source = str(row.get("grade_source") or "")
    return source.startswith(("operator", "grader", "detector")) or row.get("unrun") in (
        "budget", "put off", "quit", "halted",
    )  # fmt: skip


def _line(row: Row) -> str:
    safety = row.get("safety") or {}
    discards = row.get("discards") or []
    told = row.get("instructions") or []
    fault = row.get("fault") or {}
    cells = [
        f"{row.get('env')}/{row.get('task_id')}" + _args(row),
        str(row.get("arm_code") or ""),
        str(row.get("outcome") or ""),
        str(row.get("grade_source") or ""),
        "" if row.get("score") is None else f"{row['score']:g}",
        str(row.get("notes") or ""),
        ", ".join(f"{k} {v}" for k, v in safety.items()),
        "; ".join(_discard(d) for d in discards if isinstance(d, dict)),
        "; ".join(f"step {t.get('step')}: {t.get('text')}" for t in told if isinstance(t, dict)),
        (f"{fault.get('kind')} ({fault.get('taken')})" if fault else "")
        + (f"not run: {row.get('unrun')}" if row.get("unrun") else ""),
    ]
    return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


def _discard(discard: Mapping[str, object]) -> str:
    return f"{discard.get('steps')} steps: {discard.get('notes') or '-'}"


def _args(row: Row) -> str:
    args = {k: v for k, v in (row.get("args") or {}).items() if k not in ("setup", "image")}
    return "[" + ", ".join(f"{k}={v}" for k, v in args.items()) + "]" if args else ""
