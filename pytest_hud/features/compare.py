"""``--hud-compare=RESULTS.json``: this run against a previous one, per task
(:mod:`pytest_hud.evaluation.compare`), with ``--hud-compare-fail=DROP`` as a gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.options import HudOptions
from pytest_hud._plugin.report_images import Figure, figure_path
from pytest_hud.evaluation import compare as cmp
from pytest_hud.evaluation import results as rep

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["ComparePlugin", "enable"]


class ComparePlugin:
    """The comparison with a previous run (registered on the controller only)."""

    def __init__(self, config: pytest.Config, options: HudOptions, label: str, artifacts: Path):
        assert options.compare is not None
        self.config = config
        self.options = options
        self.base_path = options.compare
        self.label = label  # this run's agent label
        self.artifacts = artifacts
        self.comparisons: list[cmp.Comparison] = []
        self.plot: Path | None = None
        self.error: str | None = None
        self.bars: int | None = None

    @pytest.hookimpl
    def pytest_hud_gates(self, rows: list[rep.Row]) -> list[rep.Gate]:
        """Compare, write the plot, and the drop gate when ``--hud-compare-fail`` asks."""
        try:
            base = cmp.load_run(self.base_path)
        except ValueError as exc:
            self.error = str(exc)
            return [rep.Gate("compare", False, f"compare: {exc}")]
        new = cmp.run_from_rows(list(rows), self.label)
        if new.label == base.label:
            new.label = f"{new.label} (this run)"
        self.comparisons = cmp.compare([base, new], alpha=self.options.alpha)
        try:
            from pytest_hud.evaluation.compare import write_plot

            path = figure_path(self.config, self.options.results, self.artifacts, "compare")
            self.bars = write_plot([base, new], path)
            self.plot = path
        except Exception as exc:  # matplotlib missing or the file cannot be written
            self.error = f"compare plot not written: {type(exc).__name__}: {exc}"
        drop = self.options.compare_fail
        if drop is None:
            return []
        dropped = cmp.drops(self.comparisons, drop)
        names = ", ".join(f"{c.task} {c.diff:+.0%}" for c in dropped if c.diff is not None)
        msg = f"compare with {self.base_path}: " + (
            f"significant drops >= {drop:g} points: {names}"
            if dropped
            else f"no task dropped significantly by >= {drop:g} points"
        )
        return [rep.Gate("compare", not dropped, msg)]

    @pytest.hookimpl
    def pytest_hud_results_meta(self) -> dict[str, object]:
        return {
            "compare": {
                "base": str(self.base_path),
                "plot": None if self.plot is None else str(self.plot),
                "bars": self.bars,  # tasks x runs
                "tasks": [
                    {
                        "task": c.task,
                        "base_rate": c.base_rate,
                        "new_rate": c.new_rate,
                        "diff": c.diff,
                        "diff_ci": list(c.diff_ci),
                        "p_value": c.p_value,
                        "test": c.test,
                        "verdict": c.verdict,
                    }
                    for c in self.comparisons
                ],
            }
        }

    @pytest.hookimpl
    def pytest_hud_html_figures(self) -> list[Figure]:
        """The plot this session wrote, for the html report (none without one)."""
        if self.plot is None:
            return []
        return [Figure(self.plot, f"{self.base_path} -> this run (--hud-compare)")]

    @pytest.hookimpl
    def pytest_hud_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        tr = terminalreporter
        if not self.comparisons and self.error is None:
            return
        tr.write_sep("-", f"hud compare: {self.base_path} -> this run")
        for line in cmp.format_table(self.comparisons):
            tr.write_line(line)
        if self.plot is not None:
            tr.write_line(f"hud compare plot: {self.plot}")
        if self.error is not None:
            tr.write_line(self.error, red=True)


def enable(session: HudSession) -> object | None:
    """The feature's plugin for this session (--hud-compare, on the controller), else None."""
    o = session.options
    if o.compare is None or session.is_worker:
        return None
    return ComparePlugin(session.config, o, session.agent_label, session.artifacts)
