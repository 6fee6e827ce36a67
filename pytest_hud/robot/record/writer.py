"""Record rollouts into one LeRobot v3 dataset, whole episodes on one writer thread. A failed
commit is rolled back (:mod:`.rollback`) and stops the writer; a full disk stops recording
quietly and ``finalize()`` reports it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.errors import DatasetError
from pytest_hud.robot.agent.timed import INSTRUCTION
from pytest_hud.robot.contract import Contract, Spaces
from pytest_hud.robot.episode import EpisodeRun
from pytest_hud.robot.record.commit import (
    close_dataset,
    open_dataset,
    push_dataset,
    write_episode,
)
from pytest_hud.robot.record.grade import (
    GradeFuture,
    Grades,
    episode_grade,
    set_outcome,
    wait_grade,
)
from pytest_hud.robot.record.rollback import Snapshot, disk_full, free_space, stopped_message
from pytest_hud.robot.record.schema import _ERRORED, _TRUE, _build_schema, _Schema
from pytest_hud.robot.record.source import (
    CONTRACT_COLUMN,
    ROW_COLUMN,
    episode_source,
    has_source_columns,
    run_contract,
)
from pytest_hud.robot.record.store import (
    _lerobot_dataset,
    _probe_writable,
    _read_info,
    _require_token,
    _safe_name,
    check_append,
    inspect_root,
)

__all__ = ["DatasetWriter"]


def _running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class DatasetWriter:
    """One LeRobot v3 dataset fed by every rollout of this process (see the module doc)."""

    #: Named in errors: how users point recording elsewhere.
    flag = "--hud-record=OTHER_DIR (or RECORD_DIR)"

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        repo_id: str | None = None,
        fps: float | None = None,
        video: bool = True,
        push: str | bool | None = None,
        camera_keys: Mapping[str, str] | None = None,
        graded: bool = False,
    ) -> None:
        base = root if root is not None else os.environ.get("RECORD_DIR") or "data"
        self.root = Path(base).expanduser().absolute()
        self.fps = fps
        self.video = video
        self.camera_keys = dict(camera_keys or {})
        if push is None or push is True:
            target = os.environ.get("HF_REPO") or None
            if push is True and not target:
                raise DatasetError("push=True needs a target: set HF_REPO (user/name)")
        else:
            target = push or None
        if target and "/" not in target:
            target = f"{target}/{_safe_name(self.root.name)}"
        self.push_repo: str | None = target
        self.private = os.environ.get("HF_PRIVATE", "").strip().lower() in _TRUE
        self.repo_id = target or repo_id or f"local/{_safe_name(self.root.name)}"

        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: list[concurrent.futures.Future[None]] = []
        self._prepared = False
        self._created_root = False
        self._restart = False
        self._existing: dict[str, object] | None = None  # info.json of a dataset to append to
        self._fixed: _Schema | None = None  # the schema every episode must match
        self._next_index = 0
        self._ds: object = None  # the LeRobotDataset (writer thread only)
        self._reopen = False  # _ds is finalized for good: reopen it for the next episode
        self._error: BaseException | None = None
        #: a full disk: why (the episode it failed on, the cause); recording has stopped
        self._full: tuple[int, str] | None = None
        self.unrecorded = 0  # episodes not recorded since the disk filled
        self._finalized = False
        self._result: Path | None = None
        self._default_fps: float | None = None
        self._default_robot_type: str | None = None
        self._warned: set[str] = set()
        self.episodes = 0  # committed so far (on disk)
        #: Commits wait for :meth:`grade` (the plugin grades every recorded episode).
        self.graded = graded
        self._grades = Grades()
        self._columns: dict[str, object] = {}  # the saved episode's grade (writer thread)
        #: Episodes carry their row and contract (.source); not when appending to a
        #: dataset recorded without them (one episode-metadata schema per dataset).
        self._with_source = True
        atexit.register(_finalize_at_exit, weakref.ref(self))

    def __repr__(self) -> str:
        return f"<DatasetWriter {self.root} episodes={self._next_index}>"

    # -- before the run ------------------------------------------------------------
    def check(self, contract: Contract | Mapping[str, Any]) -> None:
        """Everything that can be refused before a run starts: lerobot present, the
        schema (camera keys, sizes, fps), the folder, appending, the push token."""
        contract = Contract.from_dict(contract)
        self._default_fps = contract.control_rate
        self._default_robot_type = contract.robot_type
        schema = self._schema(contract.spaces(), contract.control_rate, contract.robot_type)
        with self._lock:
            self._prepare(schema)

    def _schema(self, spaces: Spaces, rate: float | None, robot_type: str | None) -> _Schema:
        return _build_schema(
            spaces,
            fps=self.fps if self.fps is not None else rate,
            robot_type=robot_type,
            video=self.video,
            camera_keys=self.camera_keys,
            warn=self._warn_depth,
        )

    def _warn_depth(self, name: str) -> None:
        if name not in self._warned:
            self._warned.add(name)
            warnings.warn(
                f"DatasetWriter: depth camera {name!r} is not recorded "
                "(LeRobot videos are 8-bit RGB)",
                stacklevel=4,
            )

    def _prepare(self, schema: _Schema) -> None:
        """Check the folder once, then this schema against the dataset's (under the lock)."""
        if self._error is not None:
            raise self._error
        if self._finalized:
            raise DatasetError(f"the dataset writer for {self.root} is already finalized")
        if not self._prepared:
            _lerobot_dataset()  # fail early without lerobot; import it before steps run
            if self.push_repo:
                _require_token(self.push_repo)
            info, restart = inspect_root(self.root, self.flag)
            if restart:
                self._restart = True
            if info is not None:
                self._next_index = int(info.get("total_episodes") or 0)
                self._with_source = has_source_columns(self.root)
            else:
                self._created_root = _probe_writable(self.root, self.flag)
            self._existing = info
            self._prepared = True
        self._match(schema)

    def _match(self, schema: _Schema) -> None:
        """Refuse a schema that cannot go into this dataset."""
        if self._existing is not None:
            check_append(self._existing, schema, self.root, self.flag)
        elif self._fixed is not None:
            fixed = self._fixed
            if (fixed.fps, fixed.robot_type, fixed.keys()) != (
                schema.fps,
                schema.robot_type,
                schema.keys(),
            ) or (schema.resolved and fixed.features() != schema.features()):
                raise DatasetError(
                    f"this rollout's contract does not match the dataset being recorded at "
                    f"{self.root} (fps {fixed.fps}, features {fixed.keys()}; this one: fps "
                    f"{schema.fps}, {schema.keys()}); record different envs into different "
                    "folders"
                )

    # -- the observer --------------------------------------------------------------
    def observer(self, run: EpisodeRun | None, spaces: Spaces) -> _EpisodeRecorder:
        """An ``ObserverFactory``: ``agent.observers.append(writer.observer)``."""
        rate, robot_type = _run_contract(run)
        if rate is None:
            rate = self._default_fps
        if robot_type is None:
            robot_type = self._default_robot_type
        schema = self._schema(spaces, rate, robot_type)
        with self._lock:
            self._prepare(schema)
        source = episode_source(run, spaces, rate, robot_type)
        return _EpisodeRecorder(self, schema, _task_text(run), source)

    def _resolved(self, schema: _Schema) -> None:
        with self._lock:
            self._match(schema)

    def _commit(
        self,
        schema: _Schema,
        frames: list[dict[str, np.ndarray]],
        task: str | list[str],
        source: dict[str, str] | None = None,
    ) -> dict:
        count = len(frames)  # the writer thread empties the list once written
        with self._lock:
            if self._error is not None:
                raise self._error
            if self._full is not None:  # the disk filled: the rollouts go on, unrecorded
                self.unrecorded += 1
                frames.clear()
                return {
                    "dataset": {
                        "root": str(self.root),
                        "episode_index": None,
                        "frames": count,
                        "discarded": f"not recorded: the disk holding {self.root} is full",
                    }
                }
            if self._finalized:
                raise DatasetError(f"the dataset at {self.root} was finalized mid-episode")
            self._match(schema)
            if self._fixed is None:
                self._fixed = schema
            index = self._next_index
            self._next_index += 1
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix="hud-dataset"
                )
            grade = self._grades.expect(index) if self.graded else None
            future = self._executor.submit(
                self._write, schema, frames, task, index, grade, source or {}
            )
            self._pending = [f for f in self._pending if not f.done()] + [future]
        if not _running_loop() and grade is None:
            future.result()
        return {"dataset": {"root": str(self.root), "episode_index": index, "frames": count}}

    def grade(self, index: int, grade: Mapping[str, Any] | None) -> None:
        """Hand episode ``index`` its grade (None: it could not be graded); with
        ``graded=True`` its commit waits for this (bounded: :mod:`.grade`)."""
        self._grades.grade(index, grade)

    def _write(
        self,
        schema: _Schema,
        frames: list[dict[str, np.ndarray]],
        task: str | list[str],
        index: int,
        grade: GradeFuture | None = None,
        source: dict[str, str] | None = None,
    ) -> None:
        """Writer thread: one whole episode, then finalize so it reads back after a crash."""
        ds = None
        if self._full is not None:  # queued before the disk filled: not recorded either
            frames.clear()
            with self._lock:
                self.unrecorded += 1
            return
        if self._error is not None:  # an earlier commit failed: the indices no longer hold
            frames.clear()
            raise self._error
        before = None
        try:
            self._columns.clear()
            self._columns.update(episode_grade(frames, wait_grade(grade, index)))
            if self._with_source:  # every episode has both columns (empty: unknown)
                self._columns.update({ROW_COLUMN: "", CONTRACT_COLUMN: "", **(source or {})})
            before = Snapshot.take(self.root)
            ds = self._dataset(schema)
            if not write_episode(ds, frames, task, index):
                self._reopen = True  # the next episode appends to the finalized dataset
            self.episodes += 1
        except BaseException as exc:
            error = self._failed(exc, index, ds, before)
            if error is not None:
                raise error from exc
        finally:
            frames.clear()

    def _failed(
        self, exc: BaseException, index: int, ds: Any, before: Snapshot | None
    ) -> DatasetError | None:
        """Writer thread: episode ``index``'s commit failed; undo it and stop (quietly on
        a full disk: None; else the error later calls raise)."""
        if ds is not None:
            with contextlib.suppress(Exception):
                ds.clear_episode_buffer()
        full = disk_full(exc, self.root)  # asked before the undo frees the partial files
        changed = before.restore() if before is not None else []
        self._ds = None  # its in-memory state holds the failed episode: never write it
        if full and not changed:
            self._full = (index, f"{free_space(self.root)}; {type(exc).__name__}: {exc}")
            return None
        undone = (
            f"; {len(changed)} older file(s) changed and could not be put back: "
            f"{', '.join(map(str, changed[:3]))}"
            if changed
            else "; its partial files were removed, the episodes before it are whole"
        )
        error = exc if isinstance(exc, DatasetError) else None
        self._error = error or DatasetError(
            f"recording episode {index} into {self.root} failed: {type(exc).__name__}: "
            f"{exc}{undone}"
        )
        return self._error

    def _dataset(self, schema: _Schema) -> object:
        if self._ds is None or self._reopen:
            self._ds = open_dataset(
                self.root,
                self.repo_id,
                schema,
                append=self._existing is not None or self._reopen,
                restart=self._restart and not self._reopen,
                video=self.video,
                columns=self._columns,
                flag=self.flag,
            )
            self._reopen = False
        return self._ds

    # -- the end -------------------------------------------------------------------
    def full_disk_error(self) -> DatasetError | None:
        """The one error for a disk that filled while recording (None: it did not)."""
        if self._full is None:
            return None
        try:
            kept = int((_read_info(self.root) or {}).get("total_episodes") or 0)
        except DatasetError:
            kept = self.episodes
        return DatasetError(stopped_message(self.root, *self._full, kept, self.unrecorded))

    def flush(self) -> None:
        """Wait for every queued episode to be on disk (re-raises a failed commit)."""
        with self._lock:
            pending = list(self._pending)
        concurrent.futures.wait(pending)
        if self._error is not None:
            raise self._error

    def finalize(self) -> Path | None:
        """Wait for queued commits, close the dataset, push it if asked. Idempotent.

        Returns the dataset root, or None when nothing was recorded."""
        with self._lock:
            if self._finalized:
                if self._error is not None:
                    raise self._error
                return self._result
            self._finalized = True
            pending = list(self._pending)
            executor, self._executor = self._executor, None
        self._grades.release()
        concurrent.futures.wait(pending)
        if executor is not None:
            executor.shutdown(wait=True)
        if self._error is not None:
            raise self._error
        full = self.full_disk_error()
        if full is not None:  # the dataset is its last finalized state: nothing to close
            self._error = full
            raise full
        ds = self._ds
        if ds is None:
            if self._created_root:
                with contextlib.suppress(OSError):
                    self.root.rmdir()  # only if still empty
            return None
        close_dataset(ds)
        self._result = self.root
        if self.push_repo:
            try:
                push_dataset(ds, self.root, self.push_repo, private=self.private)
            except DatasetError as exc:
                self._error = exc
                raise
        return self._result

    async def afinalize(self) -> Path | None:
        """``finalize`` off the event loop."""
        return await asyncio.to_thread(self.finalize)


