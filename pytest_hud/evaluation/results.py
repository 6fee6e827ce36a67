"""Rollout rows (one JSON-able row per report, so it crosses xdist), their aggregates, the
terminal table, the results JSON and the gates.
"""

from __future__ import annotations

import functools
import json
import time
import types
import typing
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from pytest_hud.errors import HudError
from pytest_hud.evaluation.baseline import incomplete_reason, power_note
from pytest_hud.evaluation.bounded import betting_interval, design_floor, row_means
from pytest_hud.evaluation.document import (
    Aggregate,
    GateRecord,
    ItemCounts,
    Outcome,
    ResultsDocument,
    Row,
    Stats,
)
from pytest_hud.evaluation.proportions import two_proportion_drop, wilson
from pytest_hud.evaluation.verdict import names_of
from pytest_hud.plumbing.auth import redact
from pytest_hud.plumbing.jsonread import loads
from pytest_hud.plumbing.printable import printable

__all__ = [
    "Aggregate",
    "Gate",
    "GateRecord",
    "ItemCounts",
    "Outcome",
    "ResultsDocument",
    "Row",
    "RowError",
    "Stats",
    "aggregate",
    "baseline_gates",
    "check_row",
    "format_table",
    "read_results",
    "results_document",
    "row_key",
    "score_text",
    "stats",
    "uncovered",
    "unit_of",
    "units_note",
]

#: outcomes whose rows count toward success rates and gates
GRADED = ("passed", "failed")
#: a row's ``unrun`` when a sequential test decided its task without it (not undecided)
DECIDED = "decided"


class RowError(HudError, ValueError):
    """A results row read from a file (a ledger, a results JSON) whose field has the wrong
    type; the message names the file, the line or row, and the field."""


def _fits(value: object, hint: object) -> bool:
    """Whether a JSON value fits a :class:`Row` field's annotation."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if origin is Literal:
        return value in typing.get_args(hint)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is dict or origin is dict or typing.is_typeddict(hint):
        return isinstance(value, dict)
    if hint is list or origin is list:
        return isinstance(value, list)
    return True  # an annotation the rows do not use: nothing to check


def _expected(hint: object) -> str:
    if typing.get_origin(hint) is Literal:
        return " or ".join(repr(a) for a in typing.get_args(hint))
    args = (
        typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else ()
    )
    if args:
        return " or ".join(_expected(a) for a in args)
    names: dict[object, str] = {type(None): "null", bool: "true/false", int: "an integer",
                                float: "a number", str: "a string", dict: "an object",
                                list: "a list"}  # fmt: skip
    if typing.is_typeddict(hint):
        return names[dict]
    return names.get(hint, names.get(typing.get_origin(hint), str(hint)))


def check_row(row: object, where: str) -> Row:
    """``row`` as a :class:`Row`, every field it has of the right type (the TypedDict is
    the schema), else one :class:`RowError` naming ``where`` (file and line or row), the
    field, what it should be and what it is. Fields a row does not know are left alone, and
    a hand-made row may leave out what its reader does not need."""
    if not isinstance(row, Mapping):
        raise RowError(f"{where}: expected a results row (a JSON object), got {_shown(row)}")
    hints = _row_hints()
    if "outcome" in row and row["outcome"] not in typing.get_args(Outcome):
        raise RowError(
            f"{where}: field 'outcome': expected {_expected(Outcome)}, got {_shown(row['outcome'])}"
        )
    for name, value in row.items():
        hint = hints.get(name)
        if hint is not None and not _fits(value, hint):
            raise RowError(
                f"{where}: field {name!r}: expected {_expected(hint)}, got {_shown(value)}; "
                "fix: this file was not written by pytest-hud, or was edited: restore it"
            )
    return cast(Row, row)


@functools.cache
def _row_hints() -> dict[str, object]:
    """:class:`Row`'s fields and their types (resolved once: a ledger checks every line)."""
    return typing.get_type_hints(Row)


def _shown(value: object) -> str:
    text = json.dumps(value, default=str)
    return f"{text[:60]}{'...' if len(text) > 60 else ''} ({type(value).__name__})"


