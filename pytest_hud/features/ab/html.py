"""The html report's A/B section: the arms side by side per task and a per-seed agreement grid
with discordant pairs outlined.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence

from pytest_hud.evaluation.paired_verdicts import (
    OVERALL,
    ArmEntry,
    Comparison,
    TaskComparison,
    graded,
)
from pytest_hud.evaluation.results import Row, stats, task_of

__all__ = ["arms_html"]

STYLE = """<style>
.hud-ab td.ok { background: #c8e6c9; } .hud-ab td.fail { background: #ffcdd2; }
.hud-ab td.none { background: #eee; } .hud-ab td.discordant { outline: 2px solid #333; }
.hud-ab table.hud-grid td { padding: 1px 5px; font-size: 11px; text-align: center; }
.hud-ab .better { color: #155724; font-weight: bold; } .hud-ab .worse { color: #721c24;
font-weight: bold; }
</style>"""


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.0f}%"


def _arm_cell(rows: list[Row]) -> str:
    st = stats(rows)
    ci = st["rate_ci"]
    interval = f" [{_pct(ci[0])}&ndash;{_pct(ci[1])}]" if ci else ""
    return f"<td>{_pct(st['success_rate'])} ({st['successes']}/{st['episodes']}){interval}</td>"


def _paired_cells(paired: TaskComparison | None) -> str:
    if paired is None:
        return "<td>-</td><td>-</td><td>-</td>"
    lo, hi = paired["diff_ci"]
    verdict = str(paired["verdict"])
    seq = paired.get("sequential") or {}
    if seq.get("pairs_used") is not None:
        verdict += f" ({seq['pairs_used']}/{seq['max_pairs']} pairs, {seq.get('saved', 0)} saved)"
    cls = verdict.split(" ", 1)[0]
    return (
        f"<td>{_signed(paired['diff'])} [{_signed(lo)}, {_signed(hi)}]</td>"
        f"<td>{paired['p_value']:.3g}</td>"
        f'<td class="{html.escape(cls)}">{html.escape(verdict)}</td>'
    )


def _side_by_side(
    arms: Sequence[ArmEntry], rows: list[Row], comparisons: Sequence[Comparison]
) -> str:
    ref = arms[0]["arm"]
    heads = ["task"] + [f"{a['arm']}: {html.escape(str(a['label']))}" for a in arms]
    for c in comparisons:
        cand = c["candidate"]
        heads += [f"{cand} &minus; {ref}", f"p ({cand})", f"verdict ({cand})"]
    by_arm: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        if r.get("arm"):
            by_arm[str(r["arm"])].append(r)
    tasks = sorted({task_of(r) for r in rows if r.get("arm")})
    lines = []
    for task in [*tasks, OVERALL]:
        cls = "hud-overall" if task == OVERALL else "hud-task"
        cells = [f"<td>{html.escape(task)}</td>"]
        for a in arms:
            mine = by_arm[str(a["arm"])]
            cells.append(
                _arm_cell(mine if task == OVERALL else [r for r in mine if task_of(r) == task])
            )
        for c in comparisons:
            cells.append(_paired_cells(c[OVERALL] if task == OVERALL else c["tasks"].get(task)))
        lines.append(f'<tr class="{cls}">{"".join(cells)}</tr>')
    head = "".join(f"<th>{h}</th>" for h in heads)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"


def _grid(arms: Sequence[ArmEntry], task: str, rows: list[Row]) -> str:
    """The task's pairs (columns, by pair id) x arms (lines): who succeeded on which seed."""
    cells: dict[str, dict[str, Row]] = defaultdict(dict)
    for r in rows:
        if r.get("pair") and task_of(r) == task:
            cells[str(r["pair"])][str(r.get("arm"))] = r
    pairs = sorted(cells)
    if not pairs:
        return ""

    def seed_of(pair: str) -> str:
        any_row = next(iter(cells[pair].values()))
        rep = any_row.get("rep") or 0
        return f"{any_row.get('seed')}" + (f"#{rep}" if rep else "")

    def discordant(pair: str) -> bool:
        got = [bool(r["success"]) for r in cells[pair].values() if graded(r)]
        return len(got) > 1 and len(set(got)) > 1

    head = "".join(f"<th>{html.escape(seed_of(p))}</th>" for p in pairs)
    lines = [f"<tr><th>arm \\ seed</th>{head}</tr>"]
    for a in arms:
        tds = []
        for p in pairs:
            got = cells[p].get(str(a["arm"]))
            kind = (
                "none" if got is None or not graded(got) else ("ok" if got["success"] else "fail")
            )
            mark = {"ok": "&#10003;", "fail": "&#10007;", "none": "&ndash;"}[kind]
            extra = " discordant" if discordant(p) else ""
            title = html.escape(str(got.get("outcome")) if got is not None else "not run")
            tds.append(f'<td class="{kind}{extra}" title="{title}">{mark}</td>')
        lines.append(f"<tr><th>{a['arm']}</th>{''.join(tds)}</tr>")
    return f'<h4>{html.escape(task)}</h4><table class="hud-grid">{"".join(lines)}</table>'


def arms_html(arms: Sequence[ArmEntry], rows: list[Row], comparisons: Sequence[Comparison]) -> str:
    """The whole A/B block for pytest-html's summary."""
    legend = ", ".join(
        f"{a['arm']} = {html.escape(str(a['spec']))}" + (f" ({a['role']})" if a.get("role") else "")
        for a in arms
    )
    tasks = sorted({task_of(r) for r in rows if r.get("arm")})
    grids = "".join(_grid(arms, t, rows) for t in tasks)
    return (
        f'{STYLE}<div class="hud-summary hud-ab"><h2>hud A/B: {len(arms)} agents</h2>'
        f"<p>{legend}</p><h3>Arms side by side (95% intervals; paired against "
        f"{arms[0]['arm']})</h3>{_side_by_side(arms, rows, comparisons)}"
        "<h3>Per-seed agreement (outlined: the arms disagree)</h3>"
        f"{grids}</div>"
    )
