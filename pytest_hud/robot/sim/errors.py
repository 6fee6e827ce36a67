"""The env side's errors, in a leaf module every sim/ module can raise from."""

from __future__ import annotations

__all__ = ["BridgeError"]


class BridgeError(RuntimeError):
    """A protocol or episode error the bridge reports to an agent or the endpoint."""
