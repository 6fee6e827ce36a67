"""The html report's episode gallery: every recorded animation visible at once, a
grid per task with failures first, each frame linking to its row in the results table
(pytest-html names each row's ``tbody`` by node id)."""

from __future__ import annotations

import base64
import html
import json
from collections import defaultdict
from pathlib import Path

from pytest_hud._plugin.html_summary import task_name
from pytest_hud._plugin.video import embeddable_gif
from pytest_hud.evaluation.results import Row

__all__ = ["gallery_html", "row_anchor"]


def row_anchor(row: Row) -> str:
    """pytest-html's id of the row's ``tbody``: the node id, ``::setup`` for a setup error."""
    nodeid = str(row.get("nodeid", ""))
    return nodeid + "::setup" if row.get("outcome") == "error" else nodeid


def _label(row: Row) -> str:
    args = row.get("args") or {}
    shown = ", ".join(f"{k}={v}" for k, v in args.items()) or "no args"
    rep = row.get("rep") or 0
    return f"{shown}" + (f" #{rep}" if rep else "")


def _figure(row: Row, gif: bytes) -> str:
    data = base64.b64encode(gif).decode()
    ok = bool(row.get("success"))
    verdict = "success" if ok else "failed"
    steps = row.get("steps")
    caption = f"{verdict} &middot; {html.escape(_label(row))}" + (
        f" &middot; {html.escape(str(steps))} steps" if steps is not None else ""
    )
    target = html.escape(json.dumps(row_anchor(row)))
    cls = "ok" if ok else "fail"
    return (
        f'<figure class="{cls}"><a href="#" title="{html.escape(row_anchor(row))}"'
        f' onclick="hudGoto({target}); return false;">'
        f'<img alt="episode" src="data:image/gif;base64,{data}"></a>'
        f"<figcaption>{caption}</figcaption></figure>"
    )


def gallery_html(rows: list[Row], videos: Path) -> str:
    """A grid per task of every row with an animation (a GIF under the session's
    ``videos`` folder, nothing else); failures first in each task."""
    by_task: dict[str, list[tuple[Row, bytes]]] = defaultdict(list)
    for row in rows:
        gif = embeddable_gif(row.get("video"), videos)
        if gif is not None:
            by_task[task_name(row)].append((row, gif))
    if not by_task:
        return ""
    parts = ["<h3>Episodes (failures first; click one to see its row)</h3>"]
    parts.append('<div class="hud-gallery">')
    for key in sorted(by_task):
        mine = sorted(
            by_task[key], key=lambda rg: (bool(rg[0].get("success")), str(rg[0].get("nodeid", "")))
        )
        figures = "".join(_figure(r, gif) for r, gif in mine)
        parts.append(f'<h4>{html.escape(key)}</h4><div class="hud-task">{figures}</div>')
    parts.append("</div>")
    return "".join(parts)
