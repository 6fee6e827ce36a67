"""pytest-html: the per-item extras (episode animation, dataset link) and the table's
columns and summary. Registered only when pytest-html is active."""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hud.evaluation import results as rep

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["HtmlHooks"]


def _html_extras(row: dict[str, Any], merged_root: str | None = None) -> list[dict[str, Any]]:
    try:
        from pytest_html import extras
    except ImportError:
        return []
    out = []
    video = row.get("video")
    if video and os.path.exists(video):
        data = base64.b64encode(Path(video).read_bytes()).decode()
        out.append(extras.image(data, name="episode", mime_type="image/gif", extension="gif"))
    dataset = row.get("dataset")
    if dataset and merged_root is not None:  # an xdist worker: the index changes at the merge
        out.append(extras.url(merged_root, name="dataset (episode index: --hud-results)"))
    elif dataset:
        name = f"dataset episode {dataset.get('episode_index')}"
        out.append(extras.url(str(dataset.get("root", "")), name=name))
    return out


class HtmlHooks:
    """pytest-html columns and summary (registered only when pytest-html is active)."""

    COLUMNS = ("Task", "Agent", "Score", "Success", "Steps", "Seconds")

    def __init__(self, plugin: HudSession) -> None:
        self.plugin = plugin

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells[2:2] = [f'<th class="sortable" data-column-type="hud">{c}</th>' for c in self.COLUMNS]

    def pytest_html_results_table_row(self, report: Any, cells: list[str]) -> None:
        row = getattr(report, "hud", None) or {}

        def fmt(v: Any) -> str:
            if isinstance(v, float):
                return f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}"
            return "" if v is None else str(v)

        values = [
            row.get("key"),
            row.get("agent"),
            row.get("score"),
            row.get("success"),
            row.get("steps"),
            row.get("duration"),
        ]
        cells[2:2] = [f"<td>{html.escape(fmt(v))}</td>" for v in values]

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str]
    ) -> None:
        rows = list(self.plugin.rows.values())
        if not rows:
            return
        lines = rep.format_table(rows)
        gates = "".join(
            f"<p>{'PASSED' if g.passed else 'FAILED'}: {html.escape(g.message)}</p>"
            for g in self.plugin.gates or self.plugin._gates(rows)
        )
        prefix.append(
            f"<h2>hud: {html.escape(self.plugin.agent_label)}</h2>"
            f"<pre>{html.escape(chr(10).join(lines))}</pre>{gates}"
        )
