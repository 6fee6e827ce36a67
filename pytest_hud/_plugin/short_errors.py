"""Errors whose message is the whole story: shown without the fixture's source.

A usage error (no ``@pytest.mark.hud`` on a test using hud fixtures, a row nothing
declares) or a rollout error raised by the ``hud_result`` fixture would otherwise print
~20 lines of pytest-hud's fixture code before the one line the user can act on.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hud._plugin.errors import RolloutError
from pytest_hud.runtime.errors import PlacementError

__all__ = ["shorten_longrepr"]

#: raised from pytest-hud's fixtures with a complete message (expected / got / fix)
SELF_EXPLAINED = (pytest.UsageError, RolloutError, PlacementError)


def shorten_longrepr(call: pytest.CallInfo[None], report: Any) -> None:
    """Replace the traceback by ``Type: message`` for the errors above."""
    excinfo = call.excinfo
    if excinfo is None or not isinstance(excinfo.value, SELF_EXPLAINED):
        return
    where = getattr(report, "location", None)
    head = f"{where[0]}: " if where else ""
    report.longrepr = f"{head}{type(excinfo.value).__name__}: {excinfo.value}"
