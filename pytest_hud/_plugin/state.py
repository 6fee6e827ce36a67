"""The stash keys of a pytest-hud item (its case and its rollout result) and of the config
(whether the arms are blinded); the session's own key is
:data:`pytest_hud._plugin.session.PLUGIN`."""

from __future__ import annotations

import pytest

from pytest_hud._plugin.cases import HudCase
from pytest_hud.runtime.rollout import RolloutResult

__all__ = ["BLINDED", "CASE", "RESULT"]

RESULT = pytest.StashKey[RolloutResult]()
CASE = pytest.StashKey[HudCase]()
#: On the config: the operator sees arm codes only, so nothing may name an arm's agent
#: before the session ends (set by the robots feature, read by the A/B feature's header).
BLINDED = pytest.StashKey[bool]()
