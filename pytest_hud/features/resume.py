"""``--hud-resume=LEDGER``: items whose episode the ledger holds are skipped before any rollout
and report the ledger's row; errored or skipped rows run again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_hud._plugin.feature_api import FeatureSettings, HudCase, HudOptions, path_option
from pytest_hud.evaluation import ledger_file as ledger_mod
from pytest_hud.evaluation.results import Row

if TYPE_CHECKING:
    from pytest_hud._plugin.feature_api import Hud, RunIdentity

__all__ = ["ResumePlugin", "Settings", "configure", "enable"]


class Settings(FeatureSettings):
    resume: Path | None = path_option(
        "--hud-resume",
        "a ledger of an earlier (killed) run: items whose episodes it holds are reported "
        "from it instead of run again",
        exists="pass the ledger of the earlier run",
    )


def configure(settings: Settings, options: HudOptions) -> HudOptions:
    """A resumed paired session continues the same interleaved (and blinded) order: the seed
    of the ledger's last paired run, where none was given."""
    if settings.resume is None or len(options.agents) < 2 or options.ab_seed is not None:
        return options
    try:
        runs = list(ledger_mod.read(settings.resume).runs.values())
    except (OSError, ledger_mod.LedgerError):  # enable() reports it
        return options
    for run in reversed(runs):
        seed = (run.get("provenance") or {}).get("ab_seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            return dataclasses.replace(options, ab_seed=seed)
    return options


#: fields of a ledger record that are the ledger's own, not the results row's
_RECORD_ONLY = ("kind", "v", "run", "finished", "checkpoint")


class ResumePlugin:
    """Skips items the resume ledger holds and reports its rows for them, as ``resumed``
    (pytest's ``R``), not skipped; the ledger is never collected as a task file."""

    def __init__(self, path: Path, identity: RunIdentity) -> None:
        self.path = path
        self.real = path.resolve()  # a relative path: from pytest's start folder
        self.identity = identity
        try:
            contents = ledger_mod.read(path)
        except ledger_mod.LedgerError as exc:
            raise pytest.UsageError(f"--hud-resume: {exc}") from None
        index = ledger_mod.resume_index(contents)
        self.episodes = index.episodes  # errors are not episodes: they run again
        self.reruns = len(index.rerun)
        self.resumed: dict[str, ledger_mod.EpisodeRecord] = {}  # node id -> its ledger record

    @pytest.hookimpl
    def pytest_hud_skip_case(self, nodeid: str, case: HudCase) -> str | None:
        probe = {
            "key": case.row.key,
            "seed": case.seed,
            "rep": case.rep,
            "agent": self.identity.label if case.arm is None else case.arm.label,
            "checkpoint": {"hash": self.identity.checkpoint_hash()},
        }
        record = self.episodes.get(ledger_mod.key(probe))
        if record is None:
            return None
        self.resumed[nodeid] = record
        return f"resumed from {self.path} (run {record.get('run')})"

    @pytest.hookimpl
    def pytest_hud_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_line(
            f"hud resume: {len(self.episodes)} episodes kept from {self.path}, "
            f"{self.reruns} errored or skipped rows run again"
        )

    @pytest.hookimpl
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        """The ledger is episodes, not task rows: whatever its name, it is not collected."""
        return True if collection_path.resolve() == self.real else None

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        """A resumed item is neither run nor skipped: pytest's line shows ``R`` and its
        closing line counts them as ``resumed``."""
        row = getattr(report, "hud", None)
        if report.when == "setup" and report.skipped and row is not None and row.get("resumed"):
            return "resumed", "R", "RESUMED"
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, Any]:
        report = yield
        record = self.resumed.get(item.nodeid)
        if record is not None and call.when == "setup":
            row = {k: v for k, v in record.items() if k not in _RECORD_ONLY}
            row.update(nodeid=item.nodeid, resumed=True, repro=self.identity.repro(item.nodeid))
            row["resumed_from"] = str(self.path)
            report.hud = cast(Row, row)
        return report


def enable(settings: Settings, hud: Hud) -> ResumePlugin | None:
    """The feature's plugin for this session (--hud-resume), else None."""
    return None if settings.resume is None else ResumePlugin(settings.resume, hud.identity)
