"""A/B and sweep statistics from a session's rows. Pairs are matched by ``pair``, never run order,
so ``-n`` pairs as a serial run does. No pytest imports.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Final, Required, TypedDict, cast

from pytest_hud.evaluation.bounded import PairedScores, holm, paired_scores
from pytest_hud.evaluation.paired import PairedFields, PairedVerdict, summarize_pairs
from pytest_hud.evaluation.paired_sequential import PairedDecision
from pytest_hud.evaluation.results import (
    Aggregate,
    Row,
    aggregate,
    score_text,
    stats,
    task_of,
    unit_of,
)
from pytest_hud.plumbing.printable import printable

__all__ = [
    "OVERALL",
    "AgentBlock",
    "ArmEntry",
    "Comparison",
    "RowsTest",
    "SequentialState",
    "TaskComparison",
    "agent_blocks",
    "family_alpha",
    "format_ab_table",
    "graded",
    "metric_value",
    "paired_block",
    "pairs_of",
    "unit_pairs",
    "worse_for_the_gate",
]

OVERALL: Final = "overall"


class ArmEntry(TypedDict, total=False):
    """One arm as the results JSON lists it (``checkpoint`` when hashes were asked for)."""

    arm: Required[str]  # its letter
    spec: str
    label: str
    step: int | None
    role: str | None  # reference, candidate, or None between them
    checkpoint: dict[str, str | None]  # path, hash


class SequentialState(TypedDict, total=False):
    """A candidate's paired sequential test on one task (overall: ``saved`` alone)."""

    decision: PairedDecision | None
    pairs_used: int
    max_pairs: int
    reason: str
    saved: int  # the task's items not run, every arm's
    fixed_n: int | None  # the pairs a fixed-n McNemar design of the same power needs


#: the comparison with rows as the units (always there; decides with repeats or a score;
#: with one episode per row on success it equals the exact McNemar test)
RowsTest = PairedScores


class TaskComparison(PairedFields, total=False):
    """A candidate against the reference on one task (or overall)."""

    summary_verdict: PairedVerdict  # the fixed-n summary's, before a sequential decision
    sequential: SequentialState
    rows_test: RowsTest  # rows as the units (always there; decides with repeats or scores)
    metrics: dict[str, RowsTest]  # the other --hud-ab-metric metrics' rows tests
    decided_by: str  # "pairs (McNemar)", "rows (permutation)" or "sequential"


class Comparison(TypedDict):
    """One candidate against the reference: per task and overall."""

    reference: str
    candidate: str
    tasks: dict[str, TaskComparison]
    overall: TaskComparison


class AgentBlock(ArmEntry, Aggregate):
    """An arm with its own aggregate: the results JSON's ``agents``."""


#: (candidate letter, task) -> the task's sequential test state (see paired_block)
Sequential = Mapping[tuple[str, str], SequentialState]


def family_alpha(alpha: float, tasks: int, metrics: int = 1) -> float:
    """The level of each of a live gate's tests: a candidate is judged on every task and,
    with more than one task, overall (one task's overall is that task), on each metric, so
    each of those tests runs at ``alpha / tests`` (Bonferroni: a live test's level is fixed
    before its first pair) and the chance that a candidate as good as the reference fails
    the gate stays <= alpha."""
    tests = tasks + 1 if tasks > 1 else 1
    return alpha / (tests * max(metrics, 1))


