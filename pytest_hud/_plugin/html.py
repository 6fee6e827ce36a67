"""pytest-html: the per-item extras (episode animation, dataset link) and the table's
columns and summary. Registered only when pytest-html is active."""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hud._plugin.html_gallery import gallery_html
from pytest_hud._plugin.html_summary import summary_html
from pytest_hud._plugin.report_images import Figure, figures_html
from pytest_hud._plugin.video import embeddable_gif
from pytest_hud.evaluation.results import Gate, Row

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["HtmlHooks", "html_extras", "success_cell"]


def html_extras(row: Row, videos: Path, link: str | None = None) -> list[dict[str, str]]:
    """An item's pytest-html extras: the episode animation (a GIF under the session's
    ``videos`` folder, nothing else) and the dataset episode."""
    try:
        from pytest_html import extras
    except ImportError:
        return []
    out = []
    gif = embeddable_gif(row.get("video"), videos)
    if gif is not None:
        data = base64.b64encode(gif).decode()
        out.append(extras.image(data, name="episode", mime_type="image/gif", extension="gif"))
    dataset = row.get("dataset")
    if dataset and link is not None:  # an xdist worker: the index changes at the merge
        out.append(extras.url(link, name="dataset (episode index: --hud-results)"))
    elif dataset:
        name = f"dataset episode {dataset.get('episode_index')}"
        out.append(extras.url(str(dataset.get("root", "")), name=name))
    return out


def success_cell(row: Row) -> str:
    """The episode's success, consistent with the row's verdict: a test that passes with
    a failed episode is one whose body does not assert success (it checks something
    else, e.g. the episode's length), and the cell says so."""
    success = row.get("success")
    if success is None:
        return "-"
    if success:
        return "yes"
    if row.get("outcome") == "passed":
        return "no (not asserted by the test)"
    return "no"


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}"
    return "" if v is None else str(v)


class HtmlHooks:
    """pytest-html columns and summary (registered only when pytest-html is active)."""

    COLUMNS = (
        ("Env", "hudEnv"),
        ("Task", "hudTask"),
        ("Args", "hudArgs"),
        ("Agent", "hudAgent"),
        ("Success", "hudSuccess"),
        ("Score", "hudScore"),
        ("Steps", "hudSteps"),
        ("Seconds", "hudSeconds"),
    )

    def __init__(self, plugin: HudSession, gates: Callable[[list[Row]], list[Gate]]) -> None:
        self.plugin = plugin
        self.gates = gates  # the session's gates of some rows (the reporter's)

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells[2:2] = [
            f'<th class="sortable" data-column-type="{col}">{name}</th>'
            for name, col in self.COLUMNS
        ]

    def pytest_html_results_table_row(self, report: object, cells: list[str]) -> None:
        row: Row | dict[str, Any] = getattr(report, "hud", None) or {}
        args = row.get("args") or {}
        values = [
            _fmt(row.get("env")),
            _fmt(row.get("task_id") or row.get("key")),  # its args are the Args cell
            ", ".join(f"{k}={v}" for k, v in args.items()),
            _fmt(row.get("agent")),
            success_cell(row) if row else "",  # type: ignore[arg-type]
            _fmt(row.get("score")),
            _fmt(row.get("steps")),
            _fmt(row.get("duration")),
        ]
        cells[2:2] = [
            f'<td class="col-{col}">{html.escape(v)}</td>'
            for (_, col), v in zip(self.COLUMNS, values, strict=True)
        ]

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str]
    ) -> None:
        rows = list(self.plugin.rows.values())
        hook = self.plugin.config.hook
        for sections in reversed(
            hook.pytest_hud_html_sections(config=self.plugin.config, rows=rows)
        ):
            prefix.extend(sections)  # features' (the A/B's side by side) before the table
        if rows:
            gates = self.plugin.gates or self.gates(rows)
            title = self.plugin.agent_label
            if self.plugin.arms:  # several agents: side by side above, all pooled here
                title = f"all {len(self.plugin.arms)} agents pooled"
            prefix.append(summary_html(title, rows, gates, gallery_html(rows, self.plugin.videos)))
        figures = [  # asked for by name: shown even in a session without hud rows
            *(f for group in reversed(hook.pytest_hud_html_figures(config=self.plugin.config))
              for f in group),
            *map(Figure.of, self.plugin.options.report_images),
        ]  # fmt: skip
        prefix.append(figures_html(figures, getattr(self.plugin.config.option, "htmlpath", None)))
