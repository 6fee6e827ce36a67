"""Reporting: each item's row (user properties, html extras), the terminal table, the
results document and the success gates that decide the session's exit status."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_hud._plugin.cases import HudCase
from pytest_hud._plugin.html import _html_extras
from pytest_hud._plugin.state import CASE, RESULT, SessionState
from pytest_hud.evaluation import results as rep
from pytest_hud.runtime.rollout import RolloutResult

__all__ = ["ReportMixin"]


class ReportMixin(SessionState):
    """The session's reporting hooks' work."""

    def make_report(self, item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> Any:
        result = item.stash.get(RESULT, None)
        case = item.stash.get(CASE, None)
        if result is None or case is None:
            return report
        if call.when == "call" or (call.when == "setup" and report.failed):
            row = self._row(item, case, result, report)
            report.hud = row
            props = [
                (f"hud.{k}", row[k])
                for k in ("key", "agent", "score", "success", "steps", "duration", "total_reward")
            ]
            props.append(("hud.seed", case.seed))
            if row.get("video"):
                props.append(("hud.video", row["video"]))
            if row.get("dataset"):
                props.append(("hud.dataset", json.dumps(row["dataset"])))
            item.user_properties.extend(props)
            report.user_properties = list(item.user_properties)
            extras = _html_extras(row, self._merged_root(row))
            if extras:
                report.extras = [*getattr(report, "extras", []), *extras]
        return report

    def _row(
        self, item: pytest.Item, case: HudCase, result: RolloutResult, report: pytest.TestReport
    ) -> dict[str, Any]:
        if report.when == "setup":
            outcome = "xfailed" if hasattr(report, "wasxfail") else "error"
        elif hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        else:
            outcome = report.outcome
        return {
            "nodeid": item.nodeid,
            "group": item.nodeid.split("[", 1)[0],
            "key": case.row.key,
            "env": case.row.env,
            "task_id": case.row.id,
            "slug": case.row.slug,
            "args": dict(case.task.args),
            "rep": case.rep,
            "seed": case.seed,
            "agent": self.agent_label,
            "outcome": outcome,
            **result.report_fields(),
        }

    def logreport(self, report: pytest.TestReport) -> None:
        row = getattr(report, "hud", None)
        if row is not None:
            self.rows[report.nodeid] = row
        if report.failed and not (
            row is not None
            and row["outcome"] == "failed"
            and row["error"] is None
            and report.when == "call"
        ):
            self.other_failures += 1

    def terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        self.abandoned_summary(terminalreporter)
        if not self.rows:
            return
        tr = terminalreporter
        tr.write_sep("=", f"hud: {self.agent_label} on {len(self.rows)} rollouts")
        for line in rep.format_table(list(self.rows.values())):
            tr.write_line(line)
        for gate in self.gates:
            tr.write_line(
                ("PASSED " if gate.passed else "FAILED ") + gate.message,
                green=gate.passed,
                red=not gate.passed,
                bold=not gate.passed,
            )
        if self.options.results is not None:
            tr.write_line(f"hud results: {self.options.results}")
        if self.dataset is not None:
            tr.write_line(f"hud dataset: {self.dataset}")
        if self.recording_error is not None:
            tr.write_line(f"FAILED {self.recording_error}", red=True, bold=True)

    def sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.evaluator.close()
        try:
            self._finish_recording()
        except Exception as exc:  # a dataset that cannot be written fails the session
            self.recording_error = f"recording failed: {type(exc).__name__}: {exc}"
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.is_worker:
            self.publish_abandoned()
            return
        rows = list(self.rows.values())
        self.gates = self._gates(rows)
        if self.options.results is not None:
            doc = rep.results_document(
                rows,
                gates=self.gates,
                meta={
                    "agent": self.agent_label,
                    "runtime": self.options.runtime,
                    "group": self.options.group,
                    "seed": self.options.seed,
                    "dataset": self.dataset,
                },
            )
            self.options.results.parent.mkdir(parents=True, exist_ok=True)
            self.options.results.write_text(json.dumps(doc, indent=2, default=str))
        if not self.gates:
            return
        if not all(g.passed for g in self.gates):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif (
            exitstatus == pytest.ExitCode.TESTS_FAILED
            and self.other_failures == 0
            and self.recording_error is None
        ):
            # every failure was an episode failure and the success gates cleared
            session.exitstatus = pytest.ExitCode.OK

    def _gates(self, rows: list[dict[str, Any]]) -> list[rep.Gate]:
        gates = []
        mode = self.options.gate
        if self.options.min_success is not None:
            gates.append(rep.threshold_gate("overall", rows, self.options.min_success, mode))
        for group, threshold in sorted(self.min_success.items()):
            mine = [r for r in rows if r["group"] == group]
            if mine:
                gates.append(rep.threshold_gate(group, mine, threshold, mode))
        if self.baseline is not None:
            gates.extend(rep.baseline_gates(rows, self.baseline))
        return gates
