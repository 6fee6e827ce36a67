"""``python -m pytest_hud watch``: evaluate a training run's checkpoints as they appear.

Follows a run's output folder and, once each checkpoint is completely written
(:mod:`.checkpoints`), runs the given pytest suite on it in a child process (:mod:`.session`).
Outputs go under ``--out`` (default ``RUN/hud-watch``, created only at the first evaluation so
lerobot-train still finds its output folder new); layout: docs/guides/training.md.
"""

from __future__ import annotations

from pytest_hud.watch.cli import main

__all__ = ["main"]
