"""The stash keys of a pytest-hud item (its case and its rollout result); the session's own key
is :data:`pytest_hud._plugin.session.PLUGIN`."""

from __future__ import annotations

import pytest

from pytest_hud._plugin.cases import HudCase
from pytest_hud.runtime.rollout import RolloutResult

__all__ = ["CASE", "RESULT"]

RESULT = pytest.StashKey[RolloutResult]()
CASE = pytest.StashKey[HudCase]()