def stats(rows: Iterable[Row]) -> Stats:
    """Counts and rates of ``rows``. Intervals treat rows (``key`` x ``group``) as the units:
    a row's repeats are averaged first, and with one episode per row the success interval is
    Wilson's; otherwise both intervals are betting intervals over the row means
    (:mod:`~pytest_hud.evaluation.bounded`), so repeats never pass for more rows."""
    rows = list(rows)
    graded = [r for r in rows if r.get("error") is None and r.get("success") is not None]
    n = len(graded)
    s = sum(1 for r in graded if r["success"])
    lo, hi = wilson(s, n)
    scores = [x for r in graded if (x := r.get("score")) is not None]
    steps = [x for r in graded if (x := r.get("steps")) is not None]
    errors = sum(1 for r in rows if r.get("error") is not None)
    rate_ci, method = _rate_interval(graded)
    return {
        "episodes": n,
        "successes": s,
        "success_rate": s / n if n else None,
        "wilson_95": [lo, hi] if n else None,
        "rate_ci": rate_ci,
        "rate_ci_method": method,
        "mean_score": sum(scores) / len(scores) if scores else None,
        "score_ci": _score_interval(graded),
        "coverage": n / (n + errors) if n + errors else None,
        "mean_steps": sum(steps) / len(steps) if steps else None,
        "seconds": sum(r.get("duration") or 0.0 for r in rows),
        "errors": errors,
        "expected_failures": sum(1 for r in rows if r.get("outcome") in ("xfailed", "xpassed")),
        "xfailed": sum(1 for r in rows if r.get("outcome") == "xfailed"),
        "xpassed": sum(1 for r in rows if r.get("outcome") == "xpassed"),
        "skipped": sum(1 for r in rows if r.get("outcome") == "skipped"),
        "resumed": sum(1 for r in rows if r.get("resumed")),
        "rows": len({(r.get("key"), r.get("group")) for r in rows}),
    }


def unit_of(row: Mapping[str, object]) -> tuple[object, object]:
    """The unit of inference a row's episodes belong to: its test function and task row
    (repeats, seeds and epochs of it share it; both arms of a pair too)."""
    return (row.get("group"), row.get("key"))


def row_key(row: Row) -> tuple[object, ...]:
    """:func:`unit_of`, and the arm when several agents ran (an arm's own aggregate)."""
    return (*unit_of(row), row.get("arm"))


def units_note(rows: Sequence[Row]) -> str | None:
    """A line for sessions whose rows ran repeats: the repeats are not more rows, and the
    number of rows bounds what any comparison can show (None with one episode per row)."""
    graded = [r for r in rows if r.get("error") is None and r.get("success") is not None]
    arm = graded[0].get("arm") if graded else None
    mine = [r for r in graded if r.get("arm") == arm]
    units = len({row_key(r) for r in mine})
    if not units or units == len(mine):
        return None
    floor = design_floor(units)
    return (
        f"hud statistics: {len(mine)} episodes{' per arm' if arm else ''} are {units} rows with "
        f"repeats; intervals and tests count the {units} rows (repeats of a row are averaged), "
        f"so no paired p-value below {floor:.2g} (2/2^{units}) is possible"
    )


def _rate_interval(graded: list[Row]) -> tuple[list[float] | None, str | None]:
    if not graded:
        return None, None
    return _rows_interval([(row_key(r), 1.0 if r["success"] else 0.0) for r in graded])


def _score_interval(graded: list[Row]) -> list[float] | None:
    values = [(row_key(r), float(x)) for r in graded if (x := r.get("score")) is not None]
    if not values or not all(0.0 <= v <= 1.0 for _, v in values):
        return None  # no score, or one outside [0, 1]: no bounds to build an interval on
    return _rows_interval(values)[0]


def _rows_interval(values: list[tuple[tuple[object, ...], float]]) -> tuple[list[float], str]:
    """The 95% interval of the mean of (row, value in [0, 1]) episodes, rows as the units:
    Wilson's over the rows when every row's mean is 0 or 1 (one episode per row, or repeats
    that all agreed), else the betting interval over the row means; and which it was."""
    means = list(row_means(values).values())
    if all(m in (0.0, 1.0) for m in means):
        method = "wilson" if len(means) == len(values) else "wilson (rows)"
        return list(wilson(int(sum(means)), len(means))), method
    return list(betting_interval(means)), "rows (betting)"


def task_of(row: Row) -> str:
    """The row's task: ``env/template``, shared by all its seeds, args and repeats."""
    return str(row.get("task") or f"{row.get('env')}/{row.get('task_id')}")


def _by(rows: list[Row], key: str) -> dict[str, Stats]:
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        groups[task_of(r) if key == "task" else str(r.get(key))].append(r)
    return {k: stats(v) for k, v in groups.items()}


def gate_rows(rows: Iterable[Row]) -> list[Row]:
    """Rows that count toward gates: graded and not expected to fail."""
    return [r for r in rows if r.get("outcome") in GRADED]


