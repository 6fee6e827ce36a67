"""``--hud-compare=RESULTS.json`` in a run: this run against a previous one, per task.

The same comparison as ``python -m pytest_hud compare`` (:mod:`pytest_hud.evaluation.compare`:
Wilson intervals, Newcombe's interval of the difference, McNemar on paired seeds else
Fisher, a verdict at ``--hud-alpha``), computed on the controller from this session's
rows at sessionfinish: the table goes to the terminal summary, the PNG
(:mod:`pytest_hud.evaluation.compare_plot`) beside the results JSON (else beside the
pytest-html report, else in ``.hud/``), and its path into the results JSON
(``compare.plot``) for the html report. ``--hud-compare-fail=DROP`` turns a significant
drop of at least DROP points in any task into a failed gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_hud._plugin.report_images import Figure
from pytest_hud._plugin.state import SessionState
from pytest_hud.evaluation import compare as cmp
from pytest_hud.evaluation import results as rep

__all__ = ["CompareMixin"]


class CompareMixin(SessionState):
    """The session's comparison work (controller only)."""

    _comparisons: list[cmp.Comparison]
    _compare_plot: Path | None
    _compare_error: str | None
    _compare_bars: int | None

    def _setup_compare(self) -> None:
        self._comparisons, self._compare_plot, self._compare_error = [], None, None
        self._compare_bars = None

    def _plot_path(self) -> Path:
        if self.options.results is not None:
            return self.options.results.with_suffix(".compare.png")
        html = getattr(self.config.option, "htmlpath", None)
        if html:
            return Path(html).with_suffix(".compare.png")
        return self.artifacts / "compare.png"

    def compare_gates(self, rows: list[dict[str, Any]]) -> list[rep.Gate]:
        """Compare, write the plot, and the drop gate when ``--hud-compare-fail`` asks."""
        if self.options.compare is None or self.is_worker:
            return []
        try:
            base = cmp.load_run(self.options.compare)
        except ValueError as exc:
            self._compare_error = str(exc)
            return [rep.Gate("compare", False, f"compare: {exc}")]
        new = cmp.run_from_rows(rows, self.agent_label)
        if new.label == base.label:
            new.label = f"{new.label} (this run)"
        self._comparisons = cmp.compare([base, new], alpha=self.options.alpha)
        try:
            from pytest_hud.evaluation.compare_plot import write_plot

            path = self._plot_path()
            self._compare_bars = write_plot([base, new], path)
            self._compare_plot = path
        except Exception as exc:  # matplotlib missing or the file cannot be written
            self._compare_error = f"compare plot not written: {type(exc).__name__}: {exc}"
        if self.options.compare_fail is None:
            return []
        dropped = cmp.drops(self._comparisons, self.options.compare_fail)
        names = ", ".join(f"{c.task} {c.diff:+.0%}" for c in dropped if c.diff is not None)
        msg = f"compare with {self.options.compare}: " + (
            f"significant drops >= {self.options.compare_fail:g} points: {names}"
            if dropped
            else f"no task dropped significantly by >= {self.options.compare_fail:g} points"
        )
        return [rep.Gate("compare", not dropped, msg)]

    def compare_meta(self) -> dict[str, Any]:
        if self.options.compare is None:
            return {}
        return {
            "compare": {
                "base": str(self.options.compare),
                "plot": None if self._compare_plot is None else str(self._compare_plot),
                "bars": self._compare_bars,  # tasks x runs
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
                    for c in self._comparisons
                ],
            }
        }

    def compare_figures(self) -> list[Figure]:
        """The plot this session wrote, for the html report (none without one)."""
        if self._compare_plot is None:
            return []
        return [Figure(self._compare_plot, f"{self.options.compare} -> this run (--hud-compare)")]

    def compare_summary(self, tr: Any) -> None:
        if not self._comparisons and self._compare_error is None:
            return
        tr.write_sep("-", f"hud compare: {self.options.compare} -> this run")
        for line in cmp.format_table(self._comparisons):
            tr.write_line(line)
        if self._compare_plot is not None:
            tr.write_line(f"hud compare plot: {self._compare_plot}")
        if self._compare_error is not None:
            tr.write_line(self._compare_error, red=True)
