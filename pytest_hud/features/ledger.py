"""``--hud-ledger=PATH``: one line per reported row, written on the controller as each report
arrives and fsync'd behind it: an episode, or for a row not run an ``unrun`` line saying why;
resumed rows are not written twice. The results wait until
the disk has every line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.identity import RunIdentity
from pytest_hud.evaluation import ledger as ledger_mod
from pytest_hud.evaluation.results import Row

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["LedgerPlugin", "enable"]


class LedgerPlugin:
    """Appends every reported row to the ledger (registered on the controller only)."""

    def __init__(
        self,
        path: Path,
        identity: RunIdentity,
        resume: Path | None = None,
        failures: list[str] | None = None,
    ) -> None:
        self.path = path
        #: the session's run-failing messages: a ledger that cannot be written is one
        self.failures = failures if failures is not None else []
        self.unrecorded = 0  # rows reported after the ledger stopped taking them
        self.broken: str | None = None
        self.identity = identity
        self.ledger = ledger_mod.Ledger(path)
        try:
            self.run_id = self.ledger.begin_run(identity.provenance or {})
        except ledger_mod.LedgerWriteError as exc:  # before any rollout: stop the session
            self.ledger.close()
            raise pytest.UsageError(f"--hud-ledger: {exc}") from None
        #: resuming from this same file: its rows are already in it
        self.same = resume is not None and resume.resolve() == self.ledger.path.resolve()

    @pytest.hookimpl
    def pytest_hud_rollout_finished(self, row: Row) -> None:
        if row.get("resumed") and self.same:
            return
        record: ledger_mod.EpisodeRecord | ledger_mod.UnrunRecord
        if row.get("outcome") == "skipped":  # not run: a line saying why, not an episode
            record = ledger_mod.unrun_record(row, run=self.run_id)
        else:
            record = ledger_mod.episode_record(
                row,
                run=self.run_id,
                checkpoint=self.identity.checkpoint_path(),
                checkpoint_hash=self.identity.checkpoint_hash(),
            )
        if self.broken is not None:
            self.unrecorded += 1
            return
        try:
            self.ledger.append(record)
        except ledger_mod.LedgerWriteError as exc:  # a full disk: say it once, keep running
            self.broken = str(exc)
            self.unrecorded += 1

    @pytest.hookimpl
    def pytest_hud_results_meta(self) -> dict[str, object]:
        return {"ledger": str(self.path)}

    @pytest.hookimpl
    def pytest_hud_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_line(f"hud ledger: {self.path}")

    @pytest.hookimpl
    def pytest_hud_results(self) -> None:
        if self.broken is None:
            try:
                self.ledger.sync()  # every line on disk before the run's results say so
            except ledger_mod.LedgerWriteError as exc:
                self.broken = str(exc)
        if self.broken is not None:
            lost = f"; {self.unrecorded} finished rollout(s) are not in it" * bool(self.unrecorded)
            self.failures.append(f"hud ledger: {self.broken}{lost}")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        self.close()

    def close(self) -> None:
        self.ledger.close()


def enable(session: HudSession) -> object | None:
    """The ledger plugin (--hud-ledger, or --hud-results), on the controller; else None."""
    o = session.options
    if o.ledger is None or session.is_worker:
        return None
    return LedgerPlugin(o.ledger, session.identity, o.resume, session.failures)
