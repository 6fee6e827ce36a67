"""Checkpoint comparison over results JSONs, per task and overall (docs/guides/gates.md). Rates
count graded episodes, xfails included, so a comparison never drops episodes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_hud.evaluation.bounded import paired_scores
from pytest_hud.evaluation.proportions import (
    fisher_exact,
    mcnemar_exact,
    newcombe_paired,
    newcombe_unpaired,
    wilson,
)
from pytest_hud.evaluation.results import Row, read_results, unit_of
from pytest_hud.plumbing.printable import printable

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "Comparison",
    "Run",
    "compare",
    "drops",
    "figure",
    "format_table",
    "load_run",
    "run_from_rows",
    "task_label",
    "write_plot",
]

OVERALL = "overall"
#: one task's graded episodes of one run: (seed, rep, group, occurrence) -> success
Outcomes = dict[tuple[object, ...], bool]
#: one task's episodes of one run: episode key -> its row (test function, task row)
RowsOf = dict[tuple[object, ...], tuple[object, ...]]


@dataclass
class Run:
    """One results file: per task label, its graded outcomes keyed by (seed, args, rep),
    and the row (test function, task row) each episode belongs to."""

    label: str
    path: Path | None
    tasks: dict[str, Outcomes]
    rows: dict[str, RowsOf] = field(default_factory=dict)

    def counts(self, task: str) -> tuple[int, int]:
        outcomes = self.tasks.get(task, {})
        return sum(outcomes.values()), len(outcomes)


@dataclass(frozen=True)
class Comparison:
    task: str
    base: str
    new: str
    base_successes: int
    base_n: int
    new_successes: int
    new_n: int
    diff: float | None
    diff_ci: tuple[float, float]
    p_value: float
    test: str  # "mcnemar" (paired seeds), "rows (permutation)" (repeats), "fisher" or "none"
    verdict: str  # "better", "worse", "no significant change", "missing"

    @property
    def base_rate(self) -> float | None:
        return self.base_successes / self.base_n if self.base_n else None

    @property
    def new_rate(self) -> float | None:
        return self.new_successes / self.new_n if self.new_n else None


def task_label(row: Row) -> str:
    """``env/template`` plus its non-seed args (``env/template[k=v]``): rows differing
    only in seed pool into one task, other args stay separate tasks."""
    args = {k: v for k, v in (row.get("args") or {}).items() if k != "seed"}
    base = f"{row.get('env')}/{row.get('task_id')}"
    if not args:
        return base
    return (
        base
        + "["
        + ",".join(f"{k}={json.dumps(args[k], sort_keys=True)}" for k in sorted(args))
        + "]"
    )


def load_run(path: str | Path, label: str | None = None) -> Run:
    """A results JSON as written by ``--hud-results`` (or ``ledger merge --results``)."""
    path = Path(path)
    doc = read_results(path, "a --hud-results JSON")  # every row typed: one clear error
    rows = doc.get("rollouts")
    if not isinstance(rows, list):
        raise ValueError(
            f"{path}: expected a results JSON with a 'rollouts' list, got "
            f"{sorted(doc) if isinstance(doc, dict) else type(doc).__name__}; "
            "fix: pass a file written by --hud-results"
        )
    return run_from_rows(rows, label or path.stem, path)


def run_from_rows(rows: Sequence[Row], label: str, path: Path | None = None) -> Run:
    """A run from results rows (``report.hud`` rows, e.g. the current session's)."""
    tasks: dict[str, Outcomes] = defaultdict(dict)
    rows_of: dict[str, RowsOf] = defaultdict(dict)
    for i, r in enumerate(rows):
        if r.get("error") is not None or r.get("success") is None:
            continue
        outcomes = tasks[task_label(r)]
        if r.get("seed") is None:  # cannot be paired with another run's episode
            outcomes[("unseeded", i)] = bool(r["success"])
            continue
        seen = 0
        while (r.get("seed"), r.get("rep"), r.get("group"), seen) in outcomes:
            seen += 1  # the same seeded row run twice: keep both
        episode = (r.get("seed"), r.get("rep"), r.get("group"), seen)
        outcomes[episode] = bool(r["success"])
        rows_of[task_label(r)][episode] = unit_of(r)
    return Run(label, path, dict(tasks), dict(rows_of))


def _pair(base: Outcomes, new: Outcomes) -> tuple[int, ...] | None:
    """(a, b, c, d) when both ran the same seeded episodes, else None."""
    if not base or base.keys() != new.keys() or any(k[0] == "unseeded" for k in base):
        return None
    a = sum(base[k] and new[k] for k in base)
    b = sum(base[k] and not new[k] for k in base)
    c = sum(new[k] and not base[k] for k in base)
    return a, b, c, len(base) - a - b - c


def _compare(
    task: str,
    base: Run,
    new: Run,
    outcomes: tuple[Outcomes, Outcomes],
    alpha: float,
    row_of: RowsOf | None = None,
) -> Comparison:
    """One task's (or the pooled) comparison: paired on seeds when both ran the same ones
    (exact McNemar; rows as the units, a permutation test on row means, when a row ran
    repeats), else unpaired (Fisher)."""
    bo, no = outcomes
    s1, n1, s2, n2 = sum(bo.values()), len(bo), sum(no.values()), len(no)
    if not n1 or not n2:
        return Comparison(
            task, base.label, new.label, s1, n1, s2, n2, None, (-1.0, 1.0), 1.0, "none", "missing"
        )
    pairs = _pair(bo, no)
    if row_of is not None and any(r[-1] is None for r in row_of.values()):
        row_of = None  # rows written without their key: episodes stay the units
    rows = {row_of.get(k, k) for k in bo} if row_of is not None else set(bo)
    if pairs is not None and len(rows) < len(bo):
        units = [(row_of.get(k, k) if row_of else k, float(bo[k]), float(no[k])) for k in bo]
        rows_test = paired_scores(units, metric="success", alpha=alpha)
        lo, hi = rows_test["diff_ci"]
        ci, p, test = (lo, hi), rows_test["p_value"], "rows (permutation)"
    elif pairs is not None:
        a, b, c, d = pairs
        ci, p, test = newcombe_paired(a, b, c, d), mcnemar_exact(b, c), "mcnemar"
    else:
        ci, p, test = newcombe_unpaired(s1, n1, s2, n2), fisher_exact(s1, n1, s2, n2), "fisher"
    diff = s2 / n2 - s1 / n1
    verdict = "no significant change"
    if p < alpha and diff != 0:
        verdict = "better" if diff > 0 else "worse"
    return Comparison(task, base.label, new.label, s1, n1, s2, n2, diff, ci, p, test, verdict)


def compare(runs: Sequence[Run], alpha: float = 0.05) -> list[Comparison]:
    """Each later run against the first, per task (union of both runs' tasks), then
    overall (all tasks pooled, paired only where every task pairs)."""
    if len(runs) < 2:
        raise ValueError(f"expected a baseline and at least one run to compare, got {len(runs)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha}")
    base, out = runs[0], []
    for new in runs[1:]:
        for task in sorted(set(base.tasks) | set(new.tasks)):
            pair = (base.tasks.get(task, {}), new.tasks.get(task, {}))
            out.append(_compare(task, base, new, pair, alpha, base.rows.get(task)))
        pooled = tuple(
            {(t, *k): v for t, ep in run.tasks.items() for k, v in ep.items()}
            for run in (base, new)
        )
        row_of = {(t, *k): (t, *r) for t, eps in base.rows.items() for k, r in eps.items()}
        out.append(_compare(OVERALL, base, new, pooled, alpha, row_of))  # type: ignore[arg-type]
    return out


def drops(comparisons: Sequence[Comparison], points: float) -> list[Comparison]:
    """Tasks (not the pooled row) that got significantly worse by at least ``points`` pp."""
    return [
        c
        for c in comparisons
        if c.task != OVERALL
        and c.verdict == "worse"
        and c.diff is not None
        and -c.diff * 100 >= points - 1e-9
    ]


def _rate(s: int, n: int) -> str:
    if not n:
        return "-"
    lo, hi = wilson(s, n)
    return f"{s / n:6.1%} [{lo:.0%}-{hi:.0%}] ({s}/{n})"


def format_table(comparisons: Sequence[Comparison]) -> list[str]:
    head = ("task", "base", "new", "diff [95% CI]", "p", "test", "verdict")
    lines: list[tuple[str, ...]] = []
    for c in comparisons:
        diff = (
            "-" if c.diff is None else f"{c.diff:+.1%} [{c.diff_ci[0]:+.0%}, {c.diff_ci[1]:+.0%}]"
        )
        lines.append(
            (
                printable(c.task),  # labels from results files: shown, never obeyed
                _rate(c.base_successes, c.base_n),
                _rate(c.new_successes, c.new_n),
                diff,
                f"{c.p_value:.3g}",
                c.test,
                c.verdict,
            )
        )
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]
    out, current = [], None
    for c, line in zip(comparisons, lines, strict=True):
        if (c.base, c.new) != current:
            current = (c.base, c.new)
            out += [
                "",
                printable(f"{c.base} -> {c.new}"),
                "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
            ]
        out.append("  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())
    return out[1:]


# -- the comparison PNG: per-task success rates with Wilson 95% bars per run, or against
# training steps when three or more runs are labelled by step --------------------------


def _bar(s: int, n: int) -> tuple[float, float, float]:
    """rate and its error-bar lengths below/above (zeros without episodes)."""
    if not n:
        return 0.0, 0.0, 0.0
    lo, hi = wilson(s, n)  # n/n gives hi a hair below 1 in floating point: clamp at 0
    return s / n, max(0.0, s / n - lo), max(0.0, hi - s / n)


def _pooled(run: Run, tasks: Sequence[str]) -> tuple[int, int]:
    counts = [run.counts(t) for t in tasks]
    return sum(s for s, _ in counts), sum(n for _, n in counts)


def _steps(runs: Sequence[Run]) -> list[float] | None:
    """The runs' labels as training steps, when every one is a number."""
    try:
        return [float(run.label) for run in runs]
    except ValueError:
        return None


def figure(runs: Sequence[Run]) -> Figure:
    """The comparison figure; ``figure.axes[0]`` holds one bar per (task, run)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise RuntimeError(
            f"the comparison plot needs matplotlib; got {exc}; fix: pip install 'pytest-hud[stats]'"
        ) from None
    tasks = sorted({t for run in runs for t in run.tasks})
    trend = len(runs) >= 3
    fig = Figure(
        figsize=(max(6.0, 1.2 * len(tasks) * max(1, len(runs)) / 2 + 2), 8 if trend else 4.5)
    )
    bars = fig.add_subplot(2 if trend else 1, 1, 1)
    width = 0.8 / len(runs)
    colours = [f"C{i % 10}" for i in range(len(runs))]
    for i, run in enumerate(runs):
        rates = [_bar(*run.counts(t)) for t in tasks]
        xs = [j + (i - (len(runs) - 1) / 2) * width for j in range(len(tasks))]
        bars.bar(
            xs,
            [r[0] for r in rates],
            width,
            yerr=[[r[1] for r in rates], [r[2] for r in rates]],
            capsize=3,
            color=colours[i],
            label=run.label,
        )
    bars.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right", fontsize=8)
    bars.set_ylim(0, 1.05)
    bars.set_ylabel("success rate (Wilson 95%)")
    bars.legend(fontsize=8)
    if trend:
        line = fig.add_subplot(2, 1, 2)
        steps = _steps(runs)
        index = steps if steps is not None else list(range(len(runs)))
        for j, task in enumerate(tasks):
            counts = [run.counts(task) for run in runs]
            rates = [_bar(*c) for c in counts]
            line.errorbar(
                index,
                [r[0] if n else float("nan") for r, (_, n) in zip(rates, counts, strict=True)],
                yerr=[[r[1] for r in rates], [r[2] for r in rates]],
                marker="o",
                color=f"C{j % 10}",
                alpha=0.5,
                capsize=2,
                label=task,
            )
        pooled = [_bar(*_pooled(run, tasks)) for run in runs]
        line.errorbar(
            index,
            [p[0] for p in pooled],
            yerr=[[p[1] for p in pooled], [p[2] for p in pooled]],
            color="black",
            linewidth=2,
            capsize=4,
            label="all tasks",
        )
        line.set_xticks(index, [run.label for run in runs], fontsize=8)
        line.set_xlabel("training step" if steps is not None else "run (in the order given)")
        line.set_ylabel("success rate")
        line.set_ylim(0, 1.05)
        line.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def write_plot(runs: Sequence[Run], path: str | Path) -> int:
    """Write the PNG; returns the number of rate bars drawn (tasks x runs)."""
    fig = figure(runs)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return sum(len(c) for c in fig.axes[0].containers if hasattr(c, "patches"))
