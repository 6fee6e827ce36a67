"""The transport's errors: a leaf module, so both WebSocket clients raise the same
errors without importing each other or the seam that picks between them."""

from __future__ import annotations

from pytest_hud.errors import HudError

__all__ = ["ConnectError", "ConnectTimeout", "RobotError", "TransportClosed", "WireError"]


class ConnectError(HudError, ConnectionError):
    """The connection or its opening handshake failed; the message says why."""


class ConnectTimeout(ConnectError):
    """The connection or its opening handshake did not finish within ``open_timeout``."""


class TransportClosed(HudError, ConnectionError):
    """The connection is closed; ``code`` and ``reason`` come from the close frame."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        self.code = code
        self.reason = reason
        super().__init__(self.describe())

    def describe(self) -> str:
        what = "no close frame" if self.code is None else f"code {self.code}"
        return what + (f" ({self.reason})" if self.reason else "")


class WireError(HudError, ValueError):
    """A frame that cannot be encoded or decoded as openpi/0."""


class RobotError(HudError, RuntimeError):
    """The bridge reported an error, closed the connection, or did not answer in time."""
