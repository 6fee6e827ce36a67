"""The watcher's html report: success vs training step (inline SVG), the best checkpoint so far,
and every evaluated checkpoint with its links.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_hud.evaluation.durable import write_atomically

__all__ = ["best", "render", "write_report"]

_COLOURS = ["#222222", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
            "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]  # fmt: skip
W, H, LEFT, RIGHT, TOP, BOTTOM = 760, 340, 56, 200, 16, 44


def _rate(st: Mapping[str, object]) -> float | None:
    value = st.get("success_rate")
    return float(value) if isinstance(value, int | float) else None


def best(entries: Mapping[int, Mapping[str, Any]]) -> int | None:
    """The step with the highest overall success rate (ties: the higher Wilson lower
    bound, then the later step); None before any graded episode."""
    scored = []
    for step, e in entries.items():
        overall = e.get("overall") or {}
        rate = _rate(overall)
        if rate is not None:
            lo = (overall.get("wilson_95") or [0.0, 0.0])[0]
            scored.append((rate, lo, step))
    return max(scored)[2] if scored else None


def _series(entries: Mapping[int, Mapping[str, Any]]) -> dict[str, list[tuple[int, Any]]]:
    out: dict[str, list[tuple[int, object]]] = {"overall": []}
    for step in sorted(entries):
        e = entries[step]
        out["overall"].append((step, e.get("overall") or {}))
        for task, st in sorted((e.get("per_task") or {}).items()):
            out.setdefault(task, []).append((step, st))
    return out


def _svg(entries: Mapping[int, Mapping[str, object]]) -> str:
    steps = sorted(entries)
    lo_x, hi_x = (steps[0], steps[-1]) if steps else (0, 1)
    span = max(hi_x - lo_x, 1)
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    series = _series(entries)
    dodge = min(6.0, plot_w / max(len(steps), 1) / (len(series) + 1))

    def x(step: float, i: float) -> float:
        base = LEFT + plot_w / 2 if len(steps) < 2 else LEFT + (step - lo_x) / span * plot_w
        return base + (i - (len(series) - 1) / 2) * dodge

    def y(v: float) -> float:
        return TOP + (1 - v) * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             'font-family="sans-serif" font-size="11" role="img" '
             'aria-label="success rate vs training step">']  # fmt: skip
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(tick):.1f}" '
                     f'y2="{y(tick):.1f}" stroke="#ddd"/><text x="{LEFT - 6}" '
                     f'y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.2f}</text>')  # fmt: skip
    for step in steps:
        parts.append(f'<text x="{x(step, (len(series) - 1) / 2):.1f}" y="{TOP + plot_h + 16}" '
                     f'text-anchor="middle">{step}</text>')  # fmt: skip
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{H - 6}" text-anchor="middle">'
                 "training step</text>")  # fmt: skip
    for i, (name, points) in enumerate(series.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        xy = [(x(s, i), y(r)) for s, st in points if (r := _rate(st)) is not None]
        if len(xy) > 1:
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in xy)
            width = 2.5 if name == "overall" else 1.5
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="{width}" '
                         f'points="{path}"/>')  # fmt: skip
        for s, st in points:
            rate, interval = _rate(st), st.get("wilson_95")
            if rate is None:
                continue
            cx = x(s, i)
            if interval:
                parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(interval[0]):.1f}" '
                             f'y2="{y(interval[1]):.1f}" stroke="{colour}"/>')  # fmt: skip
            title = f"{name} @ {s}: {st.get('successes')}/{st.get('episodes')}"
            parts.append(f'<circle cx="{cx:.1f}" cy="{y(rate):.1f}" r="3" fill="{colour}">'
                         f"<title>{html.escape(title)}</title></circle>")  # fmt: skip
        ly = TOP + 14 * i + 6
        parts.append(f'<rect x="{W - RIGHT + 12}" y="{ly - 8}" width="10" height="10" '
                     f'fill="{colour}"/><text x="{W - RIGHT + 28}" y="{ly + 1}">'
                     f"{html.escape(name)}</text>")  # fmt: skip
    parts.append("</svg>")
    return "\n".join(parts)


def _cell(st: Mapping[str, Any] | None) -> str:
    if not st or not st.get("episodes"):
        return "<td>-</td>"
    interval = st.get("wilson_95") or [0.0, 0.0]
    errors = f", {st['errors']} error(s)" if st.get("errors") else ""
    return (f"<td>{st.get('successes')}/{st.get('episodes')} "
            f"[{interval[0]:.2f}, {interval[1]:.2f}]{errors}</td>")  # fmt: skip


def render(entries: Mapping[int, Mapping[str, Any]], run: Path, out: Path) -> str:
    """The page for the index ``entries`` (step -> index line) of the watched ``run``."""
    top = best(entries)
    tasks = sorted({t for e in entries.values() for t in e.get("per_task") or {}})
    if top is None:
        headline = "<p>No checkpoint evaluated yet.</p>"
    else:
        o = entries[top].get("overall") or {}
        interval = o.get("wilson_95") or [0.0, 0.0]
        headline = (f"<p class=best>Best checkpoint so far: <b>step {top}</b> "
                    f"({html.escape(str(entries[top].get('checkpoint')))}): {o.get('successes')}"
                    f"/{o.get('episodes')} [{interval[0]:.2f}, {interval[1]:.2f}]</p>")  # fmt: skip
    head = "".join(f"<th>{html.escape(t)}</th>" for t in ["step", "overall", *tasks])
    rows = []
    for step in sorted(entries):
        e = entries[step]
        cells = _cell(e.get("overall")) + "".join(_cell((e.get("per_task") or {}).get(t))
                                                  for t in tasks)  # fmt: skip
        links = " ".join(f'<a href="{html.escape(_rel(Path(p), out))}">{name}</a>'
                         for name, p in (("results", e.get("results")), ("log", e.get("log")))
                         if p)  # fmt: skip
        mark = ' class="top"' if step == top else ""
        rows.append(f"<tr{mark}><td>{step}</td>{cells}<td>{links}</td></tr>")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>pytest-hud watch: {html.escape(run.name)}</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}} tr.top{{background:#e8f5e9}}
.best{{font-size:1.1em}}</style></head><body>
<h1>Success vs training step</h1>
<p>Run: {html.escape(str(run))}. Wilson 95% intervals; {len(entries)} checkpoint(s) evaluated.</p>
{headline}
{_svg(entries)}
<table><tr>{head}<th></th></tr>
{"".join(rows)}
</table></body></html>
"""


def _rel(path: Path, out: Path) -> str:
    try:
        return str(path.resolve().relative_to(out.parent.resolve()))
    except ValueError:
        return path.resolve().as_uri()


def write_report(entries: Mapping[int, Mapping[str, object]], run: Path, out: Path) -> None:
    write_atomically(out, render(entries, run, out), what="watch report")
