"""``--hud-record``: one LeRobot dataset per env, recorded by each process and, under
xdist, merged by the controller from the workers' parts in test order."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_hud._plugin.internals import worker_id
from pytest_hud._plugin.state import SessionState

__all__ = ["RecordingMixin"]


class RecordingMixin(SessionState):
    """The session's dataset recording."""

    def _setup_recording(self, record: str) -> None:
        """``--hud-record``: lerobot must be there (one clear message, at configure time).
        One dataset per env (the root itself when the run has one env); each xdist worker
        records a part that the controller merges at the end."""
        import importlib.util

        if importlib.util.find_spec("lerobot") is None:
            raise pytest.UsageError(
                "--hud-record writes LeRobot v3 datasets and needs lerobot: install it with "
                "scripts/setup --lerobot (or .ci/install-lerobot .venv), or drop --hud-record"
            )
        root = Path(record or os.environ.get("RECORD_DIR") or "data").expanduser().absolute()
        if root.exists() and not root.is_dir():
            raise pytest.UsageError(f"--hud-record: {root} is a file; point it at a folder")
        self.record_root = root
        self.evaluator.observers.append(self._record_observer)
        self.evaluator.finished.append(self._grade_episode)

    def _dataset_root(self, env: str) -> Path:
        assert self.record_root is not None
        envs = {case.row.env for case in self.evaluator.cases.values()}
        return self.record_root if len(envs) <= 1 else self.record_root / env

    def _record_observer(self, run: Any, spaces: Any) -> Any:
        env = run.task.env
        writer = self.writers.get(env)
        if writer is None:
            from pytest_hud.robot.record.writer import DatasetWriter

            root = self._dataset_root(env)
            if self.is_worker:
                root = _parts_dir(root) / worker_id(self.config)
            writer = self.writers[env] = DatasetWriter(root, graded=True)
        return writer.observer(run, spaces)

    def _grade_episode(self, result: Any) -> None:
        """The recorded episode's commit waits for its grade (None: grading failed)."""
        ds = result.dataset
        writer = self.writers.get(result.task.env)
        if writer is not None and ds and ds.get("episode_index") is not None:
            writer.grade(ds["episode_index"], result.grade if result.ok else None)

    def _finish_recording(self) -> None:
        if self.record_root is None:
            return
        for writer in self.writers.values():
            writer.finalize()
        if self.is_worker:
            return
        envs = sorted({row["env"] for row in self.rows.values()})
        finals = {env: self._dataset_root(env) for env in envs} if self.evaluator.cases else {}
        if not finals:  # the controller under xdist collects nothing: derive from the rows
            single = len(envs) <= 1
            finals = {env: self.record_root if single else self.record_root / env for env in envs}
        done = []
        for env, final in finals.items():
            parts_dir = _parts_dir(final)
            if parts_dir.exists():
                self._merge_parts(env, parts_dir, final)
            if (final / "meta" / "info.json").exists():
                done.append(str(final))
        if done:
            self.dataset = done[0] if len(done) == 1 else str(self.record_root)

    def _merge_parts(self, env: str, parts_dir: Path, final: Path) -> None:
        import shutil

        from pytest_hud.robot.record.merge import merge_datasets

        rows = [r for r in self.rows.values() if r["env"] == env]
        first: dict[str, int] = {}
        for row in rows:  # parts in the order of each worker's first test
            ds = row.get("dataset") or {}
            if ds.get("episode_index") is not None:
                pos = self._position(row["nodeid"])
                first[ds["root"]] = min(first.get(ds["root"], pos), pos)
        parts = sorted(
            (p for p in parts_dir.iterdir() if p.is_dir()),
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
            merge_datasets(parts, final)
        for row in rows:  # point every row at its episode in the merged dataset
            ds = row.get("dataset") or {}
            if ds.get("root") in offsets and ds.get("episode_index") is not None:
                ds["part"], ds["root"] = ds["root"], str(final)
                ds["episode_index"] = offsets[ds["part"]] + int(ds["episode_index"])
        shutil.rmtree(parts_dir, ignore_errors=True)

    def _merged_root(self, row: dict[str, Any]) -> str | None:
        """In an xdist worker, the dataset its part will be merged into."""
        if not self.is_worker or self.record_root is None or not row.get("dataset"):
            return None
        return str(self._dataset_root(row["env"]))

    def _position(self, nodeid: str) -> int:
        try:
            return self._order.index(nodeid)
        except ValueError:
            return len(self._order)


def _parts_dir(root: Path) -> Path:
    """Where xdist workers record their parts before the controller merges them."""
    return root.parent / f".{root.name}.parts"
