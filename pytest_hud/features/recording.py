"""``--hud-record``: one LeRobot dataset per env; under xdist the controller merges the workers'
parts in test order. A failed merge keeps the parts.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.feature_api import FeatureSettings, Hud, HudOptions, option
from pytest_hud.evaluation.results import Row
from pytest_hud.runtime.rollout import RolloutResult

if TYPE_CHECKING:
    from pytest_hud.robot.agent.agent import EpisodeObserver, ObserverFactory
    from pytest_hud.robot.contract import Spaces
    from pytest_hud.robot.episode import EpisodeRun
    from pytest_hud.robot.record.writer import DatasetWriter

__all__ = ["KEY", "RecordingPlugin", "Settings", "configure", "enable", "parts_dir", "record_root"]

#: The workeroutput key a worker's recording errors travel under.
KEY = "pytest_hud_recording_errors"
#: What a row's dataset says when its episode is not in the dataset.
NOT_RECORDED = "not recorded: the dataset stopped before this episode (see the error above)"


class Settings(FeatureSettings):
    record: str | None = option(
        "--hud-record",
        "record every episode into a LeRobot v3 dataset at DIR (default $RECORD_DIR or ./data)",
        const="",
        metavar="DIR",
    )


def configure(settings: Settings, options: HudOptions) -> HudOptions:
    """Recording under ``--dist load``: each worker takes one contiguous block of the items,
    so the merged dataset's episodes follow the test order."""
    if settings.record is None:
        return options
    return dataclasses.replace(options, in_order=True)


