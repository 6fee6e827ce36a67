"""MetaWorld MT1 rows for the train/eval loop: ``MW_TASKS`` (comma-separated) x seeds
``MW_SEED0`` .. ``MW_SEED0 + MW_SEEDS - 1`` (defaults: all of metaworld_env.TASKS, 0..4)."""

import os

import pytest
from metaworld_env import TASKS, mt1

_tasks = [t for t in os.environ.get("MW_TASKS", ",".join(TASKS)).split(",") if t]
_seed0 = int(os.environ.get("MW_SEED0", "0"))
_seeds = range(_seed0, _seed0 + int(os.environ.get("MW_SEEDS", "5")))


@pytest.mark.hud(tasks=[mt1.task(task=t, seed=s) for t in _tasks for s in _seeds])
def test_mt1(hud_result):
    assert hud_result.success, hud_result.summary()