def aggregate(rows: list[Row]) -> Aggregate:
    return {
        "overall": stats(rows),
        "per_env": _by(rows, "env"),
        "per_task": _by(rows, "task"),
        "per_group": _by(rows, "group"),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def score_text(st: Stats) -> str:
    """The mean score, and its interval over rows when the scores are bounded in [0, 1]."""
    ci = st.get("score_ci")
    text = _num(st["mean_score"])
    return f"{text} [{ci[0]:.2f}-{ci[1]:.2f}]" if ci and st["mean_score"] is not None else text


def _table_line(name: str, st: Stats) -> tuple[str, ...]:
    ci = st.get("rate_ci", st["wilson_95"])
    return (
        printable(name),  # a row's env, task or group, maybe read back from a ledger
        str(st["episodes"]),
        _pct(st["success_rate"]),
        f"{_pct(ci[0])}-{_pct(ci[1])}" if ci else "-",
        score_text(st),
        _num(st["mean_steps"], ".1f"),
        f"{st['seconds']:.1f}s",
        str(st["errors"]),
        str(st.get("xfailed", 0)),
        str(st.get("xpassed", 0)),
        str(st.get("skipped", 0)),
    )


def format_table(rows: list[Row]) -> list[str]:
    """Per env, then each of its tasks (across seeds and repeats); then per test function;
    then overall: episodes, success and its 95% Wilson interval, mean score, mean steps,
    the rollouts' summed time (not the run's wall, which concurrency shortens), errors,
    xfailed, xpassed, skipped."""
    agg = aggregate(rows)
    header: tuple[str, ...] = ("task", "episodes", "success", "95% CI", "score (95% CI)", "steps")
    header += ("time (sum)", "errors", "xfail", "xpass", "skip")
    lines: list[tuple[str, ...]] = [header]
    rules = {0}
    for env in sorted(agg["per_env"]):
        lines.append(_table_line(env, agg["per_env"][env]))
        for key, st in sorted(agg["per_task"].items()):
            if key.split("/", 1)[0] == env:
                lines.append(_table_line(f"  {key.split('/', 1)[1]}", st))
    if len(agg["per_group"]) > 1:
        rules.add(len(lines) - 1)
        for group, st in sorted(agg["per_group"].items()):
            lines.append(_table_line(group, st))
    rules.add(len(lines) - 1)
    lines.append(_table_line("overall", agg["overall"]))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for i, line in enumerate(lines):
        cells = [line[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)]
        out.append("  ".join(cells))
        if i in rules:
            out.append("-" * len(out[-1]))
    return out


@dataclass
class Gate:
    name: str
    passed: bool
    message: str


def threshold_gate(name: str, rows: list[Row], threshold: float, mode: str) -> Gate:
    st = stats(gate_rows(rows))
    n, s = st["episodes"], st["successes"]
    if n == 0:
        return Gate(name, False, f"{name}: no graded episodes to compare with {threshold:.0%}")
    rate = s / n
    if mode == "wilson":
        lo = wilson(s, n)[0]
        ok = lo >= threshold
        how = f"Wilson 95% lower bound {lo:.1%} (rate {rate:.1%}, {s}/{n})"
        gap = threshold - lo
    else:
        ok = rate >= threshold
        how = f"success rate {rate:.1%} ({s}/{n})"
        gap = threshold - rate
    verdict = "passed" if ok else f"FAILED by {gap:.1%}"
    return Gate(name, ok, f"{name}: {how} vs required {threshold:.1%}: {verdict}")


def uncovered(name: str, rows: Sequence[Row], min_coverage: float) -> Gate | None:
    """A failed gate with no verdict when fewer than ``min_coverage`` of the attempted
    episodes of ``rows`` were scored (an error is attempted, not scored), else None: a rate
    over the episodes that happened to finish is no evidence about the policy."""
    errored = [r for r in rows if r.get("error") is not None]
    st = stats(rows)
    coverage, scored = st["coverage"], st["episodes"]
    if coverage is None or coverage >= min_coverage:
        return None
    return Gate(
        name,
        False,
        f"{name}: NO VERDICT: coverage {coverage:.0%} ({scored} scored of "
        f"{scored + len(errored)} attempted) is below --hud-min-coverage {min_coverage:.0%}; "
        f"errored: {names_of(errored)}; fix: the errors above (infrastructure, not the "
        "policy), or lower --hud-min-coverage",
    )


def baseline_gates(
    rows: list[Row],
    baseline: ResultsDocument,
    alpha: float = 0.05,
    differs: list[str] | None = None,
) -> list[Gate]:
    """Per task (env + template, across seeds and repeats) and overall: did success drop
    by more than chance explains? Each line also says the episodes per arm and the
    smallest drop the comparison could detect (80% power), and, when given, how the
    baseline's run ``differs`` from this one."""
    gates = []
    graded = gate_rows(rows)
    now = aggregate(graded)
    base_tasks = baseline.get("per_task") or {}
    pairs: list[tuple[str, Stats | dict[str, int], Stats]] = [
        ("overall", baseline.get("overall") or {}, now["overall"])
    ]
    pairs += [(k, base_tasks[k], v) for k, v in sorted(now["per_task"].items()) if k in base_tasks]
    caveat = f" (baseline differs: {'; '.join(differs)})" if differs else ""
    for name, b, c in pairs:
        nb = int(b.get("episodes", 0))
        p = two_proportion_drop(int(b.get("successes", 0)), nb, c["successes"], c["episodes"])
        ok = p >= alpha
        mine = graded if name == "overall" else [r for r in graded if task_of(r) == name]
        note = power_note(b.get("success_rate"), nb, c["episodes"], _distinct_rows(mine), alpha)
        msg = (
            f"baseline {name}: {_pct(b.get('success_rate'))} -> {_pct(c['success_rate'])} "
            f"(p={p:.3f}; {note}): " + ("within chance" if ok else "DROPPED beyond chance") + caveat
        )
        gates.append(Gate(f"baseline {name}", ok, msg))
    return gates


def _distinct_rows(rows: list[Row]) -> int:
    return len({(r.get("key"), r.get("group")) for r in rows})


def results_document(
    rows: Sequence[Row],
    *,
    meta: Mapping[str, object],
    gates: list[Gate],
    collected: int | None = None,
    run: int | None = None,
    interrupted: bool = False,
) -> ResultsDocument:
    """The results JSON. ``complete`` is False when the run was interrupted (Ctrl-C,
    ``-x``), fewer items ran than were collected, or a row was left undecided (not run for
    the budget, put off or quit: ``items.unrun`` counts them by why); such a file is no
    baseline. ``meta``'s
    fields (the plugin's and its features') stand between ``created`` and ``complete``,
    a secret in a url among them left out (``--hud-runtime=tcp://...?token=...``)."""
    rows = list(rows)
    ran = len(rows) if run is None else run
    unrun: dict[str, int] = {}
    for row in rows:
        if row.get("unrun"):
            unrun[str(row["unrun"])] = unrun.get(str(row["unrun"]), 0) + 1
    undecided = any(why != DECIDED for why in unrun)  # a row the run could not decide
    complete = not interrupted and not undecided and (collected is None or ran >= collected)
    gate_records: list[GateRecord] = [
        {"name": g.name, "passed": g.passed, "message": g.message} for g in gates
    ]
    return cast(
        ResultsDocument,
        {
            "version": 2,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **{k: redact(v) if isinstance(v, str) else v for k, v in meta.items()},
            "complete": complete,
            "interrupted": interrupted,
            "items": {"collected": collected, "run": ran, "unrun": unrun},
            **aggregate(rows),
            "gates": gate_records,
            "rollouts": rows,
        },
    )


def read_results(path: str | Path, what: str = "a results JSON") -> ResultsDocument:
    """A ``--hud-results`` file, every row and every per-task count of the right type, else
    one ValueError (a :class:`RowError` for a row) naming the file and the field."""
    path = Path(path)
    try:
        data = loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: expected {what} written by --hud-results, got {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected {what} (a JSON object), got {_shown(data)}")
    rows = data.get("rollouts", [])
    if not isinstance(rows, list):
        raise RowError(f"{path}: field 'rollouts': expected a list, got {_shown(rows)}")
    for i, row in enumerate(rows):
        check_row(row, f"{path} rollouts[{i}]")
    per_task = data.get("per_task", {})
    if not isinstance(per_task, dict):
        raise RowError(f"{path}: field 'per_task': expected an object, got {_shown(per_task)}")
    for task, counts in per_task.items():
        for name in ("episodes", "successes"):
            value = counts.get(name) if isinstance(counts, dict) else None
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
                raise RowError(
                    f"{path}: per_task[{task!r}].{name}: expected a count, got {_shown(value)}"
                )
    return cast(ResultsDocument, data)


def load_baseline(path: Path, force: bool = False) -> ResultsDocument:
    """A results JSON to compare with; an incomplete (interrupted) run is refused unless
    ``force``."""
    try:
        data = read_results(path, "a results JSON")
    except ValueError as exc:
        raise ValueError(f"--hud-baseline {exc}") from None
    if "per_task" not in data:
        raise ValueError(f"--hud-baseline {path}: no per_task section; pass a --hud-results file")
    why = incomplete_reason(data)
    if why is not None and not force:
        raise ValueError(
            f"--hud-baseline {path}: expected a complete run, got an incomplete one ({why}); "
            "fix: record the baseline again, or pass --hud-baseline-force to compare anyway"
        )
    return data