def record_root(record: str) -> Path:
    """The folder ``--hud-record[=DIR]`` writes to ($RECORD_DIR, else ``data``), checked:
    lerobot and its dataset stack must be there (one clear message, at configure time)."""
    missing = [m for m in ("lerobot", "datasets", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise pytest.UsageError(
            f"--hud-record writes LeRobot v3 datasets and needs {' and '.join(missing)}, not "
            "installed here; fix: pip install 'pytest-hud[lerobot]', or drop --hud-record"
        )
    root = Path(record or os.environ.get("RECORD_DIR") or "data").expanduser().absolute()
    if root.exists() and not root.is_dir():
        raise pytest.UsageError(f"--hud-record: {root} is a file; point it at a folder")
    return root


def parts_dir(root: Path) -> Path:
    """Where xdist workers record their parts before the controller merges them."""
    return root.parent / f".{root.name}.parts"


class RecordingPlugin:
    """The session's dataset recording (one dataset per env; the root itself when the
    run has one env)."""

    def __init__(self, hud: Hud, root: Path) -> None:
        self.hud = hud
        self.root = root
        self.writers: dict[str, DatasetWriter] = {}
        self.dataset: str | None = None  # what was written, for the summary and the JSON
        self.errors: list[str] = []  # this process's and the workers' recording errors

    def dataset_root(self, env: str, envs: set[str]) -> Path:
        return self.root if len(envs) <= 1 else self.root / env

    def _envs(self) -> set[str]:
        return {case.row.env for case in self.hud.cases.values()}

    @pytest.hookimpl
    def pytest_hud_dataset_link(self, row: Row) -> str | None:
        """In an xdist worker, the dataset the row's part will be merged into (its episode
        index changes at the merge)."""
        if not self.hud.is_worker or not row.get("dataset") or not row.get("env"):
            return None
        return str(self.dataset_root(str(row["env"]), self._envs()))

    @pytest.hookimpl
    def pytest_hud_dataset_parts(self) -> dict[str, str]:
        """Each env's parts folder, beside the dataset the recording merges into (for
        episodes recorded elsewhere: a delegated rollout's)."""
        envs = self._envs()
        return {env: str(parts_dir(self.dataset_root(env, envs))) for env in envs}

    # -- recording -------------------------------------------------------------------------
    @pytest.hookimpl
    def pytest_hud_episode_observers(self) -> list[ObserverFactory]:
        return [self._record_observer]

    def _record_observer(self, run: EpisodeRun | None, spaces: Spaces) -> EpisodeObserver:
        if run is None:
            raise ValueError("a recorded episode needs its run: the row names its dataset")
        env = run.task.env
        writer = self.writers.get(env)
        if writer is None:
            from pytest_hud.robot.record.writer import DatasetWriter

            root = self.dataset_root(env, self._envs())
            if self.hud.is_worker:
                root = parts_dir(root) / self.hud.worker_id
            writer = self.writers[env] = DatasetWriter(root, graded=True)
        return writer.observer(run, spaces)

    @pytest.hookimpl
    def pytest_hud_episode_result(self, result: RolloutResult) -> None:
        """The recorded episode's commit waits for its grade (None: grading failed)."""
        ds = result.dataset
        writer = self.writers.get(result.task.env)
        if writer is not None and ds and ds.get("episode_index") is not None:
            writer.grade(ds["episode_index"], result.grade if result.ok else None)

    # -- finishing -------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object) -> None:
        """On the controller, a worker finished: keep the recording errors it sent."""
        self.errors.extend(self.hud.from_worker(node, KEY))

    @pytest.hookimpl(tryfirst=True)  # registered after the session: runs before its gates
    def pytest_sessionfinish(self) -> None:
        """Every dataset of this process finalized (no rollout writes any more); a worker
        sends its errors to the controller."""
        self.hud.stop_rollouts()
        for writer in self.writers.values():  # each dataset's one error; the others close
            try:
                writer.finalize()
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
        if self.hud.is_worker:
            self.hud.to_controller(KEY, self.errors)

    @pytest.hookimpl
    def pytest_hud_finish_rows(self, rows: Mapping[str, Row]) -> None:
        """Where rows are collected: merge the workers' parts and point each row at its
        episode; a dataset that cannot be written fails the session."""
        try:
            self._finish(rows)
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
        for error in self.errors:
            self.hud.fail(f"recording failed: {error}")

    def _finish(self, by_id: Mapping[str, Row]) -> None:
        rows = list(by_id.values())
        envs = sorted({str(row["env"]) for row in rows if row.get("env") is not None})
        collected = self._envs()
        if collected:
            finals = {env: self.dataset_root(env, collected) for env in envs}
        else:  # the controller under xdist collects nothing: derive from the rows
            finals = {env: self.dataset_root(env, set(envs)) for env in envs}
        done = []
        errors = []
        for env, final in finals.items():
            parts = parts_dir(final)
            _point_rows_at_what_is_there(rows, env)
            try:
                if parts.exists():
                    self._merge_parts(rows, parts, final, env)
            except Exception as exc:  # the next env's dataset is merged all the same; its
                errors.append(exc)  # rows keep pointing at their episodes in the parts
            if (final / "meta" / "info.json").exists():
                done.append(str(final))
        if done:
            self.dataset = done[0] if len(done) == 1 else str(self.root)
        if errors:
            raise errors[0]

    def _merge_parts(self, every: list[Row], parts_folder: Path, final: Path, env: str) -> None:
        from pytest_hud.robot.record.merge import merge_datasets

        rows = [r for r in every if r.get("env") == env]
        order = {nid: i for i, nid in enumerate(self.hud.order)}
        first: dict[str, int] = {}
        for row in rows:  # parts in the order of each worker's first test
            ds = row.get("dataset")
            if ds and ds.get("episode_index") is not None:
                pos = order.get(row["nodeid"], len(order))
                first[ds["root"]] = min(first.get(ds["root"], pos), pos)
        parts = sorted(
            (p for p in parts_folder.iterdir() if p.is_dir()),
            key=lambda p: (first.get(str(p), 1 << 30), p.name),
        )
        offsets: dict[str, int] = {}
        total = 0
        for part in parts:
            info = part / "meta" / "info.json"
            if info.exists():
                offsets[str(part)] = total
                total += int(json.loads(info.read_text()).get("total_episodes") or 0)
        if total:
            fresh = not final.exists()
            try:
                merge_datasets(parts, final)
            except Exception as exc:  # a full disk, say: no partial dataset, the parts kept
                if fresh:
                    shutil.rmtree(final, ignore_errors=True)
                raise RuntimeError(
                    f"merging the workers' datasets into {final} failed "
                    f"({type(exc).__name__}: {exc}); no partial dataset is left there, and "
                    f"the parts are kept whole in {parts_folder} (each one reads back as a "
                    "LeRobot dataset); free space, then record again with the same "
                    "--hud-record folder: the workers append to their parts and the merge "
                    "runs again"
                ) from exc
        for row in rows:  # point every row at its episode in the merged dataset
            ds = row.get("dataset")
            index = ds.get("episode_index") if ds else None
            if ds and ds.get("root") in offsets and index is not None:
                ds["part"], ds["root"] = ds["root"], str(final)
                ds["episode_index"] = offsets[ds["part"]] + int(index)
        shutil.rmtree(parts_folder, ignore_errors=True)

    # -- reporting -------------------------------------------------------------------------
    @pytest.hookimpl
    def pytest_hud_results_meta(self) -> dict[str, object]:
        return {"dataset": self.dataset}

    @pytest.hookimpl
    def pytest_hud_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.dataset is not None:
            terminalreporter.write_line(f"hud dataset: {self.dataset}")


def _point_rows_at_what_is_there(rows: Iterable[Row], env: str) -> None:
    """Rows whose episode is beyond its dataset's last whole one (a disk that filled
    while it was written) point at none, saying so."""
    totals: dict[str, int] = {}
    for row in rows:
        ds = row.get("dataset")
        index = ds.get("episode_index") if ds else None
        if row.get("env") != env or not ds or index is None:
            continue
        root = str(ds.get("root"))
        if root not in totals:
            info = Path(root) / "meta" / "info.json"
            try:
                totals[root] = int(json.loads(info.read_text()).get("total_episodes") or 0)
            except (OSError, ValueError):
                totals[root] = 0
        if int(index) >= totals[root]:
            ds["episode_index"] = None
            ds["discarded"] = NOT_RECORDED


def enable(settings: Settings, hud: Hud) -> RecordingPlugin | None:
    """The feature's plugin for this session (--hud-record), else None."""
    if settings.record is None:
        return None
    return RecordingPlugin(hud, record_root(settings.record))
