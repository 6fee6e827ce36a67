"""The stash keys of a pytest-hud run: the session on the config, the case and the
rollout result on each item."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.cases import HudCase
from pytest_hud.runtime.rollout import RolloutResult

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["CASE", "PLUGIN", "RESULT", "session_of"]

PLUGIN = pytest.StashKey["HudSession"]()
RESULT = pytest.StashKey[RolloutResult]()
CASE = pytest.StashKey[HudCase]()


def session_of(config: pytest.Config) -> HudSession:
    """The pytest-hud session of this pytest run."""
    return config.stash[PLUGIN]