def worse_for_the_gate(comparison: Comparison, alpha: float) -> list[str]:
    """The tasks (and ``overall``) on which a candidate counts as worse for a gate at family
    level ``alpha``. With live stopping (``--hud-gate=sequential``) each task's anytime test
    ran at :func:`family_alpha` (its level is fixed before the first pair), so its decision
    stands, else its fixed-n test at that level. Without it Holm's step-down over the tasks
    and overall decides, uniformly more powerful than that split."""
    tasks = comparison["tasks"]
    family = [*sorted(tasks.items()), (OVERALL, comparison[OVERALL])]
    if len(tasks) == 1:
        family = family[:1]  # one task: overall is the same test
    # every (task, metric) is one hypothesis; the first metric's is the summary itself
    tests: dict[str, tuple[float, bool]] = {}
    decided: dict[str, bool] = {}
    for name, summary in family:
        seq = summary.get("sequential") or {}
        if seq.get("decision") is not None:
            decided[name] = seq["decision"] == "worse"
        else:
            tests[name] = (float(summary["p_value"]), _worse(summary))
        for metric, other in sorted((summary.get("metrics") or {}).items()):
            tests[f"{name} [{metric}]"] = (float(other["p_value"]), other["verdict"] == "worse")
    live = bool(decided) or any(
        "max_pairs" in (summary.get("sequential") or {}) for _, summary in family
    )
    if live:  # each test at the split its live tests were run at
        metrics = 1 + len(comparison[OVERALL].get("metrics") or {})
        level = family_alpha(alpha, len(tasks), metrics)
        rejected = {name: p < level for name, (p, _) in tests.items()}
    else:
        rejected = holm({name: p for name, (p, _) in tests.items()}, alpha)
    worse = [name for name, is_worse in decided.items() if is_worse]
    worse += [name for name, (_, is_worse) in tests.items() if rejected[name] and is_worse]
    order = {name: i for i, (name, _) in enumerate(family)}
    worse.sort(key=lambda n: (order.get(n.split(" [")[0], 0), n))
    if len(tasks) == 1 and worse:
        worse += [OVERALL + w[len(family[0][0]) :] for w in worse]
    return worse


def _worse(summary: TaskComparison) -> bool:
    return summary.get("summary_verdict", summary["verdict"]) == "worse"


def graded(row: Mapping[str, object]) -> bool:
    return row.get("error") is None and row.get("success") is not None


def agent_blocks(rows: Sequence[Row], arms: Sequence[ArmEntry]) -> list[AgentBlock]:
    """The results JSON's ``agents``: per arm (``arm``, ``spec``, ``label``, ``step``, ...)
    its own ``overall``, ``per_env``, ``per_task`` and ``per_group``."""
    out = []
    for arm in arms:
        mine = [r for r in rows if r.get("arm") == arm["arm"]]
        block: AgentBlock = {**arm, **aggregate(mine)}
        out.append(block)
    return out


def pairs_of(
    rows: Sequence[Row], reference: str, candidate: str
) -> dict[str, list[tuple[bool, bool]]]:
    """Per task (``env/template``), the (reference succeeded, candidate succeeded) pairs
    whose two rows were both graded, sorted by pair id."""
    units = unit_pairs(rows, reference, candidate, "success")
    return {task: [(a == 1.0, b == 1.0) for _, a, b in pairs] for task, pairs in units.items()}


def unit_pairs(
    rows: Sequence[Row], reference: str, candidate: str, metric: str, max_steps: int | None = None
) -> dict[str, list[tuple[tuple[object, ...], float, float]]]:
    """Per task, (row, reference's value, candidate's value) of every pair whose two rows
    were graded (and scored, for ``score``); a row (test function x task row) is the unit
    its repeats are averaged into."""
    by_pair: dict[str, dict[str, Row]] = defaultdict(dict)
    for r in rows:
        if r.get("pair") and r.get("arm") in (reference, candidate) and graded(r):
            by_pair[str(r["pair"])][str(r["arm"])] = r
    out: dict[str, list[tuple[tuple[object, ...], float, float]]] = defaultdict(list)
    for pair in sorted(by_pair):
        both = by_pair[pair]
        if reference not in both or candidate not in both:
            continue
        a, b = both[reference], both[candidate]
        va, vb = metric_value(a, metric, max_steps), metric_value(b, metric, max_steps)
        if va is not None and vb is not None:
            out[task_of(a)].append((unit_of(a), va, vb))
    return dict(out)


def metric_value(row: Row, metric: str, max_steps: int | None = None) -> float | None:
    """A graded row's value of ``metric`` in [0, 1], higher better: success as 0/1, the
    score (None outside [0, 1]), or for ``steps`` the speed to success 1 - steps/max_steps
    (0 when it did not succeed: time to success censored at the episode's bound)."""
    if not graded(row):
        return None
    if metric == "success":
        return 1.0 if row["success"] else 0.0
    if metric == "steps":
        steps = row.get("steps")
        if not max_steps or steps is None or not row["success"]:
            return 0.0 if max_steps else None
        return max(0.0, 1.0 - min(int(steps), max_steps) / max_steps)
    score = row.get("score")
    return float(score) if score is not None and 0.0 <= float(score) <= 1.0 else None


