"""Synthetic episodes for the dataset writer's tests: frames from a seeded generator,
driven through the observer API as RobotAgent drives it (no env); and reading a dataset back
(lerobot, its parquet columns, PyAV for the videos)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.robot.contract import Contract
from pytest_hud.robot.record.writer import DatasetWriter

CAMERA_CONTRACT = {
    "control_rate": 10,
    "features": {
        "cam/top": {"role": "observation", "type": "rgb", "shape": [32, 40, 3]},
        "arm": {"role": "observation", "shape": [2], "names": ["x", "y"]},
        "gripper": {"role": "observation", "shape": [1]},
        "action": {"role": "action", "shape": [3], "names": ["dx", "dy", "grip"]},
    },
}


def synthetic_episode(
    writer: DatasetWriter, contract: dict[str, Any], steps: int, seed: int
) -> dict[str, Any]:
    """Drive one episode through the observer API (no env), as RobotAgent would."""
    writer.check(contract)  # as the plugin does at the first run; gives the fps
    spaces = Contract.from_dict(contract).spaces()
    rng = np.random.default_rng(seed)
    recorder = writer.observer(None, spaces)
    actions = []
    for _ in range(steps):
        data = {}
        for f in spaces.observation.values():
            if f.is_image:
                data[f.name] = rng.integers(0, 256, f.shape, dtype=np.uint8)
            else:
                data[f.name] = rng.standard_normal(f.size).astype(np.float32)
        action = rng.standard_normal(spaces.action_feature.size)
        actions.append(action.astype(np.float32))
        recorder.step(data, action)
    return recorder.end(True) | {"actions": np.stack(actions)}


def read(root: Path) -> tuple[Any, dict[str, np.ndarray]]:
    """The dataset through lerobot, plus its frame columns straight from the parquet files."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("local/test", root=root)
    table = pa.concat_tables(pq.read_table(p) for p in sorted((root / "data").glob("*/*.parquet")))
    cols = {}
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        if pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type):
            cols[name] = col.flatten().to_numpy(zero_copy_only=False).reshape(len(col), -1)
        else:
            cols[name] = col.to_numpy(zero_copy_only=False)
    return ds, cols


def episode_rows(ds: Any) -> list[dict[str, Any]]:
    return [
        {k: e[k] for k in ("episode_index", "length", "dataset_from_index", "dataset_to_index")}
        for e in ds.meta.episodes
    ]


def decode(mp4: Path) -> list[np.ndarray]:
    import av

    with av.open(str(mp4)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
