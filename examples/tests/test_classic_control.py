"""Policy evaluation as tests: every task row is one item, its episode's success the verdict."""

import pytest
from envs.pendulum import balance, swing_up


@pytest.mark.hud(tasks=[balance.task(seed=s) for s in range(6)], min_success=0.0)
def test_balance(hud_result):
    assert hud_result.success, hud_result.summary()


@pytest.mark.hud(tasks=[swing_up.task(seed=s) for s in range(2)])
def test_swing_up_runs_the_whole_episode(hud_result):
    assert hud_result.steps == 200
