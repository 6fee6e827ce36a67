"""A recorded dataset read back for replay (pytest_hud.robot.record.reader): every frame
mapped back onto the env's observation names exactly as it was sent, the episode's
source columns, and appending to a dataset recorded before those columns existed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from datasets_synthetic import CAMERA_CONTRACT
from needs import require_lerobot

from pytest_hud.robot.contract import Contract
from pytest_hud.robot.record.reader import RecordedDataset, env_observations, episode_schema
from pytest_hud.robot.record.source import CONTRACT_COLUMN, ROW_COLUMN
from pytest_hud.robot.record.writer import DatasetWriter

pytestmark = pytest.mark.lerobot_version


@pytest.fixture(autouse=True)
def _lerobot() -> None:
    require_lerobot()


def episode(writer: DatasetWriter, steps: int, seed: int) -> list[dict[str, np.ndarray]]:
    """One episode through the observer API (no run: as a bare observer records); what
    the env sent each tick, the action included."""
    writer.check(CAMERA_CONTRACT)
    spaces = Contract.from_dict(CAMERA_CONTRACT).spaces()
    rng = np.random.default_rng(seed)
    recorder = writer.observer(None, spaces)
    sent = []
    for _ in range(steps):
        data = {
            "cam/top": rng.integers(0, 256, (32, 40, 3), dtype=np.uint8),
            "arm": rng.standard_normal(2).astype(np.float32),
            "gripper": rng.standard_normal(1).astype(np.float32),
        }
        action = rng.standard_normal(3).astype(np.float32)
        recorder.step(data, action)
        recorder.outcome(0.0, False)
        sent.append({**data, "action": action})
    recorder.end(True)
    return sent


def test_frames_map_back_onto_what_the_env_sent(tmp_path: Path) -> None:
    writer = DatasetWriter(tmp_path / "ds", video=False)  # PNG frames: lossless
    sent = [episode(writer, 5, seed=0), episode(writer, 3, seed=1)]
    writer.finalize()
    ds = RecordedDataset.open(tmp_path / "ds")
    assert [(e.index, e.length) for e in ds.episodes] == [(0, 5), (1, 3)]
    for ep, ticks in zip(ds.episodes, sent, strict=True):
        assert ep.row is None  # recorded without a run
        assert ep.contract is not None
        assert set(ep.contract["features"]) == set(CAMERA_CONTRACT["features"])
        frames = ds.frames(ep)
        np.testing.assert_array_equal(frames.actions, np.stack([t["action"] for t in ticks]))
        schema = episode_schema(ep.contract, ds.fps, video=False)
        back = env_observations(schema, frames, ds.features)
        assert len(back) == len(ticks)
        for got, want in zip(back, ticks, strict=True):
            assert set(got) == {"cam/top", "arm", "gripper"}
            for key in got:
                np.testing.assert_array_equal(got[key], want[key])
                assert got[key].dtype == want[key].dtype
    assert ds.std("action") is not None and ds.std("action").shape == (3,)


def test_appending_to_a_dataset_without_source_columns_keeps_its_layout(tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    root = tmp_path / "ds"
    writer = DatasetWriter(root, video=False)
    episode(writer, 4, seed=0)
    writer.finalize()
    [meta_file] = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    table = pq.read_table(meta_file)
    assert {ROW_COLUMN, CONTRACT_COLUMN} <= set(table.column_names)
    # as a dataset recorded before pytest-hud kept the columns
    pq.write_table(table.drop_columns([ROW_COLUMN, CONTRACT_COLUMN]), meta_file)
    writer = DatasetWriter(root, video=False)
    episode(writer, 2, seed=1)
    writer.finalize()
    files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    assert len(files) == 2
    assert all(ROW_COLUMN not in pq.read_schema(f).names for f in files)
    meta = LeRobotDatasetMetadata("local/ds", root=root)  # one schema: lerobot reads it
    assert meta.total_episodes == 2
    ds = RecordedDataset.open(root)
    assert [(e.index, e.row, e.contract) for e in ds.episodes] == [(0, None, None), (1, None, None)]
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 2
