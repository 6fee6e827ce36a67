"""Genesis through LeRobot's env plugin lerobot-genesis (``pytest_hud.suites.genesis``:
``env.lerobot("genesis", task="FrankaReach-v0")``), on the stack that has it: LeRobot 0.6 on
Python 3.12 (CI's second stack, the ``genesis`` extra). On LeRobot 0.4.4 (.venv, where the
extra installs nothing) the env type is unknown and the error names the fix.

Real Genesis on the CPU: a scene build compiles its kernels (minutes cold, ~45 s with the
kernel cache warm), a step with the 240 x 320 camera costs ~0.1-1 s here, so the episodes
are short: the expert's reach, and a tiny random ACT against lerobot-eval's own ``rollout``
on the same seeds (the PushT/ALOHA fidelity test's yardstick)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
from typing import Any

import numpy as np
import pytest
from needs import require, require_lerobot

from pytest_hud import LocalRuntime, run

pytestmark = [pytest.mark.lerobot_version, pytest.mark.timeout(3600)]

MODULE = "pytest_hud.suites.genesis"
#: the tiny ACT's layout: lerobot-genesis's one camera, the Franka's 9 joints
GENESIS_ACT = {
    "image_key": "observation.image",
    "image_shape": (3, 240, 320),
    "state_dim": 9,
    "action_dim": 9,
    "span": (-1.0, 1.0),
}


@pytest.fixture
def genesis(monkeypatch: pytest.MonkeyPatch) -> Any:
    require_lerobot()
    if importlib.metadata.version("lerobot").startswith("0.4"):
        pytest.skip("LeRobot 0.4.4's stack: see test_the_plugin_is_named_where_it_is_absent")
    require(
        importlib.util.find_spec("lerobot_genesis") and importlib.util.find_spec("genesis"),
        "genesis-world and lerobot-genesis",
        "pip install 'pytest-hud[genesis]' on Python 3.12 (scripts/setup --lerobot-current)",
    )
    monkeypatch.setenv("PYTEST_HUD_GENESIS_STEPS", "120")
    from pytest_hud.plumbing.loader import load_module

    return load_module(MODULE, fresh=True)


def test_the_plugin_is_named_where_it_is_absent() -> None:
    """Without lerobot-genesis LeRobot has no ``genesis`` type: the error says what to
    install (on LeRobot 0.4.4's stack the extra installs nothing)."""
    require_lerobot()
    if importlib.util.find_spec("lerobot_genesis") is not None:
        pytest.skip("lerobot-genesis is installed here: the other tests run it")
    from pytest_hud.interop.lerobot.envs import LeRobotEnvError, make_config

    with pytest.raises(LeRobotEnvError, match=r"genesis-world and lerobot-genesis.*genesis\]"):
        make_config("genesis", task="FrankaReach-v0")


def test_the_expert_reaches_through_lerobots_env(genesis: Any) -> None:
    """genesis-expert on FrankaReach through LeRobot's make_env and processors: the
    contract is LeRobot's (one camera, the 9-d state and action), the reach succeeds."""
    from pytest_hud.suites.genesis import expert_agent

    seen: list[Any] = []

    class Spaces:
        def __init__(self, run: Any, spaces: Any) -> None:
            seen.append(spaces)

        def step(self, data: dict[str, Any], action: np.ndarray) -> None:
            pass

        def end(self, ok: bool) -> dict[str, Any]:
            return {}

    agent = expert_agent()
    agent.observers.append(Spaces)
    (result,) = asyncio.run(run(genesis.rows(1), agent, LocalRuntime(MODULE), rollout_timeout=3000))
    assert result.error is None, result.error
    assert result.success and result.steps < 120, result.steps
    assert result.prompt == "reach the franka target pose"
    spaces = seen[0]
    assert [f.shape for f in spaces.cameras] == [(240, 320, 3)]
    assert spaces.state.shape == (9,) and spaces.action_feature.size == 9


def test_the_plugin_gives_lerobot_evals_episodes(
    genesis: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny random ACT, seeds 0 and 1, 4 steps: the plugin's episodes (through the env
    module) and lerobot-eval's rollout on LeRobot's own env agree on length, success,
    summed reward."""
    from lerobot_fixtures import make_tiny_act

    from pytest_hud.interop.lerobot.reference import lerobot_episodes
    from pytest_hud.plumbing.loader import load_module
    from pytest_hud.robot import load_agent

    path = make_tiny_act(tmp_path / "act", **GENESIS_ACT)
    config = {"task": "FrankaReach-v0", "episode_length": 4}
    theirs = lerobot_episodes(path, "genesis", [0, 1], **config)
    monkeypatch.setenv("PYTEST_HUD_GENESIS_STEPS", "4")  # the module's env: LeRobot's limit

    def fresh(task: Any) -> Any:
        return load_module(MODULE, fresh=True).env

    rows = [genesis.franka_reach.task(seed=s) for s in (0, 1)]
    agent = load_agent(f"lerobot:{path}")
    ours = asyncio.run(run(rows, agent, LocalRuntime(fresh), rollout_timeout=3000))
    for mine, ref in zip(ours, theirs, strict=True):
        assert mine.error is None, mine.error
        assert (mine.steps, mine.success) == (ref.length, ref.success)
        assert mine.total_reward == pytest.approx(ref.reward, abs=1e-9)
