"""Recording's error, in a leaf module every record/ module raises from."""

from __future__ import annotations

from pytest_hud.errors import HudError

__all__ = ["DatasetError"]


class DatasetError(HudError, ValueError):
    """Recording cannot start or continue; the message names the feature or folder."""
