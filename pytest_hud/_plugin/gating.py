"""The session's gates, built on the controller from the rows alone (never collection state, which
the xdist controller lacks), so ``-n`` gives the same gates and exit code.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_hud.evaluation import results as rep
from pytest_hud.evaluation.baseline import mismatches
from pytest_hud.evaluation.results import ResultsDocument, Row
from pytest_hud.evaluation.verdict import CoveredGate

__all__ = ["marker_thresholds", "session_gates"]


def marker_thresholds(rows: list[Row]) -> dict[str, float]:
    """Each test function's ``@pytest.mark.hud(min_success=...)``, read from its rows."""
    out: dict[str, float] = {}
    for r in rows:
        bar = r.get("min_success")
        if bar is not None:
            out[str(r.get("group"))] = float(bar)
    return out


def _covered(name: str, gate: rep.Gate, rows: list[Row]) -> CoveredGate:
    return CoveredGate(name, gate.passed, gate.message, frozenset(r["nodeid"] for r in rows))


def session_gates(
    rows: list[Row],
    *,
    min_success: float | None,
    mode: str,
    baseline: ResultsDocument | None,
    meta: Mapping[str, object],
    baseline_strict: bool = False,
    min_coverage: float = 0.0,
) -> list[CoveredGate]:
    """The overall ``--hud-min-success`` gate, one per marked test function, and the
    baseline's per-task and overall gates (plus a provenance gate when the baseline's
    run differs and ``baseline_strict``). With several agents, each arm's rows are gated
    on their own (``overall @B``): a bar is every arm's to clear."""
    arms = sorted({str(r.get("arm")) for r in rows if r.get("arm")})
    if len(arms) < 2:
        return _checked(
            _gates(rows, min_success, mode, baseline, meta, baseline_strict), rows, min_coverage
        )
    out = []
    for arm in [*arms, None]:
        mine = [r for r in rows if r.get("arm") == arm]
        gates = _gates(mine, min_success, mode, baseline, meta, baseline_strict) if mine else []
        for g in _checked(gates, mine, min_coverage):
            name, msg = (
                (g.name, g.message) if arm is None else (f"{g.name} @{arm}", f"[{arm}] {g.message}")
            )
            out.append(CoveredGate(name, g.passed, msg, g.covers))
    return out


def _checked(gates: list[CoveredGate], rows: list[Row], min_coverage: float) -> list[CoveredGate]:
    """Each gate, or its no-verdict failure when its rows' coverage is below the bound."""
    by_id = {r["nodeid"]: r for r in rows}
    out = []
    for gate in gates:
        mine = [by_id[n] for n in sorted(gate.covers) if n in by_id]
        missing = rep.uncovered(gate.name, mine, min_coverage)
        out.append(
            gate if missing is None else CoveredGate(gate.name, False, missing.message, gate.covers)
        )
    return out


def _gates(
    rows: list[Row],
    min_success: float | None,
    mode: str,
    baseline: ResultsDocument | None,
    meta: Mapping[str, object],
    baseline_strict: bool,
) -> list[CoveredGate]:
    how = "raw" if mode == "none" else mode
    gates = []
    if min_success is not None:
        gates.append(
            _covered("overall", rep.threshold_gate("overall", rows, min_success, how), rows)
        )
    for group, threshold in sorted(marker_thresholds(rows).items()):
        mine = [r for r in rows if r["group"] == group]
        if not rep.gate_rows(mine):  # all skipped/xfail: no failure to own, nothing to judge
            continue
        gates.append(_covered(group, rep.threshold_gate(group, mine, threshold, how), mine))
    if baseline is not None:
        differs = mismatches(baseline, meta, rows)
        base_tasks = set(baseline.get("per_task") or {})
        for gate in rep.baseline_gates(rows, baseline, differs=differs):
            task = gate.name.removeprefix("baseline ")
            mine = [
                r
                for r in rows
                if (rep.task_of(r) in base_tasks if task == "overall" else rep.task_of(r) == task)
            ]
            gates.append(_covered(gate.name, gate, mine))
        if differs and baseline_strict:
            msg = (
                f"baseline provenance: expected the baseline's run to match this one, got "
                f"{'; '.join(differs)}; fix: record a baseline with the same agent, envs, "
                "group and seeds (or drop --hud-baseline-strict)"
            )
            gates.append(CoveredGate("baseline provenance", False, msg))
    return gates
