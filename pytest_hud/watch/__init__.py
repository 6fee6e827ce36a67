"""``python -m pytest_hud watch``: evaluate a training run's checkpoints as they appear, each in a
child pytest session (guide: docs/guides/training.md).
"""

from __future__ import annotations

from pytest_hud.watch.cli import main

__all__ = ["main"]
