"""Weights & Biases tracker: every ``hud/*`` series is plotted against ``hud/step`` (the
checkpoint's training step), so evaluations line up with training curves.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import wandb

from pytest_hud.features.trackers.figures import Figures

__all__ = ["WandbTracker", "open_tracker"]

_FORMATS: dict[str, Literal["gif", "mp4", "webm"]] = {".gif": "gif", ".mp4": "mp4", ".webm": "webm"}


class WandbTracker:
    name = "wandb"

    def __init__(self, directory: Path, run_name: str | None = None, resume: bool = False) -> None:
        existing = wandb.run
        self._owned = existing is None
        if existing is None:
            run_id = os.environ.get("WANDB_RUN_ID")
            if run_id is None and resume and run_name:
                run_id = re.sub(r"[^A-Za-z0-9_-]+", "-", run_name)[:64]
            existing = wandb.init(
                project=os.environ.get("WANDB_PROJECT", "pytest-hud"),
                id=run_id,
                resume="allow" if run_id else None,
                name=run_name,
                dir=str(directory),
            )
        self.run = existing
        self.run.define_metric("hud/step")
        self.run.define_metric("hud/*", step_metric="hud/step")

    def log(self, figures: Figures) -> None:
        data: dict[str, object] = {"hud/step": figures.step or 0, **figures.scalars}
        for tag, path in figures.media.items():
            fmt = _FORMATS.get(path.suffix.lower())
            data[tag] = wandb.Video(str(path), format=fmt)
        self.run.log(data)
        if figures.config:
            self.run.config.update(figures.config, allow_val_change=True)

    def close(self) -> None:
        if self._owned:
            self.run.finish()


def open_tracker(
    *, directory: Path, run_name: str | None = None, resume: bool = False, **_: object
) -> WandbTracker:
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    return WandbTracker(path, run_name, resume)
