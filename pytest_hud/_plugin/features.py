"""The evaluation features, each a module of its own, behind the few calls the shared
session code makes: sequential gates (:mod:`.sequential`), the episode ledger, provenance
and resume (:mod:`.ledger`), the comparison with a previous run (:mod:`.compare`) and
``wrap(env)`` rows (:mod:`.wrapped`)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hud._plugin.compare import CompareMixin
from pytest_hud._plugin.ledger import LedgerMixin
from pytest_hud._plugin.sequential import SequentialMixin
from pytest_hud._plugin.wrapped import WrapMixin
from pytest_hud.evaluation import results as rep

__all__ = ["FeaturesMixin"]


class FeaturesMixin(LedgerMixin, SequentialMixin, CompareMixin, WrapMixin):
    """What the session's hooks call for the evaluation features."""

    def setup_features(self) -> None:
        self._setup_ledger()
        self._setup_sequential()
        self._setup_compare()
        self._setup_wrap()

    def feature_report(self, item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> bool:
        """make_report: resumed items' rows and wrapped episodes; True when the item was
        resumed (its report is complete)."""
        self.wrapped_report(item, call, report)
        return self.resumed_report(item, call, report)

    def annotate_row(self, row: dict[str, Any]) -> None:
        """Fields the features add to an item's row where it ran: the command replaying
        it and, for sequential gates, its task's bar."""
        row["repro"] = self.repro(row["nodeid"])
        if self.sequential:
            row["bar"] = self.sequential_bar(row.get("min_success"))

    def feature_logreport(self, report: Any) -> None:
        """logreport (controller): ledger lines, sequential decisions, wrapped rows."""
        row = getattr(report, "hud", None)
        if row is not None and not self.is_worker:
            self.record_episode(row)
            self.sequential_update(row)
        episodes = getattr(report, "hud_episodes", None) or []
        for i, ep in enumerate(episodes):
            self.rows[f"{report.nodeid}#{i}" if len(episodes) > 1 else report.nodeid] = ep
            if not self.is_worker:
                self.record_episode(ep)

    def feature_gates(self, rows: list[dict[str, Any]]) -> list[rep.Gate]:
        return [*self.sequential_gates(), *self.compare_gates(rows)]

    def feature_meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"provenance": self._provenance}
        if self.options.ledger is not None:
            meta["ledger"] = str(self.options.ledger)
        return {**meta, **self.compare_meta()}

    def feature_summary(self, tr: Any) -> None:
        self.compare_summary(tr)
        if self._ledger is not None:
            tr.write_line(f"hud ledger: {self.options.ledger}")
        if self.options.resume is not None:
            tr.write_line(
                f"hud resume: {len(self._resume)} episodes kept from {self.options.resume}, "
                f"{self._resume_reruns} errored or skipped rows run again"
            )

    def feature_close(self) -> None:
        self.close_ledger()
