"""``--hud-compare=RESULTS.json``: this run against a previous one, per task
(:mod:`pytest_hud.evaluation.comparison`), with ``--hud-compare-fail=DROP`` as a gate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hud._plugin.feature_api import FeatureSettings, Figure, Hud, option, path_option
from pytest_hud.evaluation import comparison as cmp
from pytest_hud.evaluation import results as rep

__all__ = ["ComparePlugin", "Settings", "enable"]


class Settings(FeatureSettings):
    compare: Path | None = path_option(
        "--hud-compare",
        "a previous results JSON: compare this run with it per task (table, PNG plot)",
        exists="pass the results JSON",
    )
    compare_fail: float | None = option(
        "--hud-compare-fail",
        "fail the session when a task dropped significantly by at least DROP points",
        parse=float,
        check=lambda v: None if v >= 0 else f"is a drop in percentage points >= 0, got {v}",
    )

    def __post_init__(self) -> None:
        if self.compare_fail is not None and self.compare is None:
            raise ValueError(
                "--hud-compare-fail needs --hud-compare=RESULTS.json to compare against"
            )


class ComparePlugin:
    """The comparison with a previous run (registered on the controller only)."""

    def __init__(self, base: Path, drop: float | None, hud: Hud) -> None:
        self.hud = hud
        self.base_path = base
        self.drop = drop
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
        new = cmp.run_from_rows(list(rows), self.hud.agent_label)
        if new.label == base.label:
            new.label = f"{new.label} (this run)"
        self.comparisons = cmp.compare([base, new], alpha=self.hud.options.alpha)
        try:
            path = self.hud.figure_path("compare")
            self.bars = cmp.write_plot([base, new], path)
            self.plot = path
        except Exception as exc:  # matplotlib missing or the file cannot be written
            self.error = f"compare plot not written: {type(exc).__name__}: {exc}"
        drop = self.drop
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


def enable(settings: Settings, hud: Hud) -> ComparePlugin | None:
    """The feature's plugin for this session (--hud-compare, on the controller), else None."""
    if settings.compare is not None and len(hud.options.agents) > 1:
        raise pytest.UsageError(
            f"--hud-compare is for one agent, got {len(hud.options.agents)} --hud-agent "
            f"({', '.join(hud.options.agent_texts)}); the arms are compared with each other "
            "in this session: drop --hud-compare"
        )
    if settings.compare is None or hud.is_worker:
        return None
    return ComparePlugin(settings.compare, settings.compare_fail, hud)
