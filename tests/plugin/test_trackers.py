"""Trackers (issue 29 #3) against the real libraries in their offline modes: wandb offline
(its run file read back with wandb's own datastore reader), TensorBoard event files (read
back with TensorBoard's EventAccumulator), MLflow's SQLite store (read back with its
client), trackio's local SQLite store (read back with trackio's Api and storage, in a
child process: trackio fixes its folder when imported). A results document made by the
plugin's own ``results_document``. A tracker that is not installed or cannot reach its
server is one warning."""

from __future__ import annotations

import glob
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from needs import require

from pytest_hud.evaluation.results import Gate, results_document
from pytest_hud.features.trackers.figures import (
    TrackerError,
    TrackerWarning,
    figures_of,
    log_figures,
    parse_names,
)
from pytest_hud.runtime.ports import free_port


def _gif(path: Path) -> Path:
    from PIL import Image

    frames = [Image.new("RGB", (16, 12), (i * 60, 0, 0)) for i in range(3)]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=50)
    return path


@pytest.fixture
def doc(tmp_path: Path) -> dict[str, Any]:
    rows = []
    for task, wins in (("reach", [True, True, False]), ("push", [False, False, True])):
        for seed, win in enumerate(wins):
            rows.append(
                {
                    "task": f"mw/{task}",
                    "env": "mw",
                    "key": f"mw/{task}",
                    "seed": seed,
                    "outcome": "passed" if win else "failed",
                    "success": win,
                    "error": None,
                    "score": float(win),
                    "steps": 10 + seed,
                    "duration": 0.1,
                    "video": str(_gif(tmp_path / f"{task}-{seed}.gif")),
                }
            )
    rows.append({"task": "mw/push", "key": "mw/push", "seed": 9, "outcome": "error",
                 "error": "substrate died", "success": None, "duration": 0.0})  # fmt: skip
    meta = {"agent": "lerobot:ckpt", "runtime": "local", "seed": 3,
            "provenance": {"checkpoint": {"hash": "abc123"}, "image": None}}  # fmt: skip
    return results_document(rows, meta=meta, gates=[Gate("min_success", False, "below")])


def test_figures_of_a_results_document(doc: dict[str, Any]) -> None:
    fig = figures_of(doc, step=2000, media=1)
    s = fig.scalars
    assert fig.step == 2000
    assert s["hud/success_rate"] == pytest.approx(3 / 6) and s["hud/errors"] == 1.0
    assert s["hud/success_lo"] < 0.5 < s["hud/success_hi"]
    assert s["hud/task/mw/reach/success_rate"] == pytest.approx(2 / 3)
    assert s["hud/task/mw/push/episodes"] == 3.0 and s["hud/task/mw/push/errors"] == 1.0
    assert s["hud/gate/min_success"] == 0.0
    assert sorted(fig.media) == ["hud/video/mw/push/1-fail", "hud/video/mw/reach/1-fail"]
    assert fig.config == {"hud.agent": "lerobot:ckpt", "hud.checkpoint_hash": "abc123",
                          "hud.runtime": "local", "hud.seed": "3"}  # fmt: skip


def test_parse_names() -> None:
    assert parse_names(["wandb,tensorboard", "wandb", "mlflow"]) == [
        "wandb",
        "tensorboard",
        "mlflow",
    ]
    with pytest.raises(TrackerError, match="expected one of wandb, tensorboard, mlflow, trackio"):
        parse_names(["neptune"])


