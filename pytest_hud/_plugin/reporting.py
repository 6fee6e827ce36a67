"""Reporting: each item's row, the terminal table, the results document and the gates deciding the
exit status; features extend each through hooks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_hud._plugin.cases import HudCase
from pytest_hud._plugin.gating import session_gates
from pytest_hud._plugin.html import html_extras
from pytest_hud._plugin.short_errors import shorten_longrepr
from pytest_hud._plugin.state import CASE, RESULT
from pytest_hud.evaluation import results as rep
from pytest_hud.evaluation.durable import OutputWriteError, write_atomically
from pytest_hud.evaluation.verdict import CoveredGate, decide
from pytest_hud.runtime.rollout import RolloutResult

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["Reporter", "report_rows"]

#: the row fields an item's JUnit user properties carry (``hud.<field>``)
_PROPERTIES = ("key", "agent", "score", "success", "steps", "duration", "total_reward")


def report_rows(report: Any) -> list[tuple[str, rep.Row]]:
    """The rows a report carries, each with the key it is filed under: the item's own
    (``report.hud``) and the episodes a test drove through ``wrap(env)``."""
    out: list[tuple[str, rep.Row]] = []
    row = getattr(report, "hud", None)
    if row is not None:
        out.append((report.nodeid, row))
    episodes = getattr(report, "hud_episodes", None) or []
    for i, ep in enumerate(episodes):
        out.append((f"{report.nodeid}#{i}" if len(episodes) > 1 else report.nodeid, ep))
    return out


class Reporter:
    """The session's reporting hooks' work."""

    def __init__(self, session: HudSession) -> None:
        self.session = session
        self.config = session.config
        self.options = session.options
        self.hook = session.config.hook

    def make_report(self, item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> Any:
        shorten_longrepr(call, report)
        if getattr(report, "hud", None) is not None:  # a feature's row (resumed from a ledger)
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
            row["repro"] = self.session.identity.repro(item.nodeid)
            self.hook.pytest_hud_row(config=self.config, item=item, row=row)
            report.hud = row
            props: list[tuple[str, object]] = [(f"hud.{k}", row.get(k)) for k in _PROPERTIES]
            props.append(("hud.seed", case.seed))
            if row.get("video"):
                props.append(("hud.video", row["video"]))
            if row.get("dataset"):
                props.append(("hud.dataset", json.dumps(row["dataset"])))
            item.user_properties.extend(props)
            report.user_properties = list(item.user_properties)
            link = self.hook.pytest_hud_dataset_link(config=self.config, row=row)
            extras = html_extras(row, self.session.videos, link)
            if extras:
                report.extras = [*getattr(report, "extras", []), *extras]
        return report

    def _row(
        self, item: pytest.Item, case: HudCase, result: RolloutResult, report: pytest.TestReport
    ) -> rep.Row:
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
        return cast(rep.Row, {**fields, **result.report_fields()})

    def _case_fields(self, item: pytest.Item, case: HudCase) -> dict[str, object]:
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
            "agent": self.session.agent_label if case.arm is None else case.arm.label,
            "min_success": None if threshold is None else float(threshold),
            **({} if case.arm is None else {"arm": case.arm.letter}),
        }

    def _skipped_row(self, item: pytest.Item, case: HudCase, report: object) -> rep.Row:
        """The row of an item not run: why, in pytest's words (``skip_reason``) and, where a
        feature skipped it, in one word (``unrun``: budget, decided, put off, quit)."""
        outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        empty = dict.fromkeys(("score", "success", "total_reward", "steps", "error"))
        row = {**self._case_fields(item, case), "outcome": outcome, **empty, "duration": 0.0}
        if outcome == "skipped":
            longrepr = getattr(report, "longrepr", None)
            said = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr or "")
            row["skip_reason"] = str(said).removeprefix("Skipped: ")
            unrun = self.hook.pytest_hud_unrun(config=self.config, nodeid=item.nodeid)
            if unrun is not None:
                row["unrun"] = unrun
        return cast(rep.Row, row)

    def logreport(self, report: pytest.TestReport) -> None:
        session = self.session
        rows = report_rows(report)
        for key, row in rows:
            session.rows[key] = row
        if not session.is_worker:  # where rows are collected: once per row
            for _, row in rows:
                self.hook.pytest_hud_rollout_finished(config=self.config, row=row, report=report)
        if report.when == "teardown":
            session.finished.add(report.nodeid)
        own = getattr(report, "hud", None)
        if report.failed and not (
            own is not None
            and own["outcome"] == "failed"
            and own.get("error") is None
            and report.when == "call"
        ):
            session.other_failures += 1

    def terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        session = self.session
        if session.is_worker or not session.rows:
            return
        tr = terminalreporter
        rows = list(session.rows.values())
        table = self.hook.pytest_hud_summary_table(config=self.config, rows=rows)
        if table is None:  # a feature's (the A/B arms') title and table, else the per-task one
            table = [f"hud: {session.agent_label} on {len(rows)} rollouts", *rep.format_table(rows)]
        tr.write_sep("=", table[0])
        for line in table[1:]:
            tr.write_line(line)
        note = rep.units_note(rows)
        if note is not None:
            tr.write_line(note)
        for good, text in session.verdict.lines if session.verdict is not None else []:
            tr.write_line(
                ("PASSED " if good else "FAILED ") + text, green=good, red=not good, bold=not good
            )
        self.hook.pytest_hud_terminal_summary(terminalreporter=tr, config=self.config)
        if self.options.results is not None:
            tr.write_line(f"hud results: {self.options.results}")
        for failure in session.failures:
            tr.write_line(f"FAILED {failure}", red=True, bold=True)

    def sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        hud = self.session
        hud.evaluator.close()
        if hud.is_worker:
            return
        self.hook.pytest_hud_finish_rows(config=self.config, rows=hud.rows)
        rows = list(hud.rows.values())
        base_meta = self._meta()
        covered = self._covered_gates(rows, base_meta)
        # the features' gates fail the session when they fail; they forgive nothing but
        # the failures a CoveredGate (the A/B gate) says it owns
        for gates in self.hook.pytest_hud_gates(config=self.config, rows=rows):
            covered += [
                g if isinstance(g, CoveredGate) else CoveredGate(g.name, g.passed, g.message)
                for g in gates
            ]
        meta = {**base_meta, "provenance": hud.identity.provenance}
        for extra in self.hook.pytest_hud_results_meta(config=self.config):  # after the gates
            meta.update(extra)
        hud.gates = [rep.Gate(g.name, g.passed, g.message) for g in covered]
        report_only = self.options.gate == "none"
        hud.verdict = decide(list(rows), covered, hud.other_failures, report_only=report_only)
        stopped = exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop)
        doc = rep.results_document(
            rows,
            gates=hud.gates,
            meta=meta,
            collected=len(hud.order) or None,
            run=len(hud.finished),
            interrupted=stopped,
        )
        if self.options.results is not None:
            try:
                text = json.dumps(doc, indent=2, default=str)
                write_atomically(self.options.results, text, what="results JSON")
            except OutputWriteError as exc:  # a full disk: one error, the old file kept
                hud.failures.append(str(exc))
        self.hook.pytest_hud_results(config=self.config, document=doc)
        if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or not rows:
            return  # interrupted, usage error, nothing collected: pytest's own verdict
        failed = hud.verdict.failed or bool(hud.failures)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK

    def _covered_gates(self, rows: list[rep.Row], meta: Mapping[str, object]) -> list[CoveredGate]:
        return session_gates(
            rows,
            min_success=self.options.min_success,
            mode=self.options.gate,
            baseline=self.session.baseline,
            meta=meta,
            baseline_strict=self.options.baseline_strict,
            min_coverage=self.options.min_coverage,
        )

    def gates(self, rows: list[rep.Row]) -> list[rep.Gate]:
        """The gates' verdicts (for reports drawn before sessionfinish)."""
        covered = self._covered_gates(rows, self._meta())
        return [rep.Gate(g.name, g.passed, g.message) for g in covered]

    def _meta(self) -> dict[str, object]:
        return {
            "agent": self.session.agent_label,
            "runtime": self.options.runtime.raw,
            "group": self.options.group,
            "seed": self.options.seed,
            "dataset": None,  # --hud-record's feature gives the path
        }
