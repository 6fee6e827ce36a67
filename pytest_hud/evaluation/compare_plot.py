"""The comparison PNG: per-task success rates with Wilson 95% bars per run, or against training
steps when three or more runs are labelled by step.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_hud.stats import wilson

if TYPE_CHECKING:  # compare's CLI imports this module: typing only, no cycle
    from matplotlib.figure import Figure

    from pytest_hud.evaluation.compare import Run

__all__ = ["figure", "write_plot"]


def _rate(s: int, n: int) -> tuple[float, float, float]:
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
        rates = [_rate(*run.counts(t)) for t in tasks]
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
            rates = [_rate(*c) for c in counts]
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
        pooled = [_rate(*_pooled(run, tasks)) for run in runs]
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
