"""The golden replay's html parts: one small plot per episode (error over time) and the
table. Drawn from the episode blocks :mod:`.replay` produces (the rows' ``replay``)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_hud.features.replay.judge import Tolerances

__all__ = ["table_html", "write_episode_plot"]


def write_episode_plot(block: Mapping[str, Any], tol: Tolerances, path: Path) -> Path:
    """Error over time: above, the env replay's largest state error per step; below, the
    policy's error per action dimension (both in dataset standard deviations, with the
    tolerance dashed). Written as a PNG at ``path``."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise RuntimeError(
            f"replay plots need matplotlib ({exc}); fix: pip install 'pytest-hud[stats]'"
        ) from None
    env, policy = block["env"], block.get("policy")
    fig = Figure(figsize=(6.0, 3.6 if policy else 2.0), layout="constrained")
    axes = fig.subplots(2 if policy else 1, 1, squeeze=False)[:, 0]
    top = axes[0]
    top.plot(env["error"], color="C0", lw=1.2, label="env: max state error")
    for cam, series in (env.get("image_error") or {}).items():
        scaled = [v * tol.env / tol.image for v in series]  # on the env tolerance's scale
        top.plot(scaled, lw=1.0, ls=":", label=f"{cam} (pixel error, scaled)")
    top.axhline(tol.env, color="grey", ls="--", lw=0.8)
    if env.get("first_drift_step") is not None:
        top.axvline(env["first_drift_step"], color="C3", lw=0.8)
    top.set_ylim(0, max(2 * tol.env, 1.1 * max(env["error"], default=0.0)))
    top.set_ylabel("env (std)", fontsize=8)
    top.set_title(_headline(env["verdict"]), fontsize=8)
    top.legend(fontsize=6, loc="best")
    if policy:
        bottom = axes[1]
        columns = list(zip(*policy["error"], strict=True)) if policy["error"] else []
        for dim, series in zip(policy["dims"], columns, strict=False):
            bad = dim["dim"] in policy["diverging"]
            bottom.plot(series, lw=1.4 if bad else 0.8, label=dim["name"])
        bottom.axhline(tol.policy, color="grey", ls="--", lw=0.8)
        bottom.set_ylabel("policy (std)", fontsize=8)
        bottom.set_xlabel("step", fontsize=8)
        bottom.set_ylim(bottom=0)
        bottom.set_title(_headline(policy["verdict"]), fontsize=8)
        bottom.legend(fontsize=6, loc="best", ncol=4)
    for ax in axes:
        ax.tick_params(labelsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    return path


def _headline(verdict: str) -> str:
    """A verdict's first clause (the figure's caption has all of it)."""
    return verdict.split(" (", 1)[0].split(":", 1)[0]


def table_html(blocks: Sequence[Mapping[str, Any]], dataset: str) -> str:
    """The replay table: per episode the steps and success recorded/replayed, the env's
    largest error and first drifting step, the policy's worst mean error and diverging
    dims, and the verdict."""
    head = (
        "episode", "task", "steps rec/rep", "success rec/rep", "env max error (std)",
        "drifts at", "policy worst mean (std)", "diverging dims", "verdict",
    )  # fmt: skip
    rows = []
    for b in blocks:
        env, pol = b["env"], b.get("policy")
        worst = max((d["mean"] for d in pol["dims"]), default=0.0) if pol else None
        bad = [pol["dims"][d]["name"] for d in pol["diverging"]] if pol else None
        cells = (
            b["episode"],
            b["task"],
            f"{env['steps']['recorded']}/{env['steps']['replayed']}",
            f"{env['success']['recorded']}/{env['success']['replayed']}",
            f"{env['max_error']:.3g}",
            "-" if env["first_drift_step"] is None else env["first_drift_step"],
            "-" if worst is None else f"{worst:.3g}",
            "(no agent)" if bad is None else (", ".join(bad) or "none"),
            b["verdict"],
        )
        colour = "#2a2" if b["passed"] else "#c22"
        tds = "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
        rows.append(f'<tr style="color:{colour}">{tds}</tr>')
    ths = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return (
        f'<div class="hud-summary hud-replay"><h3>Golden replay: {html.escape(dataset)}</h3>'
        f"<table><tr>{ths}</tr>{''.join(rows)}</table></div>"
    )
