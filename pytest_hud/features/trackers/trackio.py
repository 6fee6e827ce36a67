"""trackio tracker: the caller's run, else the ``--hud-log-run`` run, else a new one; trackio's
current run and project are restored afterwards.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any

import trackio
from trackio import context_vars

from pytest_hud.features.trackers.figures import Figures

__all__ = ["PROJECT", "TrackioTracker", "open_tracker"]

#: the project our own runs go to, unless TRACKIO_PROJECT names another
PROJECT = "pytest-hud"
_VIDEO = (".gif", ".mp4", ".webm")
_STATE = ("current_run", "current_project", "current_server", "current_space_id")


class TrackioTracker:
    name = "trackio"

    def __init__(self, run_name: str | None = None, resume: bool = False) -> None:
        self._saved: dict[str, object] | None = None
        self._config: dict[str, str] = {}
        self._name, self._resume = run_name, resume
        current = context_vars.current_run.get()
        stopped = getattr(current, "_stop_flag", None)  # trackio leaves a finished run current
        if stopped is not None and stopped.is_set():
            current = None
        self.run: Any = current
        self._owned = current is None

    def _open(self, figures: Figures) -> Any:
        if self.run is not None:
            return self.run
        self._saved = {name: getattr(context_vars, name).get() for name in _STATE}
        with contextlib.redirect_stdout(io.StringIO()):  # its banner is not our output
            self.run = trackio.init(
                project=os.environ.get("TRACKIO_PROJECT", PROJECT),
                name=self._name,
                resume="allow" if self._resume and self._name else "never",
                config=dict(figures.config),
                embed=False,
            )
        return self.run

    def log(self, figures: Figures) -> None:
        run = self._open(figures)
        data: dict[str, object] = dict(figures.scalars)
        for tag, path in figures.media.items():
            if Path(path).suffix.lower() in _VIDEO:
                data[tag] = trackio.Video(str(path))
        run.log(data, step=figures.step or 0)
        if not self._owned and figures.config:
            run.config.update(figures.config)

    def close(self) -> None:
        if not self._owned or self.run is None:
            return
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                self.run.finish()  # flushes its queue to SQLite (bounded by trackio: 30 s)
        finally:
            for name, value in (self._saved or {}).items():
                getattr(context_vars, name).set(value)
            if self._saved is not None:
                trackio.config = getattr(self._saved["current_run"], "config", {})


def open_tracker(
    *, run_name: str | None = None, resume: bool = False, **_: object
) -> TrackioTracker:
    return TrackioTracker(run_name, resume)
