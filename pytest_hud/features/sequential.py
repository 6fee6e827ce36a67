"""``--hud-gate=sequential``: decide each task after every episode and stop scheduling its
repeats once decided (:mod:`pytest_hud.evaluation.sequential_gates`); under ``-n`` the
controller's scheduler drops decided tasks' pending items.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_hud._plugin.feature_api import Hud, HudOptions
from pytest_hud.evaluation import results as rep
from pytest_hud.evaluation.decided import DecidedTasks
from pytest_hud.evaluation.results import ResultsDocument
from pytest_hud.evaluation.sequential_gates import BaselineGate, ThresholdGate, Verdict

__all__ = ["SequentialPlugin", "Settings", "configure", "enable", "task_of"]

#: its one option is the core's ``--hud-gate=sequential``
Settings = None


def configure(settings: None, options: HudOptions) -> HudOptions:
    """A sequential session decides items before they run: under ``--dist load`` the
    controller drops a decided task's items (``pytest_hud_decided``)."""
    if options.gate != "sequential":
        return options
    return dataclasses.replace(options, drops_items=True)


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

    def gates(self) -> list[ThresholdGate | BaselineGate]:
        return [g for g in (self.threshold, self.baseline) if g is not None]


class SequentialPlugin:
    """Sequential gates: decisions where rows arrive, skipping where items run.

    ``order`` gives the session's node ids (a task's repeats count its ``n_max``)."""

    def __init__(
        self,
        options: HudOptions,
        order: Callable[[], Sequence[str]],
        baseline: ResultsDocument | None,
        cache: Path,
    ) -> None:
        self.options = options
        self.order = order
        self.cache = cache
        self.tasks: dict[str, _Task] = {}
        #: a task is decided once every gate of it decided
        self.decisions = DecidedTasks(task_of)
        self.base_outcomes: dict[tuple[object, object], bool] = {}
        for r in (baseline or {}).get("rollouts") or []:
            if r.get("error") is None and r.get("success") is not None:
                self.base_outcomes[(r.get("key"), r.get("seed"))] = bool(r["success"])

    # -- rows ----------------------------------------------------------------------------
    @pytest.hookimpl
    def pytest_hud_row(self, row: rep.Row) -> None:
        """The bar of a test function's tasks: its marker's, else --hud-min-success."""
        marker_bar = row.get("min_success")
        row["bar"] = self.options.min_success if marker_bar is None else marker_bar

    def _task_state(self, row: rep.Row) -> _Task | None:
        task = task_of(str(row["nodeid"]))
        state = self.tasks.get(task)
        if state is None:
            n_max = sum(1 for nid in self.order() if task_of(nid) == task) or 1
            bar = row.get("bar")
            state = _Task(n_max, label=str(row.get("key")))
            if bar is not None and 0.0 < bar < 1.0:
                state.threshold = ThresholdGate(bar, self.options.alpha, n_max)
            if self.base_outcomes and any(k[0] == row.get("key") for k in self.base_outcomes):
                state.baseline = BaselineGate(self.options.alpha, n_max, cache=self.cache)
            self.tasks[task] = state
        return state if state.gates() else None

    @pytest.hookimpl
    def pytest_hud_rollout_finished(self, row: rep.Row) -> None:
        """Feed one finished, graded episode to its task's gates."""
        if row.get("wrapped") or row.get("outcome") not in rep.GRADED:
            return
        if row.get("error") is not None or row.get("success") is None:
            return
        state = self._task_state(row)
        if state is None:
            return
        success = bool(row["success"])
        for gate in state.gates():
            if gate.episodes >= gate.n_max:
                continue
            if isinstance(gate, ThresholdGate):
                gate.update(success)
            else:
                base = self.base_outcomes.get((row.get("key"), row.get("seed")))
                if base is not None:
                    gate.update(base, success)
        task = task_of(str(row["nodeid"]))
        if self.decisions.reason(task) is None and all(g.decision.decided for g in state.gates()):
            self.decisions.decide(task, state.gates()[0].decision.reason)

    # -- skipping --------------------------------------------------------------------------
    @pytest.hookimpl
    def pytest_hud_skip_case(self, nodeid: str) -> str | None:
        return self.decisions.item_reason(nodeid)

    @pytest.hookimpl
    def pytest_hud_decided(self, nodeid: str) -> str | None:
        """On the xdist controller: a decided task's items are dropped before they are sent."""
        return self.decisions.item_reason(nodeid)

    @pytest.hookimpl
    def pytest_hud_unrun(self, nodeid: str) -> str | None:
        """A repeat not run because its task's sequential gate decided: ``decided``."""
        return None if self.decisions.item_reason(nodeid) is None else "decided"

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count a decided task's repeats skipped (here, or by the xdist scheduler)."""
        if report.when == "setup" and report.skipped:
            self.decisions.skipped_at_setup(report.nodeid, str(report.longrepr))

    # -- verdicts --------------------------------------------------------------------------
    @pytest.hookimpl
    def pytest_hud_gates(self) -> list[rep.Gate]:
        """One gate per task and kind: decided verdicts, else the rate at exhaustion."""
        gates = []
        for task, state in sorted(self.tasks.items()):
            saved = self.decisions.saved(task)
            skipped = f", {saved} repeats skipped" if saved else ""
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


def enable(settings: None, hud: Hud) -> SequentialPlugin | None:
    """The feature's plugin for this session (--hud-gate=sequential with one agent), else None."""
    if hud.options.gate != "sequential" or hud.arms:  # arms: paired, in the A/B feature
        return None
    cache = hud.artifacts / "step-tables"
    return SequentialPlugin(hud.options, lambda: hud.order, hud.baseline, cache)
