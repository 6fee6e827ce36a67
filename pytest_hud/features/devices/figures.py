"""The model servers' figures as the session reports them: one block in the results JSON
(``devices``), lines under the terminal table, a section of the html report. Pure: no pytest.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["html_section", "server_line", "terminal_lines"]


def _share(value: object) -> str:
    return f"{100 * float(value):.0f}%" if isinstance(value, int | float) else "-"


def server_line(server: Mapping[str, Any]) -> str:
    """One server's figures in a line: requests, forwards, mean width, forward time, busy."""
    head = f"{server['spec']} on {server['device']} (pid {server['pid']})"
    if server.get("died"):
        return f"{head}: DIED: {str(server['died']).splitlines()[0]}"
    if not server.get("forwards"):
        return f"{head}: no request"
    per_worker = server.get("requests_per_worker") or {}
    workers = ", ".join(f"{w} {n}" for w, n in sorted(per_worker.items()))
    return (
        f"{head}: {server['requests']} requests in {server['forwards']} forwards, mean width "
        f"{server['mean_width']:.2f}, forward {server['forward_ms']:.1f} ms, model busy "
        f"{_share(server.get('busy_share'))} of its serving span"
        + (f"; requests per worker: {workers}" if workers else "")
    )


def terminal_lines(block: Mapping[str, Any]) -> list[str]:
    """The lines under the hud table: where models ran, and each server's figures."""
    devices = ", ".join(block.get("devices") or [])
    head = f"models: placement {block['placement']} on {devices}"
    servers: Sequence[Mapping[str, Any]] = block.get("servers") or []
    if block.get("fallback"):
        head += f" ({block['fallback']})"
    return [head, *(f"  model server {server_line(s)}" for s in servers)]


def html_section(block: Mapping[str, Any]) -> str:
    """The html report's section: a table of the servers (none: one line of placement)."""
    servers: Sequence[Mapping[str, Any]] = block.get("servers") or []
    devices = ", ".join(block.get("devices") or [])
    title = f"Models: placement {block['placement']} on {devices}"
    if not servers:
        return f'<div class="hud-summary hud-devices"><h3>{html.escape(title)}</h3></div>'
    head = ["agent", "device", "requests", "forwards", "mean width", "forward ms", "model busy"]
    head.append("requests per worker")
    rows = []
    for s in servers:
        per_worker = s.get("requests_per_worker") or {}
        cells = [
            s["spec"],
            s["device"],
            s.get("requests", "-"),
            s.get("forwards", "-"),
            f"{s['mean_width']:.2f}" if s.get("mean_width") else "-",
            f"{s['forward_ms']:.1f}" if s.get("forward_ms") else "-",
            _share(s.get("busy_share")),
            ", ".join(f"{w}: {n}" for w, n in sorted(per_worker.items())) or "-",
        ]
        tds = "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
        died = s.get("died")
        if died:
            tds += f'<td class="error">{html.escape(str(died))}</td>'
        rows.append(f"<tr>{tds}</tr>")
    ths = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return (
        f'<div class="hud-summary hud-devices"><h3>{html.escape(title)}</h3>'
        f'<table class="hud-grid"><tr>{ths}</tr>{"".join(rows)}</table></div>'
    )
