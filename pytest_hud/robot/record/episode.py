"""One episode on its way into the dataset: frames buffered until the episode ends, then
committed through the writer (or discarded when the episode errored)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_hud.robot.contract import Contract
from pytest_hud.robot.record.grade import set_outcome
from pytest_hud.robot.record.schema import _ERRORED, _Schema
from pytest_hud.robot.record.source import run_contract

if TYPE_CHECKING:
    from pytest_hud.robot.record.writer import DatasetWriter

__all__: list[str] = []


class _EpisodeRecorder:
    """One episode's frames, buffered until the episode ends."""

    def __init__(
        self,
        writer: DatasetWriter,
        schema: _Schema,
        task: str,
        source: dict[str, str] | None = None,
    ) -> None:
        self.writer = writer
        self.schema = schema
        self.task = task
        self.source = source or {}  # the episode's row and contract columns (.source)
        self.frames: list[dict[str, np.ndarray]] = []
        self._checked = False

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        if not self._checked:
            self.schema = self.schema.resolve(data, action)
            self.writer._resolved(self.schema)
            self._checked = True
        self.frames.append(self.schema.frame(data, action))

    def outcome(self, reward: float | None, terminated: bool) -> None:
        """The env's answer to the last frame's action."""
        if self.frames:
            set_outcome(self.frames[-1], reward, terminated)

    def end(self, ok: bool) -> dict[str, Any]:
        root = str(self.writer.root)
        if not ok:
            self.frames = []
            return {"dataset": {"root": root, "episode_index": None, "discarded": _ERRORED}}
        if not self.frames:
            return {"dataset": {"root": root, "episode_index": None, "discarded": "no frames"}}
        frames, self.frames = self.frames, []
        return self.writer._commit(self.schema, frames, self.task, self.source)


def _run_contract(run: Any) -> tuple[float | None, str | None]:
    """control_rate and robot_type of the contract the run's robot capability carries."""
    raw = run_contract(run)
    if not raw:
        return None, None
    contract = Contract.from_dict(raw)
    return contract.control_rate, contract.robot_type


def _task_text(run: Any) -> str:
    prompt = getattr(run, "prompt", "") or ""
    if prompt:
        return str(prompt)
    task = getattr(run, "task", None)
    return str(getattr(task, "key", "") or "") if task is not None else ""
