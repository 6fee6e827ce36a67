"""The html report's summary tables, gate verdicts and per-task SVG; plain HTML and a little
script, so a self-contained report needs nothing else.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence

from pytest_hud.evaluation import results as rep
from pytest_hud.evaluation.results import Gate, Row

__all__ = ["STYLE", "per_task", "success_plot_svg", "summary_html", "task_name"]

STYLE = """<style>
.hud-summary, .hud-summary td, .hud-summary th, .hud-summary h3, .hud-summary h4,
.hud-summary p, .hud-summary figcaption { color: #222; }
.hud-summary table { border-collapse: collapse; margin: 8px 0 12px; font-size: 13px; }
.hud-summary th, .hud-summary td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
.hud-summary th { background: #eef; cursor: pointer; user-select: none; }
.hud-summary td:first-child, .hud-summary th:first-child { text-align: left; }
.hud-summary tr.hud-env td { font-weight: bold; background: #f6f6f6; }
.hud-summary tr.hud-overall td { font-weight: bold; border-top: 2px solid #888; }
.hud-gate { margin: 2px 0; padding: 3px 8px; font-weight: bold; border-radius: 3px; }
.hud-gate.pass { color: #155724; background: #d4edda; }
.hud-gate.fail { color: #721c24; background: #f8d7da; }
.hud-gallery { display: flex; flex-direction: column; gap: 8px; }
.hud-gallery .hud-task { display: flex; flex-wrap: wrap; gap: 6px; align-items: flex-start; }
.hud-gallery h4 { margin: 6px 0 2px; }
.hud-gallery figure { margin: 0; border: 3px solid #ccc; border-radius: 4px; width: 136px; }
.hud-gallery figure.ok { border-color: #2e7d32; }
.hud-gallery figure.fail { border-color: #c62828; }
.hud-gallery img { width: 130px; display: block; }
.hud-gallery figcaption { font-size: 11px; padding: 1px 3px; }
</style>"""

SCRIPT = """<script>
function hudSort(th) {
  const table = th.closest('table'), col = [...th.parentNode.children].indexOf(th);
  const asc = th.dataset.asc !== '1'; th.dataset.asc = asc ? '1' : '0';
  const body = table.tBodies[0], rows = [...body.rows];
  const val = (r) => { const c = r.cells[col]; const v = c.dataset.sort ?? c.textContent;
    const n = parseFloat(v); return isNaN(n) ? v : n; };
  rows.sort((a, b) => { const x = val(a), y = val(b);
    return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); });
  rows.forEach((r) => body.appendChild(r));
}
function hudFilter() {
  const env = document.getElementById('hud-env-filter').value;
  document.querySelectorAll('#results-table tbody').forEach((tb) => {
    const cell = tb.querySelector('.col-hudEnv');
    tb.style.display = (!env || !cell || cell.textContent === env) ? '' : 'none';
  });
}
function hudGoto(id) {
  const el = document.getElementById(id); if (el) { el.style.display = '';
    el.scrollIntoView({block: 'center'}); el.style.outline = '3px solid #f90'; }
}
window.addEventListener('load', () => {
  const t = document.getElementById('results-table');
  if (t) new MutationObserver(hudFilter).observe(t, {childList: true, subtree: true});
});
</script>"""

COLUMNS = (
    "task",
    "episodes",
    "successes",
    "rate",
    "95% Wilson",
    "mean score (95% CI)",
    "mean steps",
    "errors",
    "xfail",
    "skip",
)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _outcomes(rows: list[Row], outcome: str) -> int:
    return sum(1 for r in rows if r.get("outcome") == outcome)


def _line(name: str, st: rep.Stats, rows: list[Row], cls: str) -> str:
    ci = st.get("rate_ci") or st.get("wilson_95")
    rate = st.get("success_rate")
    cells = [
        (html.escape(name), name),
        (str(st["episodes"]), st["episodes"]),
        (str(st["successes"]), st["successes"]),
        (_pct(rate), -1 if rate is None else rate),
        (f"{_pct(ci[0])}&ndash;{_pct(ci[1])}" if ci else "-", -1 if not ci else ci[0]),
        (rep.score_text(st), st.get("mean_score") or 0),
        (_num(st.get("mean_steps"), ".1f"), st.get("mean_steps") or 0),
        (str(st["errors"]), st["errors"]),
        (str(_outcomes(rows, "xfailed") + _outcomes(rows, "xpassed")), 0),
        (str(_outcomes(rows, "skipped")), 0),
    ]
    tds = "".join(f'<td data-sort="{html.escape(str(s))}">{t}</td>' for t, s in cells)
    return f'<tr class="{cls}">{tds}</tr>'


def task_name(row: Row) -> str:
    """A task as a researcher counts it: env and template, across seeds and repeats."""
    return f"{row.get('env')}/{row.get('task_id')}"


def per_task(rows: list[Row]) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[task_name(row)].append(row)
    return dict(groups)


def _table(rows: list[Row]) -> str:
    agg = rep.aggregate(rows)
    heads = "".join(f'<th onclick="hudSort(this)">{c}</th>' for c in COLUMNS)
    tasks = per_task(rows)
    lines = []
    for env in sorted(agg["per_env"]):
        mine = [r for r in rows if str(r.get("env")) == env]
        lines.append(_line(env, agg["per_env"][env], mine, "hud-env"))
        for name, task_rows in sorted(tasks.items()):
            if str(task_rows[0].get("env")) == env:
                lines.append(_line(name, rep.stats(task_rows), task_rows, "hud-task"))
    overall = _line("overall", agg["overall"], rows, "hud-overall")
    return (
        f'<table id="hud-summary-table"><thead><tr>{heads}</tr></thead>'
        f"<tbody>{''.join(lines)}</tbody><tfoot>{overall}</tfoot></table>"
    )


def _gates(gates: Sequence[Gate]) -> str:
    return "".join(
        f'<p class="hud-gate {"pass" if g.passed else "fail"}">'
        f"{'PASSED' if g.passed else 'FAILED'} {html.escape(g.message)}</p>"
        for g in gates
    )


def _env_filter(rows: list[Row]) -> str:
    envs = sorted({str(r.get("env")) for r in rows})
    options = "".join(f'<option value="{html.escape(e)}">{html.escape(e)}</option>' for e in envs)
    return (
        '<p>Results table: env <select id="hud-env-filter" onchange="hudFilter()">'
        f'<option value="">all</option>{options}</select></p>'
    )


def success_plot_svg(rows: list[Row]) -> str:
    """Each task's success rate (dot) and 95% Wilson interval (bar), 0-100%."""
    stats = {name: rep.stats(mine) for name, mine in per_task(rows).items()}
    tasks = [(k, st) for k, st in sorted(stats.items()) if st["episodes"]]
    if not tasks:
        return ""
    label_w, plot_w, row_h, top = 220, 420, 22, 24
    height = top + row_h * len(tasks) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 80}" '
        f'height="{height}" font-family="sans-serif" font-size="12" role="img" '
        'aria-label="success rate per task with its 95% Wilson interval">'
    ]
    for pct in (0, 25, 50, 75, 100):
        x = label_w + plot_w * pct / 100
        parts.append(
            f'<line x1="{x}" y1="{top - 6}" x2="{x}" y2="{height - 8}" stroke="#ddd"/>'
            f'<text x="{x}" y="{top - 10}" text-anchor="middle" fill="#666">{pct}%</text>'
        )
    for i, (key, st) in enumerate(tasks):
        y = top + row_h * i + row_h / 2
        ci, rate = st["wilson_95"], st["success_rate"]
        if ci is None or rate is None:  # no graded episode: not in tasks (see above)
            continue
        lo, hi = ci
        x0, x1, xr = (label_w + plot_w * v for v in (lo, hi, rate))
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 4}" text-anchor="end">{html.escape(key)}</text>'
            f'<line x1="{x0:.1f}" y1="{y}" x2="{x1:.1f}" y2="{y}" stroke="#1565c0" '
            'stroke-width="4" stroke-linecap="round" opacity="0.45"/>'
            f'<circle cx="{xr:.1f}" cy="{y}" r="5" fill="#1565c0"/>'
            f'<text x="{label_w + plot_w + 8}" y="{y + 4}" fill="#333">'
            f"{st['successes']}/{st['episodes']}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def summary_html(title: str, rows: list[Row], gates: Sequence[Gate], gallery: str) -> str:
    """The whole hud block for pytest-html's summary ``prefix``."""
    return (
        f'{STYLE}{SCRIPT}<div class="hud-summary"><h2>hud: {html.escape(title)}</h2>'
        f"{_gates(gates)}{_table(rows)}"
        f"<h3>Success per task (95% Wilson interval)</h3>{success_plot_svg(rows)}"
        f"{_env_filter(rows)}{gallery}</div>"
    )
