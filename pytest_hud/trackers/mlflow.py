"""MLflow: the caller's active run (a training script's), else a new run in the tracking
store configured by ``MLFLOW_TRACKING_URI`` or, without one, a SQLite store
``directory/mlflow.db`` (MLflow's file store is retired). Scalars as metrics at the step,
provenance as params, videos as artifacts under ``hud/videos``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import mlflow

from pytest_hud.trackers import Figures

__all__ = ["MlflowTracker", "open_tracker"]


class MlflowTracker:
    name = "mlflow"

    def __init__(self, directory: Path, run_name: str | None = None) -> None:
        self._owned = mlflow.active_run() is None
        if self._owned:
            if not os.environ.get("MLFLOW_TRACKING_URI"):
                Path(directory).mkdir(parents=True, exist_ok=True)
                db = (Path(directory) / "mlflow.db").resolve()
                mlflow.set_tracking_uri(f"sqlite:///{db}")
            mlflow.start_run(run_name=run_name)

    def log(self, figures: Figures) -> None:
        mlflow.log_metrics(figures.scalars, step=figures.step or 0)
        if figures.config:
            mlflow.log_params(figures.config)
        for path in figures.media.values():
            mlflow.log_artifact(str(path), artifact_path="hud/videos")

    def close(self) -> None:
        if self._owned:
            mlflow.end_run()


def open_tracker(*, directory: Path, run_name: str | None = None, **_: Any) -> MlflowTracker:
    return MlflowTracker(directory, run_name)
