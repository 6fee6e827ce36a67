"""The agent registry's error, in a leaf module so the registry and the LeRobot factories
it names can both raise it without importing each other."""

from __future__ import annotations

from pytest_hud.errors import HudError

__all__ = [
    "AdapterError",
    "AgentSpecError",
    "CheckpointError",
    "ModelOutputError",
    "RemoteModelError",
]


class AgentSpecError(HudError, LookupError):
    """An agent name that names nothing; the message lists the valid forms."""


class ModelOutputError(HudError, ValueError):
    """A model returned something that is not an action chunk of the expected size."""


class AdapterError(HudError, ValueError):
    """The env's spaces cannot be wired onto the model's inputs (names both sides)."""


class RemoteModelError(HudError, RuntimeError):
    """The policy server refused, failed, went silent or went away."""


class CheckpointError(AgentSpecError):
    """A LeRobot checkpoint that cannot be loaded (names the checkpoint and the way out)."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        #: The underlying failure, when another error caused this one.
        self.reason = reason
