"""The env side's errors, in a leaf module every sim/ module can raise from."""

from __future__ import annotations

from pytest_hud.errors import HudError

__all__ = ["BridgeError", "SimError"]


class BridgeError(HudError, RuntimeError):
    """A protocol or episode error the bridge reports to an agent or the endpoint."""


class SimError(HudError, RuntimeError):
    """The sim process failed: it would not start, it crashed, or a control call failed."""
