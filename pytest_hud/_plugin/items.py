"""Task files as test files: a JSONL (or ``*.tasks.json``) of rows collects as a module with one
``test_episode`` parametrized over them.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_hud.runtime.rollout import RolloutResult

__all__ = ["TaskFile", "is_task_file"]


def is_task_file(path: Path) -> bool:
    if path.name.endswith(".ledger.jsonl"):  # an episode ledger (--hud-ledger), not tasks
        return False
    return path.suffix == ".jsonl" or path.name.endswith(".tasks.json")


class TaskFile(pytest.Module):
    """A task file collected as a module with one parametrized test."""

    def _getobj(self) -> object:
        module = types.ModuleType(self.path.stem.replace(".", "_"))
        module.__file__ = str(self.path)

        @pytest.mark.hud(tasks=str(self.path))
        def test_episode(hud_result: RolloutResult) -> None:
            """Passes when the episode succeeds."""
            __tracebackhide__ = True
            if not hud_result.success:
                from pytest_hud.errors import EpisodeFailed

                raise EpisodeFailed(hud_result)

        module.test_episode = test_episode  # type: ignore[attr-defined]
        return module
