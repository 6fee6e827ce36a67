"""The runtime layer's errors (placement, control, substrates, tasks, envs), in one leaf
module every runtime module raises from."""

from __future__ import annotations

from pytest_hud.errors import HudError

__all__ = [
    "BaseImageError",
    "ControlError",
    "EnvError",
    "PlacementError",
    "SharedScopeError",
    "SubstrateError",
    "TaskError",
    "TemplateError",
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


class BaseImageError(SubstrateError):
    """No base image for env images: none on the engine, no registry gave one and none
    could be built from the host's Python."""


class TemplateError(ControlError):
    """The user's template raised on the env server: carries the template's own exception
    type (``type_name``) and the traceback lines from the user's modules, so the error
    points at the env file rather than at the control channel."""

    def __init__(self, method: str, type_name: str, message: str, user_frames: str) -> None:
        text = f"the template raised {type_name}: {message} (during {method}())"
        if user_frames:
            text += "\n" + user_frames
        super().__init__(text)
        self.type_name = type_name
        self.user_frames = user_frames