def _finalize_at_exit(ref: weakref.ReferenceType[DatasetWriter]) -> None:
    writer = ref()
    if writer is None or writer._finalized:
        return
    try:
        writer.finalize()
    except Exception as exc:  # at exit there is no one left to raise to
        print(f"pytest-hud: finalizing the dataset at {writer.root} failed: {exc}", file=sys.stderr)


# -- one episode on its way into the dataset: frames buffered until the episode ends, then
# committed through the writer (or discarded when the episode errored) -----------------


class _EpisodeRecorder:
    """One episode's frames, buffered until the episode ends."""

    def __init__(
        self,
        writer: DatasetWriter,
        schema: _Schema,
        task: str,
        source: dict[str, str] | None = None,
    ) -> None:
        self.writer = writer
        self.schema = schema
        self.task = task
        self.source = source or {}  # the episode's row and contract columns (.source)
        self.frames: list[dict[str, np.ndarray]] = []
        #: each frame's task: the episode's, or the instruction an operator sent since
        self.tasks: list[str] = []
        self._checked = False

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        if not self._checked:
            self.schema = self.schema.resolve(data, action)
            self.writer._resolved(self.schema)
            self._checked = True
        self.frames.append(self.schema.frame(data, action))
        told = INSTRUCTION.get()
        self.tasks.append((told() if told is not None else "") or self.task)

    def outcome(self, reward: float | None, terminated: bool) -> None:
        """The env's answer to the last frame's action."""
        if self.frames:
            set_outcome(self.frames[-1], reward, terminated)

    def end(self, ok: bool) -> dict[str, Any]:
        root = str(self.writer.root)
        if not ok:
            self.frames = []
            return {"dataset": {"root": root, "episode_index": None, "discarded": _ERRORED}}
        if not self.frames:
            return {"dataset": {"root": root, "episode_index": None, "discarded": "no frames"}}
        frames, self.frames = self.frames, []
        tasks, self.tasks = self.tasks, []
        task: str | list[str] = tasks if set(tasks) - {self.task} else self.task
        return self.writer._commit(self.schema, frames, task, self.source)


def _run_contract(run: EpisodeRun | None) -> tuple[float | None, str | None]:
    """control_rate and robot_type of the contract the run's robot capability carries."""
    raw = run_contract(run)
    if not raw:
        return None, None
    contract = Contract.from_dict(raw)
    return contract.control_rate, contract.robot_type


def _task_text(run: EpisodeRun | None) -> str:
    if run is None:
        return ""
    return run.prompt or run.task.key
