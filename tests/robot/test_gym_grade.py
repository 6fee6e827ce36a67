"""What ``sim.result()`` says about a gym episode: the threshold judged on the final
total, ``terminated``/``truncated`` as gymnasium reports them, and an episode cut short
by the agent told apart from one the env ended. Real gymnasium envs."""

from __future__ import annotations

import numpy as np

from pytest_hud.robot import GymBridge


def _run(bridge: GymBridge, policy, limit: int) -> dict:
    for _ in range(limit):
        obs, done, _ = bridge.get_observation()
        if done[0]:
            break
        bridge.step(np.asarray([[policy(obs["observation/state"][0])]], np.float32))
    return bridge.result_slots()[0]


def test_a_negative_threshold_is_judged_on_the_final_total() -> None:
    """Pendulum, threshold -400, no torque from seed 0: the return ends far below -400;
    a running-total latch called this a success after the first step (-5 >= -400)."""
    bridge = GymBridge("Pendulum-v1", success_threshold=-400.0)
    bridge.reset(seed=0)
    after_one = _run(bridge, lambda s: 0.0, 1)
    assert after_one["total_reward"] > -400.0  # (what the latch used to keep)
    grade = _run(bridge, lambda s: 0.0, 1000)
    bridge.close()
    assert grade["steps"] == 200 and grade["total_reward"] < -400.0
    assert grade["success"] is False and grade["score"] == 0.0
    assert grade["truncated"] is True and grade["terminated"] is False  # its 200-step limit


def test_an_env_that_ends_at_its_goal_is_gradable_by_terminated() -> None:
    """MountainCar: push with the velocity and the car reaches the flag (terminated);
    idle, it runs into the 200-step limit (truncated). Reward is -1 either way."""
    bridge = GymBridge("MountainCar-v0")
    bridge.reset(seed=0)
    reached = _run(bridge, lambda s: 2.0 if s[1] >= 0 else 0.0, 1000)
    bridge.reset(seed=0)
    idle = _run(bridge, lambda s: 1.0, 1000)
    bridge.close()
    assert reached["terminated"] is True and reached["truncated"] is False
    assert reached["steps"] < 200
    assert idle["terminated"] is False and idle["truncated"] is True and idle["steps"] == 200


def test_an_episode_cut_by_max_steps_is_neither_terminated_nor_truncated() -> None:
    bridge = GymBridge("CartPole-v1", success_threshold=3)
    bridge.reset(seed=0)
    cut = _run(bridge, lambda s: 0.0, 3)  # the agent stops (as --hud-max-steps=3 does)
    bridge.close()
    assert cut["steps"] == 3 and cut["success"] is True  # the total at the cut: 3 >= 3
    assert cut["terminated"] is False and cut["truncated"] is False