@pytest.fixture
def offline_wandb(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    wandb = _need("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    yield wandb
    wandb.teardown()  # the wandb-core service process ends with the test


def _need(module: str) -> Any:
    import importlib.util

    require(importlib.util.find_spec(module), module, f"pip install 'pytest-hud[{module}]'")
    return __import__(module)


def _wandb_records(folder: Path) -> dict[str, list[dict[str, str]]]:
    """The run file's history and config records, read once wandb's service has exited
    (``finish`` returns before the service has written everything)."""
    import wandb

    wandb.teardown()
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb.sdk.internal.datastore import DataStore

    found = glob.glob(str(folder / "wandb" / "offline-run-*" / "run-*.wandb"))
    assert len(found) == 1, sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    (path,) = found
    store = DataStore()
    store.open_for_scan(path)
    out: dict[str, list[dict[str, str]]] = {"history": [], "config": []}
    while (data := store.scan_data()) is not None:
        rec = pb.Record()
        rec.ParseFromString(data)
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            out["history"].append({i.key or "/".join(i.nested_key): i.value_json
                                   for i in rec.history.item})  # fmt: skip
        elif kind == "config":
            out["config"].append({i.key: i.value_json for i in rec.config.update})
    return out


def test_wandb_offline_run_reads_back(
    offline_wandb: Any, doc: dict[str, Any], tmp_path: Path
) -> None:
    assert log_figures(["wandb"], figures_of(doc, step=1500), directory=tmp_path) == ["wandb"]
    recs = _wandb_records(tmp_path)
    (hist,) = recs["history"]
    assert json.loads(hist["hud/step"]) == 1500
    assert json.loads(hist["hud/task/mw/reach/success_rate"]) == pytest.approx(2 / 3)
    assert json.loads(hist["hud/video/mw/push/1-fail/_type"]) == "video-file"
    assert any(json.loads(c.get("hud.checkpoint_hash", "null")) == "abc123" for c in recs["config"])


def test_wandb_attaches_to_the_callers_run(
    offline_wandb: Any, doc: dict[str, Any], tmp_path: Path
) -> None:
    run = offline_wandb.init(project="train", dir=str(tmp_path))
    log_figures(["wandb"], figures_of(doc, step=10), directory=tmp_path / "unused")
    assert offline_wandb.run is run  # still the caller's, not finished by us
    run.log({"train/loss": 0.5})
    run.finish()
    assert not (tmp_path / "unused" / "wandb").exists()
    hist = _wandb_records(tmp_path)["history"]
    assert [json.loads(h["hud/step"]) for h in hist if "hud/step" in h] == [10]


def test_tensorboard_event_files_read_back(doc: dict[str, Any], tmp_path: Path) -> None:
    _need("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for step in (500, 1000):
        log_figures(["tensorboard"], figures_of(doc, step=step), directory=tmp_path, run_name="r")
    acc = EventAccumulator(str(tmp_path / "tensorboard" / "r"), size_guidance={"images": 0})
    acc.Reload()
    rate = acc.Scalars("hud/task/mw/reach/success_rate")
    assert [(e.step, round(e.value, 4)) for e in rate] == [(500, 0.6667), (1000, 0.6667)]
    image = acc.Images("hud/video/mw/push/1-fail")[0]
    assert image.encoded_image_string[:6] == b"GIF89a" and (image.width, image.height) == (16, 12)


def test_mlflow_store_reads_back_and_active_runs_are_kept(
    doc: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mlflow = _need("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)  # the caller's store keeps its artifacts in ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    with mlflow.start_run(run_name="training") as active:
        log_figures(["mlflow"], figures_of(doc, step=700), directory=tmp_path)
        assert mlflow.active_run().info.run_id == active.info.run_id  # attached, not ended
    client = MlflowClient(uri)
    (run,) = client.search_runs([active.info.experiment_id])
    history = client.get_metric_history(run.info.run_id, "hud/success_rate")
    assert [(m.step, m.value) for m in history] == [(700, 0.5)]
    assert run.data.params["hud.checkpoint_hash"] == "abc123"
    videos = [a.path for a in client.list_artifacts(run.info.run_id, "hud/videos")]
    assert sorted(videos) == ["hud/videos/push-0.gif", "hud/videos/push-1.gif",
                              "hud/videos/reach-0.gif", "hud/videos/reach-2.gif"]  # fmt: skip


def test_mlflow_without_a_run_keeps_its_own_store_and_leaves_mlflows_globals(
    doc: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No active run, no MLFLOW_TRACKING_URI: a run of its own in directory/mlflow.db, its
    artifacts beside it (never ./mlruns), and the process's tracking URI as it was."""
    mlflow = _need("mlflow")
    from mlflow.tracking import MlflowClient

    from pytest_hud.features.trackers.mlflow import EXPERIMENT

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    before = mlflow.get_tracking_uri()
    log_figures(["mlflow"], figures_of(doc, step=9), directory=tmp_path / "logs")
    assert mlflow.get_tracking_uri() == before and mlflow.active_run() is None
    assert not (tmp_path / "mlruns").exists()
    client = MlflowClient(f"sqlite:///{tmp_path / 'logs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(EXPERIMENT)
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(run.info.run_id, "hud/errors")] == [9]
    stored = sorted(p.name for p in (tmp_path / "logs" / "mlflow-artifacts").rglob("*.gif"))
    assert stored == ["push-0.gif", "push-1.gif", "reach-0.gif", "reach-2.gif"]


def test_a_failing_tracker_is_one_warning(doc: dict[str, Any], tmp_path: Path) -> None:
    _need("tensorboard")
    (tmp_path / "tensorboard").write_text("a file where the log folder should be")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = log_figures(["tensorboard"], figures_of(doc), directory=tmp_path)
    assert done == []
    (warning,) = [w for w in caught if issubclass(w.category, TrackerWarning)]
    assert "--hud-log=tensorboard: not logged" in str(warning.message)


@pytest.mark.parametrize("workers", [None, 2])
def test_hud_log_in_a_pytest_session(tmp_path: Path, workers: int | None) -> None:
    """``--hud-log=tensorboard,mlflow`` on a real session (with and without -n 2): the
    controller logs once, at the step taken from the checkpoint folder name."""
    import subprocess
    import sys

    _need("tensorboard")
    _need("mlflow")
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    root = Path(__file__).resolve().parents[2]
    rows = root / "examples" / "tests" / "cartpole.jsonl"
    xdist = ["-n", str(workers)] if workers else ["-p", "no:xdist"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(rows),
            "-p",
            "no:cacheprovider",
            "--hud-agent=zero",
            "--hud-log=tensorboard,mlflow",
            "--hud-log-step=1200",
            f"--hud-log-dir={tmp_path}",
            *xdist,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in __import__("os").environ.items() if k != "MLFLOW_TRACKING_URI"},
    )
    assert "hud log: tensorboard, mlflow at step 1200" in done.stdout, done.stdout + done.stderr
    acc = EventAccumulator(str(tmp_path / "tensorboard" / "zero"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("hud/episodes")] == [(1200, 3.0)]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("pytest-hud").experiment_id])
    assert [
        (m.step, m.value) for m in client.get_metric_history(run.info.run_id, "hud/errors")
    ] == [(1200, 0.0)]
    assert not (tmp_path / "mlruns").exists()


def test_the_step_comes_from_a_lerobot_checkpoint_path() -> None:
    from pytest_hud.robot.agent.registry import AgentSpec

    def step_of(text: str) -> int | None:
        return AgentSpec(text).step

    assert step_of("lerobot:outputs/train/act/checkpoints/002000/pretrained_model") == 2000
    assert step_of("lerobot:examples/train_eval/policy/metaworld_act") is None
    assert step_of("lerobot:runs/checkpoints/last/pretrained_model") is None
    assert step_of("zero") is None
    assert step_of("my_agents.py:checkpoints/002000") is None  # a factory, not a checkpoint


def test_an_unknown_tracker_is_a_usage_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(root / "examples" / "tests" / "cartpole.jsonl"),
            "-p",
            "no:cacheprovider",
            "--hud-log=neptune",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 4, done.stdout + done.stderr
    assert "--hud-log=neptune: expected one of wandb, tensorboard, mlflow" in done.stderr


def _wandb_runs(folder: Path) -> list[str]:
    return sorted(Path(p).name for p in glob.glob(str(folder / "wandb" / "offline-run-*")))


def test_wandb_attaches_to_the_run_wandb_run_id_names(
    offline_wandb: Any, doc: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``WANDB_RUN_ID`` (lerobot-train's run, say): resumed by id, not a new run."""
    monkeypatch.setenv("WANDB_RUN_ID", "train7run")
    assert log_figures(["wandb"], figures_of(doc, step=300), directory=tmp_path) == ["wandb"]
    (run,) = _wandb_runs(tmp_path)
    assert run.endswith("-train7run")
    (hist,) = _wandb_records(tmp_path)["history"]
    assert json.loads(hist["hud/step"]) == 300


TRACKIO = """
import json, sys
from pytest_hud.features.trackers.figures import Figures, log_figures
import trackio
from trackio import context_vars
from trackio.sqlite_storage import SQLiteStorage

mine = trackio.init(project="train", name="caller", embed=False)
fig = Figures(step=5, scalars={"hud/success_rate": 0.25}, config={"hud.agent": "5"})
assert log_figures(["trackio"], fig, directory=".") == ["trackio"]
assert context_vars.current_run.get() is mine  # the caller's run, still current
mine.finish()
for step, rate in ((100, 0.5), (200, 0.75)):
    fig = Figures(step=step, scalars={"hud/success_rate": rate}, config={"hud.agent": str(step)})
    done = log_figures(["trackio"], fig, directory=".", run_name="watched", resume=True)
    assert done == ["trackio"], done
assert context_vars.current_run.get() is mine and context_vars.current_project.get() == "train"
runs = {p: [r.name for r in trackio.Api().runs(p)] for p in ("train", "pytest-hud")}
logs = {p: SQLiteStorage.get_logs(p, r[0]) for p, r in runs.items()}
print("RESULT " + json.dumps({"runs": runs, "logs": logs}))
"""


def test_trackio_local_store_reads_back(tmp_path: Path) -> None:
    """Into the caller's current run (left current), and a run of our own that a second
    call with the same ``--hud-log-run`` resumes; read back with trackio's own API."""
    import os
    import subprocess
    import sys

    _need("trackio")
    script = tmp_path / "log.py"
    script.write_text(TRACKIO)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, TRACKIO_DIR=str(tmp_path / "store")))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout.split("RESULT ", 1)[1].splitlines()[0])
    assert out["runs"] == {"train": ["caller"], "pytest-hud": ["watched"]}
    assert [(r["step"], r["hud/success_rate"]) for r in out["logs"]["train"]] == [(5, 0.25)]
    watched = [(r["step"], r["hud/success_rate"]) for r in out["logs"]["pytest-hud"]]
    assert watched == [(100, 0.5), (200, 0.75)]


def test_a_tracker_not_installed_is_one_warning(
    doc: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "trackio", None)  # import trackio raises ImportError
    monkeypatch.delitem(sys.modules, "pytest_hud.features.trackers.trackio", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = log_figures(["trackio"], figures_of(doc), directory=tmp_path)
    assert done == []
    (warning,) = [w for w in caught if issubclass(w.category, TrackerWarning)]
    assert "--hud-log=trackio: not logged (ImportError: --hud-log=trackio needs its library" in str(
        warning.message
    )
    assert "fix: pip install trackio" in str(warning.message)


def test_a_tracker_that_cannot_reach_its_server_is_one_warning(
    doc: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow pointed at a tracking server that is down (a port nothing listens on)."""
    _need("mlflow")
    port = free_port()  # nothing listens on it
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = log_figures(["mlflow", "tensorboard"], figures_of(doc, step=3), directory=tmp_path)
    assert done == ["tensorboard"]  # the other tracker still logs
    (warning,) = [w for w in caught if issubclass(w.category, TrackerWarning)]
    assert str(warning.message).startswith("--hud-log=mlflow: not logged (")
    assert f"127.0.0.1:{port}" in str(warning.message)


@pytest.mark.parametrize("workers", [None, 2])
def test_wandb_and_trackio_in_a_pytest_session(tmp_path: Path, workers: int | None) -> None:
    """``--hud-log=wandb,trackio --hud-log-run=NAME`` on a real session, offline, with and
    without -n 2: the controller logs once, into the run NAME (wandb's id), read back."""
    import os
    import subprocess
    import sys

    _need("wandb")
    _need("trackio")
    root = Path(__file__).resolve().parents[2]
    xdist = ["-n", str(workers)] if workers else ["-p", "no:xdist"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "TRACKIO_"))}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true", TRACKIO_DIR=str(tmp_path / "trackio"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(root / "examples" / "tests" / "cartpole.jsonl"),
         "-p", "no:cacheprovider", "--hud-agent=zero", "--hud-log=wandb,trackio",
         "--hud-log-step=1200", "--hud-log-run=ckpt-run", f"--hud-log-dir={tmp_path}", *xdist],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert "hud log: wandb, trackio at step 1200" in done.stdout, done.stdout + done.stderr
    (run,) = _wandb_runs(tmp_path)
    assert run.endswith("-ckpt-run")
    (hist,) = _wandb_records(tmp_path)["history"]
    assert json.loads(hist["hud/step"]) == 1200 and json.loads(hist["hud/episodes"]) == 3
    read = subprocess.run(
        [sys.executable, "-c", "import json; from trackio.sqlite_storage import SQLiteStorage as S;"
         "print(json.dumps(S.get_logs('pytest-hud', 'ckpt-run')))"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    (logged,) = json.loads(read.stdout.strip().splitlines()[-1])
    assert (logged["step"], logged["hud/episodes"], logged["hud/errors"]) == (1200, 3.0, 0.0)
