"""The device this process's models go on: ``$PYTEST_HUD_DEVICE`` (``cpu``, ``cuda:1``), which the
session sets from ``--hud-devices`` in each process that builds a model (a worker, or the
session's model server for one device). LeRobot checkpoints load there; a factory of your own
reads :func:`placed_device`.
"""

from __future__ import annotations

import os

__all__ = ["DEVICE_ENV", "placed_device"]

#: The variable naming this process's device (unset: the model's own choice).
DEVICE_ENV = "PYTEST_HUD_DEVICE"


def placed_device() -> str | None:
    """The device the session placed this process's models on (None: none chosen)."""
    return os.environ.get(DEVICE_ENV) or None
