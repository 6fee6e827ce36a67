"""Synthetic episodes for the dataset writer's tests: frames from a seeded generator,
driven through the observer API as RobotAgent drives it (no env)."""

from __future__ import annotations

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
