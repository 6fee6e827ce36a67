"""MLflow tracker: the caller's active run, else a run of our own through an ``MlflowClient``, so
MLflow's globals stay as the caller had them.
"""

from __future__ import annotations

import os
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient

from pytest_hud.features.trackers.figures import Figures

__all__ = ["EXPERIMENT", "MlflowTracker", "open_tracker"]

#: the experiment our own runs go to
EXPERIMENT = "pytest-hud"


class MlflowTracker:
    name = "mlflow"

    def __init__(self, directory: Path, run_name: str | None = None, resume: bool = False) -> None:
        active = mlflow.active_run()
        self._owned = active is None
        self._client: MlflowClient
        self._run_id: str
        if active is not None:  # the caller's run, in the store the caller set
            self._client = MlflowClient()
            self._run_id = active.info.run_id
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
        if resume and run_name:
            quoted = run_name.replace("'", "\\'")
            same = client.search_runs(
                [experiment], filter_string=f"attributes.run_name = '{quoted}'", max_results=1
            )
            if same:
                self._run_id = same[0].info.run_id
                return
        self._run_id = client.create_run(experiment, run_name=run_name).info.run_id

    def log(self, figures: Figures) -> None:
        step = figures.step or 0
        client, run = self._client, self._run_id
        for key, value in figures.scalars.items():
            client.log_metric(run, key, value, step=step)
        params = client.get_run(run).data.params
        for name, param in (figures.config or {}).items():
            if params.get(name, param) == param:
                client.log_param(run, name, param)
            else:  # params are set once per run: a later checkpoint's go in as tags
                client.set_tag(run, f"{name}@{step}", param)
        for path in figures.media.values():
            client.log_artifact(run, str(path), artifact_path="hud/videos")

    def close(self) -> None:
        if self._owned:
            self._client.set_terminated(self._run_id)


def open_tracker(
    *, directory: Path, run_name: str | None = None, resume: bool = False, **_: object
) -> MlflowTracker:
    return MlflowTracker(directory, run_name, resume)
