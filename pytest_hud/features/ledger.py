"""``--hud-ledger=PATH``: one line per reported row, written on the controller as each report
arrives and fsync'd behind it: an episode, or for a row not run an ``unrun`` line saying why;
resumed rows are not written twice. The results wait until
the disk has every line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.feature_api import FeatureSettings, Hud, path_option
from pytest_hud.evaluation import ledger_file as ledger_mod
from pytest_hud.evaluation.results import Row

if TYPE_CHECKING:
    from pytest_hud._plugin.feature_api import RunIdentity

__all__ = ["LedgerPlugin", "Settings", "enable"]


class Settings(FeatureSettings):
    ledger: Path | None = path_option(
        "--hud-ledger",
        "append every finished rollout (fsync'd behind) to this JSONL episode ledger, with the "
        "run's provenance (default: <results>.ledger.jsonl beside --hud-results)",
    )


class NotATaskFile:
    """Keeps the run's ledger out of collection, whatever its name (a ``.jsonl`` file of
    episodes, not of task rows); registered in every process, workers included."""

    def __init__(self, path: Path, where: Path) -> None:
        self.real = (where / path).resolve()  # a relative path: from pytest's start folder

    @pytest.hookimpl
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        return True if collection_path.resolve() == self.real else None


class LedgerPlugin(NotATaskFile):
    """Appends every reported row to the ledger (on the controller, or the only process)."""

    def __init__(
        self,
        path: Path,
        identity: RunIdentity,
        fail: Callable[[str], None],
        where: Path | None = None,
    ) -> None:
        super().__init__(path, where or Path.cwd())
        self.fail = fail  # fails the session saying why: a ledger that cannot be written
        self.path = path
        self.unrecorded = 0  # rows reported after the ledger stopped taking them
        self.broken: str | None = None
        self.identity = identity
        self.ledger = ledger_mod.Ledger(path)
        provenance = self.identity.provenance or self.identity.collect()
        try:
            self.run_id = self.ledger.begin_run(provenance)
        except ledger_mod.LedgerWriteError as exc:  # before any rollout: stop the session
            self.ledger.close()
            raise pytest.UsageError(f"--hud-ledger: {exc}") from None

    @pytest.hookimpl
    def pytest_hud_rollout_finished(self, row: Row) -> None:
        source = row.get("resumed_from")  # resumed from this same file: its row is in it
        if source is not None and Path(source).resolve() == self.real:
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
            self.fail(f"hud ledger: {self.broken}{lost}")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        self.close()

    def close(self) -> None:
        self.ledger.close()


def enable(settings: Settings, hud: Hud) -> NotATaskFile | None:
    """The ledger plugin (--hud-ledger, or --hud-results), on the controller; in a worker,
    the part that keeps the ledger out of collection; else None."""
    results = hud.options.results
    path = settings.ledger or (results.with_suffix(".ledger.jsonl") if results else None)
    if path is None:
        return None
    if hud.is_worker:
        return NotATaskFile(path, hud.config.invocation_params.dir)
    return LedgerPlugin(path, hud.identity, hud.fail, hud.config.invocation_params.dir)