def _summary(
    pairs: list[tuple[bool, bool]],
    units: list[tuple[tuple[object, ...], float, float]],
    metric: str,
    alpha: float,
    seq: SequentialState | None,
) -> TaskComparison:
    """One task's (or overall) comparison: the pair counts, the rows test, and the verdict
    of whichever decides (a decided sequential test, the rows test with repeats or a
    score, else McNemar on the pairs)."""
    fields = summarize_pairs(pairs, alpha=alpha)
    summary: TaskComparison = {**fields, "summary_verdict": fields["verdict"]}
    try:
        rows_test = paired_scores(units, metric=metric, alpha=alpha)
    except ValueError:  # a score outside [0, 1]: no bounds to test on
        rows_test = None
    summary["decided_by"] = "pairs (McNemar)"
    if rows_test is not None:
        summary["rows_test"] = rows_test
        if metric != "success" or rows_test["rows"] < rows_test["episodes"]:
            summary["summary_verdict"] = cast(PairedVerdict, rows_test["verdict"])
            summary["p_value"] = rows_test["p_value"]
            summary["decided_by"] = "rows (permutation)"
    summary["verdict"] = summary["summary_verdict"]
    if seq is not None:
        summary["sequential"] = seq.copy()
        if seq.get("decision") is not None:
            summary["verdict"] = cast(PairedVerdict, seq["decision"])
            summary["decided_by"] = "sequential"
    return summary


def _also(
    summary: TaskComparison,
    metric: str,
    units: list[tuple[tuple[object, ...], float, float]],
    alpha: float,
) -> None:
    """Add another metric's rows test to a comparison (not when its values are unbounded)."""
    with contextlib.suppress(ValueError):
        summary.setdefault("metrics", {})[metric] = paired_scores(units, metric=metric, alpha=alpha)


def paired_block(
    rows: Sequence[Row],
    arms: Sequence[ArmEntry],
    *,
    alpha: float,
    sequential: Sequential | None = None,
    metric: str = "success",
    max_steps: int | None = None,
    also: Sequence[str] = (),
) -> list[Comparison]:
    """The results JSON's ``paired.comparisons``: for each candidate against the reference,
    per task and overall, :class:`~pytest_hud.evaluation.paired.PairedFields`,
    the rows test (``rows_test``: rows as the units, on ``metric``), the ``verdict`` (a
    decided sequential test's, else the deciding fixed-n test's, ``decided_by``) and, with
    ``--hud-gate=sequential``, the task's ``sequential`` state (``decision``,
    ``pairs_used``, ``max_pairs``, ``reason``, ``saved``: episodes not run); each metric of
    ``also`` adds its rows test under ``metrics``."""
    reference = str(arms[0]["arm"])
    out: list[Comparison] = []
    for arm in arms[1:]:
        cand = str(arm["arm"])
        per_task = pairs_of(rows, reference, cand)
        units = unit_pairs(rows, reference, cand, metric, max_steps)
        tasks: dict[str, TaskComparison] = {}
        for task, pairs in sorted(per_task.items()):
            seq = (sequential or {}).get((cand, task))
            tasks[task] = _summary(pairs, units.get(task, []), metric, alpha, seq)
        everything = [p for pairs in per_task.values() for p in pairs]
        all_units = [u for task_units in units.values() for u in task_units]
        overall = _summary(everything, all_units, metric, alpha, None)
        for other in also:
            extra = unit_pairs(rows, reference, cand, other, max_steps)
            for task, summary in tasks.items():
                _also(summary, other, extra.get(task, []), alpha)
            _also(overall, other, [u for task_units in extra.values() for u in task_units], alpha)
        saved = sum(int(s.get("saved", 0)) for (c, _), s in (sequential or {}).items() if c == cand)
        if sequential is not None:
            overall["sequential"] = {"saved": saved}
        out.append({"reference": reference, "candidate": cand, "tasks": tasks, OVERALL: overall})
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.0f}%"


