"""The runtime layer's errors (placement, control, substrates, tasks, envs), in one leaf
module every runtime module raises from."""

from __future__ import annotations

from pytest_hud.errors import HudError

__all__ = [
    "ControlError",
    "EnvError",
    "PlacementError",
    "SharedScopeError",
    "SubstrateError",
    "TaskError",
]


class TaskError(HudError, ValueError):
    """A malformed task row; the message names the row and the field."""


class SharedScopeError(HudError, RuntimeError):
    """A Shared provider was used outside ``async with shared:``."""


class EnvError(HudError, LookupError):
    """An unknown env or template, or a template that breaks the two-yield protocol."""


class PlacementError(HudError, LookupError):
    """No runtime was given and none could be inferred for some rows."""


class ControlError(HudError, RuntimeError):
    """The env server refused or failed a control call (the message says which and why)."""


class SubstrateError(HudError, RuntimeError):
    """A substrate would not come up (the message carries its output or logs)."""
