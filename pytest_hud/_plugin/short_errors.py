"""Errors whose message is the whole story (usage and rollout errors from hud fixtures), shown
without the fixture's source.
"""

from __future__ import annotations

import pytest

from pytest_hud.errors import PlacementError, RolloutError

__all__ = ["shorten_longrepr"]

#: raised from pytest-hud's fixtures with a complete message (expected / got / fix)
SELF_EXPLAINED = (pytest.UsageError, RolloutError, PlacementError)


def shorten_longrepr(call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Replace the traceback by ``Type: message`` for the errors above."""
    excinfo = call.excinfo
    if excinfo is None or not isinstance(excinfo.value, SELF_EXPLAINED):
        return
    where = getattr(report, "location", None)
    head = f"{where[0]}: " if where else ""
    report.longrepr = f"{head}{type(excinfo.value).__name__}: {excinfo.value}"
