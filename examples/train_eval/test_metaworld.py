"""MetaWorld MT1 rows for the train/eval loop: ``MW_TASKS`` (comma-separated) x seeds
``MW_SEED0`` .. ``MW_SEED0 + MW_SEEDS - 1``. The defaults (all of metaworld_env.TASKS,
seeds 100..109) are the evaluation seeds README.md's main job runs; run.py sets all three
(recording: seeds 0..9)."""

import os

import pytest
from metaworld_env import MT1, TASKS

_tasks = [t for t in os.environ.get("MW_TASKS", ",".join(TASKS)).split(",") if t]
_seed0 = int(os.environ.get("MW_SEED0", "100"))
_seeds = range(_seed0, _seed0 + int(os.environ.get("MW_SEEDS", "10")))


@pytest.mark.hud(tasks=[MT1[t].task(seed=s) for t in _tasks for s in _seeds])
def test_mt1(hud_result):
    assert hud_result.success, hud_result.summary()
