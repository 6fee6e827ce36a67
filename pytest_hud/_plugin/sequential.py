"""``--hud-gate=sequential`` in a run: decide each task after every finished episode and
stop scheduling its remaining repeats once decided.

A *task* here is one test function's task row: the items that differ only in their
repeat index (``...[env/slug[3]]``). Its gates are :class:`ThresholdGate` against the
bar (the marker's ``min_success``, else ``--hud-min-success``) and, with
``--hud-baseline``, :class:`BaselineGate` on episodes paired by seed with the baseline's
rollouts; ``n_max`` is the task's number of repeats, alpha ``--hud-alpha``. The
procedures and their citations are in :mod:`pytest_hud.evaluation.sequential`.

Decisions are made where every row arrives: the controller (``logreport``). Without
xdist that process also runs the items: a decided task's later items skip in
``pytest_runtest_setup`` and the evaluator's lookahead leaves them out. Under ``-n``
the controller's scheduler (:class:`~pytest_hud._plugin.internals.HudSequentialScheduling`)
hands each worker at most two items at a time and, before every hand-out, drops the
pending items of decided tasks and reports them skipped itself, so at most the two
items a worker already holds run after the decision. A measured example (16 repeats,
an always-succeeding agent, bar 0.5, alpha 0.05): decided after 6 episodes, 10 skipped
without xdist, at least 6 with ``-n 2``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_hud._plugin.state import SessionState
from pytest_hud.evaluation import results as rep
from pytest_hud.evaluation.sequential import BaselineGate, Decision, ThresholdGate, Verdict

__all__ = ["SequentialMixin", "task_of"]

_REPEAT = re.compile(r"^(.*)\[(\d+)\]\]$")


def task_of(nodeid: str) -> str:
    """The task an item repeats: its node id without the repeat index."""
    m = _REPEAT.match(nodeid)
    return m.group(1) + "]" if m else nodeid


@dataclass
class _Task:
    n_max: int
    threshold: ThresholdGate | None = None
    baseline: BaselineGate | None = None
    label: str = ""
    decided: str | None = None  # the skip reason once every gate decided
    skipped: list[str] = field(default_factory=list)

    def gates(self) -> list[ThresholdGate | BaselineGate]:
        return [g for g in (self.threshold, self.baseline) if g is not None]


class SequentialMixin(SessionState):
    """The session's sequential-gate work (controller: decisions; everyone: skipping)."""

    _seq: dict[str, _Task]
    _base_outcomes: dict[tuple[Any, Any], bool]

    def _setup_sequential(self) -> None:
        self._seq = {}
        self._base_outcomes = {}
        if self.baseline is not None:
            for r in self.baseline.get("rollouts") or []:
                if r.get("error") is None and r.get("success") is not None:
                    self._base_outcomes[(r.get("key"), r.get("seed"))] = bool(r["success"])

    @property
    def sequential(self) -> bool:
        return self.options.gate == "sequential"

    def sequential_bar(self, marker_bar: float | None) -> float | None:
        """The bar of a test function's tasks: its marker's (carried on the row), else
        --hud-min-success."""
        return self.options.min_success if marker_bar is None else marker_bar

    # -- deciding (controller) -----------------------------------------------------------
    def _task_state(self, row: dict[str, Any]) -> _Task | None:
        task = task_of(str(row["nodeid"]))
        state = self._seq.get(task)
        if state is None:
            n_max = sum(1 for nid in self._order if task_of(nid) == task) or 1
            bar = row.get("bar")
            state = _Task(n_max, label=str(row.get("key")))
            if bar is not None and 0.0 < bar < 1.0:
                state.threshold = ThresholdGate(bar, self.options.alpha, n_max)
            if self._base_outcomes and any(k[0] == row.get("key") for k in self._base_outcomes):
                state.baseline = BaselineGate(
                    self.options.alpha, n_max, cache=self.artifacts / "step-tables"
                )
            self._seq[task] = state
        return state if state.gates() else None

    def sequential_update(self, row: dict[str, Any]) -> None:
        """Feed one finished, graded episode to its task's gates."""
        if not self.sequential or self.is_worker or row.get("outcome") not in rep.GRADED:
            return
        if row.get("error") is not None or row.get("success") is None:
            return
        state = self._task_state(row)
        if state is None:
            return
        success = bool(row["success"])
        decisions: list[Decision] = []
        for gate in state.gates():
            if gate.episodes >= gate.n_max:
                continue
            if isinstance(gate, ThresholdGate):
                decisions.append(gate.update(success))
            else:
                base = self._base_outcomes.get((row.get("key"), row.get("seed")))
                if base is not None:
                    decisions.append(gate.update(base, success))
        if state.decided is None and all(g.decision.decided for g in state.gates()):
            state.decided = state.gates()[0].decision.reason

    def decided(self, nodeid: str) -> str | None:
        """The skip reason when this item's task is decided, else None."""
        state = self._seq.get(task_of(nodeid))
        return None if state is None else state.decided

    # -- skipping --------------------------------------------------------------------------
    def skip_decided(self, item: pytest.Item) -> None:
        """pytest_runtest_setup (one process): skip a decided task's remaining repeats."""
        reason = self.decided(item.nodeid) if self.sequential else None
        if reason is not None:
            self._seq[task_of(item.nodeid)].skipped.append(item.nodeid)
            pytest.skip(reason)

    def lookahead_filter(self) -> None:
        """The evaluator's lookahead never starts a rollout of a decided task."""
        if not self.sequential:
            return
        schedule = self.evaluator.schedule
        self.evaluator.schedule = lambda nodeid: [
            n for n in schedule(nodeid) if self.decided(n) is None
        ]

    def drop_decided(self, nodeid: str) -> bool:
        """The xdist scheduler's question before handing out ``nodeid``: when its task is
        decided, report it skipped here (it never reaches a worker) and say drop it."""
        reason = self.decided(nodeid)
        if reason is None:
            return False
        self._seq[task_of(nodeid)].skipped.append(nodeid)
        path = nodeid.split("::", 1)[0]
        hook = self.config.hook
        hook.pytest_runtest_logstart(nodeid=nodeid, location=(path, None, nodeid))
        for when, outcome, longrepr in (
            ("setup", "skipped", (path, None, f"Skipped: {reason}")),
            ("teardown", "passed", None),
        ):
            report = pytest.TestReport(
                nodeid,
                (path, None, nodeid),  # type: ignore[arg-type]  # no line in the controller
                {},
                outcome,  # type: ignore[arg-type]
                longrepr,  # type: ignore[arg-type]
                when,  # type: ignore[arg-type]
                duration=0.0,
            )
            hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=nodeid, location=(path, None, nodeid))
        return True

    def sequential_scheduler(self, config: pytest.Config, log: Any) -> Any:
        from pytest_hud._plugin.internals import HudSequentialScheduling

        return HudSequentialScheduling(config, log, drop=self.drop_decided)

    # -- verdicts --------------------------------------------------------------------------
    def sequential_gates(self) -> list[rep.Gate]:
        """One gate per task and kind: decided verdicts, else the rate at exhaustion."""
        gates = []
        for task, state in sorted(self._seq.items()):
            skipped = f", {len(state.skipped)} repeats skipped" if state.skipped else ""
            if state.threshold is not None:
                d, bar = state.threshold.decision, state.threshold.bar
                if d.decided:
                    ok = d.verdict is Verdict.ABOVE
                else:  # exhausted: not distinguishable from the bar at alpha
                    ok = d.episodes > 0 and d.successes / d.episodes >= bar
                gates.append(
                    rep.Gate(
                        f"sequential {task}",
                        ok,
                        f"sequential {task}: {d.reason} vs bar {bar:.0%} at alpha "
                        f"{self.options.alpha}{skipped}: " + ("passed" if ok else "FAILED"),
                    )
                )
            if state.baseline is not None:
                d = state.baseline.decision
                ok = d.verdict is not Verdict.WORSE
                gates.append(
                    rep.Gate(
                        f"sequential baseline {task}",
                        ok,
                        f"sequential baseline {task}: {d.reason} (paired seeds){skipped}: "
                        + ("passed" if ok else "FAILED, worse than the baseline"),
                    )
                )
        return gates
