"""The episode ledger in a run: provenance, one fsync'd line per finished rollout, resume.

On the controller (it sees every row, whichever worker ran it) each finished rollout is
appended to ``--hud-ledger`` the moment its report arrives, after one ``run`` line
carrying the session's provenance, so a run killed by SIGKILL after three hours loses
at most the episode being written (see :mod:`pytest_hud.evaluation.ledger`).

``--hud-resume=LEDGER``: every process (controller or worker) reads the ledger at
collection and marks the items whose episode it holds -- same task, seed, repeat, agent
and checkpoint hash (:func:`pytest_hud.evaluation.ledger.key`) -- as skipped before
they are registered with the evaluator, so no rollout starts for them; their reports
then carry the ledger's row (``resumed: true``), which the table, the results JSON and
the gates count like any other.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from pytest_hud._plugin.cases import HudCase
from pytest_hud._plugin.state import SessionState
from pytest_hud.evaluation import ledger as ledger_mod
from pytest_hud.evaluation import provenance

__all__ = ["RESUMED", "LedgerMixin"]

RESUMED = pytest.StashKey[dict[str, Any]]()
#: fields of a ledger record that are the ledger's own, not the results row's
_RECORD_ONLY = ("kind", "v", "run", "finished", "checkpoint")


class LedgerMixin(SessionState):
    """The session's ledger, provenance and resume work."""

    _ledger: ledger_mod.Ledger | None
    _run_id: str | None
    _provenance: dict[str, Any] | None
    _resume: dict[ledger_mod.Key, dict[str, Any]]
    _resume_reruns: int
    _ckpt_hash: str | bool | None

    def _setup_ledger(self) -> None:
        self._ledger, self._run_id, self._provenance = None, None, None
        self._ckpt_hash = False  # not computed yet
        self._resume = {}
        self._resume_reruns = 0
        if self.options.resume is not None:
            try:
                contents = ledger_mod.read(self.options.resume)
            except ledger_mod.LedgerError as exc:
                raise pytest.UsageError(f"--hud-resume: {exc}") from None
            index = ledger_mod.resume_index(contents)
            self._resume = index.episodes  # errors are not episodes: they run again
            self._resume_reruns = len(index.rerun)
        if self.is_worker:
            return
        if self.options.ledger is not None or self.options.results is not None:
            self._provenance = self._collect_provenance()
        if self.options.ledger is not None:
            self._ledger = ledger_mod.Ledger(self.options.ledger)
            self._run_id = self._ledger.begin_run(self._provenance or {})

    # -- provenance ------------------------------------------------------------------------
    def checkpoint_path(self) -> str | None:
        """The checkpoint a ``lerobot:PATH`` agent loads (None for other agents)."""
        kind, _, rest = self.options.agent.partition(":")
        return rest if kind == "lerobot" and rest else None

    def checkpoint_hash(self) -> str | None:
        """The checkpoint's content hash, once per process (None without a local one)."""
        if self._ckpt_hash is False:
            path = self.checkpoint_path()
            try:
                self._ckpt_hash = None if path is None else provenance.checkpoint_hash(path)
            except (OSError, ValueError):  # a hub id, not a local folder
                self._ckpt_hash = None
        return self._ckpt_hash if isinstance(self._ckpt_hash, str) else None

    def _collect_provenance(self) -> dict[str, Any]:
        runtime = self.options.runtime
        image = runtime.split(":", 1)[1] if runtime.startswith("docker:") else None
        out = provenance.collect(
            suite=self.config.rootpath,
            checkpoint=None,
            image=image,
            seed=self.options.seed,
            command=["pytest", *self.config.invocation_params.args],
        )
        out["checkpoint"] = (
            None
            if self.checkpoint_path() is None
            else {"path": self.checkpoint_path(), "hash": self.checkpoint_hash()}
        )
        out["agent"] = self.options.agent
        out["python"] = sys.version.split()[0]
        return out

    def repro(self, nodeid: str) -> str:
        """The command that replays this one episode."""
        runtime = self.options.runtime
        return provenance.repro_command(
            nodeid,
            self.options.agent,
            self.options.seed,
            checkpoint=self.options.checkpoint,
            runtime=None if runtime == "local" else runtime,
        )

    # -- appending ---------------------------------------------------------------------------
    def record_episode(self, row: dict[str, Any]) -> None:
        """Append a finished rollout's row (controller only; resumed rows read from the
        same file are not written twice)."""
        if self._ledger is None or self._run_id is None:
            return
        same = self.options.resume is not None and (
            self.options.resume.resolve() == self._ledger.path.resolve()
        )
        if row.get("resumed") and same:
            return
        self._ledger.append(
            ledger_mod.episode_record(
                row,
                run=self._run_id,
                checkpoint=self.checkpoint_path(),
                checkpoint_hash=self.checkpoint_hash(),
            )
        )

    def close_ledger(self) -> None:
        if self._ledger is not None:
            self._ledger.close()

    # -- resume --------------------------------------------------------------------------------
    def resume_item(self, item: pytest.Item, case: HudCase) -> None:
        """Skip an item whose episode the resume ledger holds (before it is registered)."""
        if not self._resume:
            return
        probe = {
            "key": case.row.key,
            "seed": case.seed,
            "rep": case.rep,
            "agent": self.agent_label,
            "checkpoint": {"hash": self.checkpoint_hash()},
        }
        record = self._resume.get(ledger_mod.key(probe))
        if record is None:
            return
        item.stash[RESUMED] = record
        run = record.get("run")
        item.add_marker(pytest.mark.skip(reason=f"resumed from {self.options.resume} (run {run})"))

    def resumed_report(self, item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> bool:
        """Give a resumed item's setup report the ledger's row; True when it did."""
        record = item.stash.get(RESUMED, None)
        if record is None or call.when != "setup":
            return record is not None
        row = {k: v for k, v in record.items() if k not in _RECORD_ONLY}
        row.update(nodeid=item.nodeid, resumed=True, repro=self.repro(item.nodeid))
        report.hud = row
        return True
