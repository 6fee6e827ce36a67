"""An image env: each episode's camera shows up in the html report as an animation."""

import pytest
from envs.pusht import push_t


@pytest.mark.hud(tasks=[push_t.task(seed=s) for s in range(2)])
def test_push_t(hud_result):
    assert hud_result.success, hud_result.summary()
