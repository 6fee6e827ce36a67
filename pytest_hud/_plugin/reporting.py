"""Reporting: each item's row (user properties, html extras), the terminal table, the
results document and the success gates that decide the session's exit status."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_hud._plugin.cases import HudCase
from pytest_hud._plugin.gating import session_gates
from pytest_hud._plugin.html import _html_extras
from pytest_hud._plugin.short_errors import shorten_longrepr
from pytest_hud._plugin.state import CASE, RESULT, SessionState
from pytest_hud.evaluation import results as rep
from pytest_hud.evaluation.verdict import CoveredGate, decide
from pytest_hud.runtime.rollout import RolloutResult

__all__ = ["ReportMixin"]


class ReportMixin(SessionState):
    """The session's reporting hooks' work."""

    def make_report(self, item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> Any:
        shorten_longrepr(call, report)
        if self.feature_report(item, call, report):  # resumed from a ledger
            return report
        result = item.stash.get(RESULT, None)
        case = item.stash.get(CASE, None)
        if case is not None and result is None and report.skipped and call.when == "setup":
            report.hud = self._skipped_row(item, case, report)  # counted in the table
            return report
        if result is None or case is None:
            return report
        if call.when == "call" or (call.when == "setup" and report.failed):
            row = self._row(item, case, result, report)
            self.annotate_row(row)
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
        strict = False
        if report.when == "setup":
            outcome = "xfailed" if hasattr(report, "wasxfail") else "error"
        elif hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.failed and str(report.longrepr).startswith("[XPASS(strict)]"):
            outcome, strict = "xpassed", True  # not a graded success: it was expected to fail
        else:
            outcome = report.outcome
        fields = {**self._case_fields(item, case), "outcome": outcome, "strict": strict}
        return {**fields, **result.report_fields()}

    def _case_fields(self, item: pytest.Item, case: HudCase) -> dict[str, Any]:
        marker = item.get_closest_marker("hud")
        threshold = marker.kwargs.get("min_success") if marker is not None else None
        return {
            "nodeid": item.nodeid,
            "label": case.id,
            "group": item.nodeid.split("[", 1)[0],
            "key": case.row.key,
            "task": f"{case.row.env}/{case.row.id}",
            "env": case.row.env,
            "task_id": case.row.id,
            "slug": case.row.slug,
            "args": dict(case.task.args),
            "rep": case.rep,
            "seed": case.seed,
            "agent": self.agent_label,
            "min_success": None if threshold is None else float(threshold),
        }

    def _skipped_row(self, item: pytest.Item, case: HudCase, report: Any) -> dict[str, Any]:
        outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        empty = dict.fromkeys(("score", "success", "total_reward", "steps", "error"))
        return {**self._case_fields(item, case), "outcome": outcome, **empty, "duration": 0.0}

    def logreport(self, report: pytest.TestReport) -> None:
        row = getattr(report, "hud", None)
        if row is not None:
            self.rows[report.nodeid] = row
        self.feature_logreport(report)
        if report.when == "teardown":
            self.finished.add(report.nodeid)
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
        for good, text in self.verdict.lines if self.verdict is not None else []:
            tr.write_line(
                ("PASSED " if good else "FAILED ") + text, green=good, red=not good, bold=not good
            )
        self.feature_summary(tr)
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
        base_meta = self._meta()
        covered = self._covered_gates(rows, base_meta)
        # sequential / compare gates fail the session when they fail; they forgive nothing
        covered += [CoveredGate(g.name, g.passed, g.message) for g in self.feature_gates(rows)]
        meta = {**base_meta, **self.feature_meta()}  # after the gates: the compare plot's path
        self.gates = [rep.Gate(g.name, g.passed, g.message) for g in covered]
        self.feature_close()
        report_only = self.options.gate == "none"
        self.verdict = decide(rows, covered, self.other_failures, report_only=report_only)
        if self.options.results is not None:
            stopped = exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop)
            doc = rep.results_document(
                rows,
                gates=self.gates,
                meta=meta,
                collected=len(self._order) or None,
                run=len(self.finished),
                interrupted=stopped,
            )
            self.options.results.parent.mkdir(parents=True, exist_ok=True)
            self.options.results.write_text(json.dumps(doc, indent=2, default=str))
        if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or not rows:
            return  # interrupted, usage error, nothing collected: pytest's own verdict
        failed = self.verdict.failed or self.recording_error is not None
        session.exitstatus = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK

    def _covered_gates(self, rows: list[dict[str, Any]], meta: dict[str, Any]) -> Any:
        return session_gates(
            rows,
            min_success=self.options.min_success,
            mode=self.options.gate,
            baseline=self.baseline,
            meta=meta,
            baseline_strict=self.options.baseline_strict,
        )

    def _gates(self, rows: list[dict[str, Any]]) -> list[rep.Gate]:
        """The gates' verdicts (for reports drawn before sessionfinish)."""
        covered = self._covered_gates(rows, self._meta())
        return [rep.Gate(g.name, g.passed, g.message) for g in covered]

    def _meta(self) -> dict[str, Any]:
        return {
            "agent": self.agent_label,
            "runtime": self.options.runtime,
            "group": self.options.group,
            "seed": self.options.seed,
            "dataset": self.dataset,
        }
