"""The two ways a hud item can go wrong: the policy failed (FAIL) or the rollout
could not be run or graded (ERROR)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_hud.errors import HudError

if TYPE_CHECKING:
    from pytest_hud.runtime.rollout import RolloutResult

__all__ = ["EpisodeFailed", "ExpectError", "ModuleColumnError", "RolloutError"]


class EpisodeFailed(HudError, AssertionError):
    """The policy did not succeed at the task: a test failure."""

    def __init__(self, result: RolloutResult) -> None:
        super().__init__(f"episode failed: {result.summary()}")
        self.result = result


class RolloutError(HudError, RuntimeError):
    """Infrastructure failed (substrate, bridge, timeout, agent crash): a test error."""

    def __init__(self, result: RolloutResult) -> None:
        super().__init__(f"rollout could not be graded ({result.phase}): {result.error}")
        self.result = result


class ExpectError(HudError, ValueError):
    """A malformed expectations file (names the file and the table)."""


class ModuleColumnError(HudError, ValueError):
    """A task row's ``module`` column names code outside the project (see module_rows)."""
