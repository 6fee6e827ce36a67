"""wrap(env) / hud_wrap in real pytest runs: a hand-written CartPole loop (real
gymnasium) becomes hud rows -- terminal table, results JSON, gates, GIF -- with and
without xdist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from line_suite import run

LOOP = """
import gymnasium as gym
import numpy as np
import pytest
import pytest_hud


def policy(obs):
    # push toward the side the pole leans: balances CartPole for hundreds of steps
    return int(obs[2] + 0.5 * obs[3] > 0)


def evaluate(env, episodes, act):
    returns = []
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        done, total = False, 0.0
        while not done:
            obs, reward, terminated, truncated, info = env.step(act(obs))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return returns


def balanced(info, total_reward):
    return total_reward >= 100


def test_good_loop(hud_wrap):
    env = hud_wrap(gym.make("CartPole-v1", render_mode="rgb_array", max_episode_steps=120),
                   success=balanced, name="balance")
    assert min(evaluate(env, 3, policy)) >= 100


def test_bad_loop():
    env = pytest_hud.wrap(gym.make("CartPole-v1", max_episode_steps=120),
                          success=balanced, name="push-left")
    assert min(evaluate(env, 2, lambda obs: 0)) >= 100
"""


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_hand_written_gym_loop_becomes_hud_rows(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    pytester.makepyfile(test_loop=LOOP)
    out = pytester.path / "r.json"
    result = run(pytester, f"--hud-results={out}", "--hud-min-success=0.5", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert "hud:" in text and "on 5 rollouts" in text, text
    assert "CartPole-v1" in text and "balance" in text and "push-left" in text, text
    doc = json.loads(out.read_text())
    rows = doc["rollouts"]
    assert len(rows) == 5 and all(r["wrapped"] for r in rows)
    good = [r for r in rows if r["task_id"] == "balance"]
    bad = [r for r in rows if r["task_id"] == "push-left"]
    assert [r["seed"] for r in good] == [0, 1, 2] and [r["seed"] for r in bad] == [0, 1]
    assert all(r["success"] and r["steps"] == 120 and r["total_reward"] == 120 for r in good)
    assert all(not r["success"] and r["steps"] < 30 for r in bad)
    assert all(Path(r["video"]).exists() for r in good)  # rendered: an animation each
    assert all(r["video"] is None for r in bad)  # no render_mode: no frames
    assert doc["overall"]["episodes"] == 5 and doc["overall"]["successes"] == 3
    gate = next(g for g in doc["gates"] if g["name"] == "overall")
    assert gate["passed"], gate  # 3/5 >= 0.5