def _verdict_text(paired: TaskComparison) -> str:
    """The verdict; an undecided one adds about how many more pairs would tell its
    ``min_effect`` (:func:`~pytest_hud.evaluation.simulation.more_pairs`) when computable."""
    verdict = str(paired["verdict"])
    if verdict != "undecided" or paired.get("decided_by") == "rows (permutation)":
        return verdict  # the pairs figure is McNemar's: no estimate for a rows test
    from pytest_hud.evaluation.simulation import more_pairs

    counts = (paired["both"], paired["a_only"], paired["b_only"], paired["neither"])
    try:
        more = more_pairs(*counts, alpha=paired["alpha"], effect=paired["min_effect"])
    except (ValueError, ImportError):  # no n within reach; scipy absent
        return verdict
    if not more:
        return verdict
    effect = 100 * float(paired["min_effect"])  # what the pairs are counted for: say so
    return f"undecided: about {more} more pairs to detect a {effect:g}-point difference"


def format_ab_table(
    rows: Sequence[Row],
    arms: Sequence[ArmEntry],
    comparisons: Sequence[Comparison],
    metrics: Sequence[str] = ("success",),
) -> list[str]:
    """One table: per task, then overall, a line per arm (episodes, success and its 95%
    interval with rows as the units, and with ``score`` among ``metrics`` the mean score and
    its interval) and, on each candidate's, its paired difference from the reference with
    its interval, the discordant pairs, the deciding test's p and the verdict."""
    scored = "score" in metrics
    header: tuple[str, ...] = ("task", "arm", "agent", "episodes", "success", "95% CI")
    header += ("score (95% CI)",) if scored else ()
    header += ("vs ref", "diff CI")
    header += ("pairs", "ref only", "cand only", "p", "verdict")
    by_cand = {str(c["candidate"]): c for c in comparisons}
    tasks = sorted({task_of(r) for r in rows if r.get("arm")})
    lines: list[tuple[str, ...]] = [header]
    rules = {0}
    for task in [*tasks, OVERALL]:
        for i, arm in enumerate(arms):
            mine = [r for r in rows if r.get("arm") == arm["arm"]]
            if task != OVERALL:
                mine = [r for r in mine if task_of(r) == task]
            st = stats(mine)
            ci = st["rate_ci"]
            # a row's task, maybe read back from a ledger: shown, never obeyed by the terminal
            cells: tuple[str, ...] = (printable(task) if i == 0 else "", str(arm["arm"]))
            cells += (printable(arm["label"]),)
            cells += (str(st["episodes"]), _pct(st["success_rate"]))
            cells += (f"{_pct(ci[0])}-{_pct(ci[1])}" if ci else "-",)
            cells += (score_text(st),) if scored else ()
            comp = by_cand.get(str(arm["arm"]))
            paired = None
            if comp is not None:
                paired = comp[OVERALL] if task == OVERALL else comp["tasks"].get(task)
            if paired is None:
                cells += ("reference" if i == 0 else "-", "", "", "", "", "", "")
            else:
                lo, hi = paired["diff_ci"]
                diff = paired["diff"]
                rows_test = paired.get("rows_test")
                if rows_test is not None and paired.get("decided_by") != "pairs (McNemar)":
                    (lo, hi), diff = rows_test["diff_ci"], rows_test["diff"]  # rows as units
                seq = paired.get("sequential") or {}
                used = seq.get("pairs_used")
                count = f"{used}/{seq['max_pairs']}" if used is not None else str(paired["n_pairs"])
                cells += (_signed(diff), f"[{_signed(lo)}, {_signed(hi)}]", count)
                cells += (str(paired["a_only"]), str(paired["b_only"]))
                cells += (f"{paired['p_value']:.3g}", _verdict_text(paired))
            lines.append(cells)
        rules.add(len(lines) - 1)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    left = {0, 1, 2, len(header) - 1}
    for i, line in enumerate(lines):
        cells_out = [
            c.ljust(w) if j in left else c.rjust(w)
            for j, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        out.append("  ".join(cells_out).rstrip())
        if i in rules:
            out.append("-" * sum(w + 2 for w in widths[:-1]) + "-" * widths[-1])
    return out
