"""MLflow: the caller's active run (a training script's), else a new run of the
experiment ``pytest-hud`` in the tracking store ``MLFLOW_TRACKING_URI`` names or, without
one, a SQLite store ``directory/mlflow.db`` whose artifacts live in
``directory/mlflow-artifacts`` (MLflow's file store is retired). Scalars as metrics at
the step, provenance as params, videos as artifacts under ``hud/videos``.

A run of our own goes through an ``MlflowClient`` bound to its store, so the process's
tracking URI and active run (MLflow's globals) are left as the caller had them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import mlflow
from mlflow.tracking import MlflowClient

from pytest_hud.trackers import Figures

__all__ = ["EXPERIMENT", "MlflowTracker", "open_tracker"]

#: the experiment our own runs go to
EXPERIMENT = "pytest-hud"


class MlflowTracker:
    name = "mlflow"

    def __init__(self, directory: Path, run_name: str | None = None) -> None:
        self._client: MlflowClient | None = None
        self._run_id: str | None = None
        if mlflow.active_run() is not None:  # the caller's run: log into it as they would
            return
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        artifacts: str | None = None
        if not uri:
            folder = Path(directory).resolve()
            folder.mkdir(parents=True, exist_ok=True)
            uri = f"sqlite:///{folder / 'mlflow.db'}"
            artifacts = (folder / "mlflow-artifacts").as_uri()
        client = MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(EXPERIMENT)
        experiment = (
            found.experiment_id
            if found is not None
            else client.create_experiment(EXPERIMENT, artifact_location=artifacts)
        )
        self._client = client
        self._run_id = client.create_run(experiment, run_name=run_name).info.run_id

    def log(self, figures: Figures) -> None:
        step = figures.step or 0
        if self._client is None or self._run_id is None:
            mlflow.log_metrics(figures.scalars, step=step)
            if figures.config:
                mlflow.log_params(figures.config)
            for path in figures.media.values():
                mlflow.log_artifact(str(path), artifact_path="hud/videos")
            return
        client, run = self._client, self._run_id
        for key, value in figures.scalars.items():
            client.log_metric(run, key, value, step=step)
        for name, param in (figures.config or {}).items():
            client.log_param(run, name, param)
        for path in figures.media.values():
            client.log_artifact(run, str(path), artifact_path="hud/videos")

    def close(self) -> None:
        if self._client is not None and self._run_id is not None:
            self._client.set_terminated(self._run_id)


def open_tracker(*, directory: Path, run_name: str | None = None, **_: Any) -> MlflowTracker:
    return MlflowTracker(directory, run_name)
