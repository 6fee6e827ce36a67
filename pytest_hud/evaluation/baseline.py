"""What a baseline comparison can honestly say: whether the baseline is comparable, and the
smallest drop this run could detect, since few episodes pass almost anything.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist

from pytest_hud.evaluation.document import ItemCounts, ResultsDocument, Row

__all__ = [
    "detectable_drop",
    "episodes_for_drop",
    "incomplete_reason",
    "mismatches",
    "power_note",
]

#: the power a gate's "detects drops >= X" promises
POWER = 0.8
#: the drop the suggestion line sizes ``--hud-group`` for
TARGET_DROP = 0.10


def _z(q: float) -> float:
    return NormalDist().inv_cdf(q)


def _detects(p0: float, d: float, n_base: int, n_now: int, alpha: float, power: float) -> bool:
    """Does a one-sided pooled z-test at ``alpha`` see a drop ``p0 -> p0-d`` with ``power``?"""
    p1 = p0 - d
    pbar = (p0 * n_base + p1 * n_now) / (n_base + n_now)
    null_se = math.sqrt(max(pbar * (1 - pbar), 0.0) * (1 / n_base + 1 / n_now))
    alt_se = math.sqrt(p0 * (1 - p0) / n_base + p1 * (1 - p1) / n_now)
    if alt_se == 0.0:  # a certain drop (1.0 -> 0.0): seen as soon as the test can reject
        return d > 0 and null_se * _z(1 - alpha) < d
    return d >= _z(1 - alpha) * null_se + _z(power) * alt_se


def detectable_drop(
    p0: float, n_base: int, n_now: int, alpha: float = 0.05, power: float = POWER
) -> float | None:
    """The smallest drop (in whole percentage points, as a fraction) from a baseline rate
    ``p0`` that this comparison detects with ``power``; None when no drop can be seen."""
    if n_base <= 0 or n_now <= 0 or p0 <= 0.0:
        return None
    for pp in range(1, round(p0 * 100) + 1):
        d = pp / 100
        if _detects(p0, d, n_base, n_now, alpha, power):
            return d
    return None


def episodes_for_drop(
    p0: float, drop: float = TARGET_DROP, alpha: float = 0.05, power: float = POWER
) -> int | None:
    """Episodes per arm (both arms the same size) that detect ``drop`` from ``p0``."""
    if p0 < drop or drop <= 0:
        return None
    n = 1
    while n <= 1_000_000:
        if _detects(p0, drop, n, n, alpha, power):
            return n
        n = n + 1 if n < 64 else int(n * 1.05) + 1
    return None


def power_note(p0: float | None, n_base: int, n_now: int, rows: int, alpha: float = 0.05) -> str:
    """``n=13 vs 13: detects drops >= 38 pp; --hud-group=K for 10 pp`` (``rows`` is the
    number of distinct task rows, so K repeats give ``rows * K`` episodes)."""
    if p0 is None or n_base <= 0 or n_now <= 0:
        return f"n={n_base} vs {n_now}: nothing to compare"
    d = detectable_drop(p0, n_base, n_now, alpha)
    seen = f"detects drops >= {100 * d:.0f} pp" if d is not None else "cannot detect any drop"
    note = f"n={n_base} vs {n_now}: {seen}"
    if d is None or d > TARGET_DROP:
        need = episodes_for_drop(p0, TARGET_DROP, alpha)
        if need is not None and rows > 0:
            k = max(1, math.ceil(need / rows))
            note += (
                f"; for {100 * TARGET_DROP:.0f} pp record and run with --hud-group={k} "
                f"({need} episodes per arm)"
            )
    return note


def incomplete_reason(doc: ResultsDocument) -> str | None:
    """Why a results document is not a whole run (None when it is, or predates the flag)."""
    if doc.get("complete", True) is not False:
        return None
    items: ItemCounts | dict[str, object] = doc.get("items") or {}
    unrun = items.get("unrun")
    unrun = unrun if isinstance(unrun, dict) else {}
    undecided = {k: v for k, v in unrun.items() if k != "decided"}
    if undecided and not doc.get("interrupted"):
        left = ", ".join(f"{n} for {why}" for why, n in sorted(undecided.items()))
        return f"rows were left undecided (not run: {left})"
    how = "was interrupted" if doc.get("interrupted") else "stopped early"
    return f"it {how}: {items.get('run', '?')} of {items.get('collected', '?')} items ran"


def _seeds(rows: Sequence[Row]) -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for r in rows:
        task = r.get("task") or f"{r.get('env')}/{r.get('task_id')}"  # older files: no "task"
        out.setdefault(str(task), []).append(r.get("seed"))
    return {k: sorted(v, key=repr) for k, v in out.items()}


def mismatches(
    baseline: ResultsDocument, meta: Mapping[str, object], rows: Sequence[Row]
) -> list[str]:
    """How the baseline's run differs from this one: agent/checkpoint, env set, group
    size, base seed, the seeds of the tasks both ran. Empty when they match."""
    out = []
    for name in ("agent", "group", "seed"):
        if name in baseline and baseline.get(name) != meta.get(name):
            out.append(f"{name} {baseline.get(name)} -> {meta.get(name)}")
    base_envs = set(baseline.get("per_env") or {})
    envs = {str(r.get("env")) for r in rows}
    if base_envs and envs and base_envs != envs:
        out.append(f"envs {sorted(base_envs)} -> {sorted(envs)}")
    base_seeds = _seeds(baseline.get("rollouts") or [])
    now_seeds = _seeds(rows)
    differ = sorted(k for k in set(base_seeds) & set(now_seeds) if base_seeds[k] != now_seeds[k])
    if differ:
        out.append(f"seeds differ for {', '.join(differ[:3])}{' ...' if len(differ) > 3 else ''}")
    return out
