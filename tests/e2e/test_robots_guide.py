"""The robots guide's "Try it without a robot" section runs as written and ends as it says:
its two files in an empty folder outside the checkout, the unattended run (exit 0, every row
graded by the detector, safety counts in the results) and the blinded A/B with the web
console, answered from a headless Chromium as a person would (exit 0, the rows the budget
left say so in the results, the ledger and the html report). The robot is the shipped
physics SO-101 plugin (plugins/lerobot_robot_so101_sim): no hardware, and the guide says so.
tests/project/test_extras.py runs the same from a clean ``pip install`` of the wheels."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from browser import Browser
from needs import require, require_lerobot
from paths import ROOT
from robots_guide import check_results, commands, env_with, files, run_guide

pytestmark = [pytest.mark.lerobot, pytest.mark.timeout(3600)]


def test_the_guide_names_its_files_and_says_how_each_command_ends() -> None:
    assert sorted(files()) == ["so101_sim.py", "test_so101.py"]
    assert [(c.how, c.exit) for c in commands()] == [("run", 0), ("web operator", 0)]


def test_the_try_it_section_runs_as_written(tmp_path: Path) -> None:
    require_lerobot()
    require(
        importlib.util.find_spec("lerobot_robot_so101_sim"),
        "the robot-sim extra's plugin",
        "pip install -e '.[robot-sim]' -e plugins/lerobot_robot_so101_sim (scripts/setup)",
    )
    folder, locks = tmp_path / "try-it", tmp_path / "locks"
    folder.mkdir()
    locks.mkdir(mode=0o700)
    assert not folder.resolve().is_relative_to(ROOT)
    env = env_with(
        Path(sys.executable).parent,
        HF_LEROBOT_CALIBRATION=str(tmp_path / "calibration"),
        PYTEST_HUD_ROBOT_LOCKS=str(locks),
    )
    run_guide(folder, env, Browser)
    check_results(folder)
