"""Where a recorded episode came from (``hud/row``, ``hud/contract`` in ``meta/episodes``), so it
can be replayed. Older datasets keep their schema (:func:`has_source_columns`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pytest_hud.robot.contract import Contract, Spaces
from pytest_hud.robot.episode import EpisodeRun

__all__ = ["CONTRACT_COLUMN", "ROW_COLUMN", "episode_source", "has_source_columns", "run_contract"]

ROW_COLUMN = "hud/row"
CONTRACT_COLUMN = "hud/contract"


def run_contract(run: EpisodeRun | None) -> dict[str, object] | None:
    """The contract (raw JSON object) the run's robot capability carries, or None."""
    try:
        cap = run.robot if run is not None else None
    except Exception:  # no robot capability: nothing to read
        cap = None
    if not isinstance(cap, Mapping):
        return None
    params = cap.get("params")
    raw = (params.get("contract") if isinstance(params, Mapping) else None) or cap.get("contract")
    return dict(raw) if isinstance(raw, Mapping) else None


def _row(run: EpisodeRun | None) -> dict[str, object] | None:
    if run is None:
        return None
    task = run.task
    row: dict[str, object] = dict(task.to_row())
    module = task.metadata.get("module") or task.declared_in
    if module:
        metadata = row.get("metadata")
        row["metadata"] = {
            **(metadata if isinstance(metadata, dict) else {}),
            "module": str(module),
        }
    return row


def episode_source(
    run: EpisodeRun | None, spaces: Spaces, rate: float | None, robot_type: str | None
) -> dict[str, str]:
    """The episode's ``hud/row`` and ``hud/contract`` columns (the contract from the run,
    else rebuilt from the spaces the agent bound)."""
    row = _row(run)
    contract = run_contract(run)
    if contract is None:
        features = {**spaces.observation, **spaces.action}
        contract = Contract(features, rate, robot_type).to_dict()
    return {
        ROW_COLUMN: json.dumps(row, default=str) if row is not None else "",
        CONTRACT_COLUMN: json.dumps(contract, default=str),
    }


def has_source_columns(root: Path) -> bool:
    """Whether the episodes already at ``root`` carry the source columns (a dataset
    recorded before they existed does not: appended episodes then leave them out)."""
    files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    if not files:
        return True
    import pyarrow.parquet as pq

    return ROW_COLUMN in pq.read_schema(files[0]).names
